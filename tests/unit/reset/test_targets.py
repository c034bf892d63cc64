"""Reset target resolution (pure): every scenario of the reset tool, clamping, and refusals."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from streamops.exceptions import UsageError
from streamops.reset.targets import ResetTarget, make_target, parse_datetime, parse_iso_duration, resolve
from streamops.reset.tool import retarget_batch

T = "user-events"
WM = {(T, 0): (0, 100), (T, 1): (10, 50), (T, 2): (0, 0)}
CUR = {(T, 0): 60, (T, 1): 40}  # partition 2 not in the checkpoint yet


def moves(target: ResetTarget, times=None) -> dict[int, tuple[int | None, int, bool]]:
    return {m.partition: (m.current, m.target, m.clamped) for m in resolve(target, watermarks=WM, current=CUR,
                                                                              times=times)}


def test_earliest_and_latest() -> None:
    assert moves(make_target(to_earliest=True)) == {0: (60, 0, False), 1: (40, 10, False), 2: (None, 0, False)}
    assert moves(make_target(to_latest=True)) == {0: (60, 100, False), 1: (40, 50, False), 2: (None, 0, False)}


def test_shift_by_is_clamped_to_the_watermarks() -> None:
    assert moves(make_target(shift_by=-45)) == {0: (60, 15, False), 1: (40, 10, True), 2: (None, 0, True)}
    assert moves(make_target(shift_by=20)) == {0: (60, 80, False), 1: (40, 50, True), 2: (None, 0, True)}
    assert moves(make_target(shift_by=0))[0] == (60, 60, False)  # 0 is a given value, not "none"


def test_datetime_uses_offsets_for_times_and_end_when_no_record() -> None:
    got = moves(make_target(to_datetime="2026-11-23T08:00:00Z"), times={(T, 0): 70, (T, 1): None, (T, 2): -1})
    assert got == {0: (60, 70, False), 1: (40, 50, False), 2: (None, 0, False)}


def test_offsets_file_moves_listed_partitions_only() -> None:
    got = moves(make_target(to_offsets={T: {"0": 5, "1": 500}}))
    assert got == {0: (60, 5, False), 1: (40, 50, True), 2: (None, 0, False)}
    with pytest.raises(ValueError, match="not an input of this app"):
        moves(make_target(to_offsets={"other": {"0": 1}}))
    with pytest.raises(ValueError, match=r"has no partition 7 \(partitions: \[0, 1, 2\]\)"):
        moves(make_target(to_offsets={T: {"7": 1}}))


def test_reprocess_skip_and_to_process_counts() -> None:
    m = {x.partition: x for x in resolve(make_target(shift_by=-10), watermarks=WM, current=CUR)}
    assert (m[0].reprocess, m[0].skip, m[0].to_process) == (10, 0, 50)
    m = {x.partition: x for x in resolve(make_target(to_latest=True), watermarks=WM, current=CUR)}
    assert (m[0].reprocess, m[0].skip, m[0].to_process) == (0, 40, 0)


@pytest.mark.parametrize("fields, message", [
    ({}, "exactly one of"),
    ({"to_earliest": True, "to_latest": True}, "got --to-earliest, --to-latest"),
    ({"by_duration": "P1M"}, "years and months have no fixed length"),
    ({"by_duration": "1 hour"}, "not an ISO 8601 duration"),
    ({"to_datetime": "yesterday"}, "--to-datetime: not an ISO 8601 date-time"),
    ({"to_offsets": {T: {"x": 1}}}, "not a partition number"),
    ({"to_offsets": {T: {"0": -3}}}, "negative"),
])
def test_bad_targets_are_usage_errors(fields, message) -> None:
    with pytest.raises(UsageError, match=message) as err:
        make_target(**fields)
    assert err.value.exit_code == 2


def test_iso_durations_and_datetimes() -> None:
    assert parse_iso_duration("PT1H30M") == timedelta(hours=1, minutes=30)
    assert parse_iso_duration("P1DT12H") == timedelta(days=1, hours=12)
    assert parse_iso_duration("P2W") == timedelta(weeks=2)
    assert parse_iso_duration("pt90s") == timedelta(seconds=90)
    for bad in ("P", "PT", "P1DT", "PT-1H"):
        with pytest.raises(ValueError):
            parse_iso_duration(bad)
    assert parse_datetime("2026-11-23T08:00:00") == datetime(2026, 11, 23, 8, tzinfo=UTC)  # no zone: UTC
    assert parse_datetime("2026-11-23T09:00:00+01:00") == datetime(2026, 11, 23, 8, tzinfo=UTC)
    now = datetime(2026, 11, 23, 12, tzinfo=UTC)
    assert make_target(by_duration="PT2H").timestamp_ms(now) == int(datetime(2026, 11, 23, 10, tzinfo=UTC).timestamp() * 1000)


def test_retarget_batch_rewrites_each_source_line_and_drops_uncommitted_batches(tmp_path) -> None:
    ckpt = tmp_path / "ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "commits").mkdir()
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1}'
    src = {T: {"0": 60, "1": 40}}
    for b in (4, 5, 6):
        (ckpt / "offsets" / str(b)).write_text("\n".join(["v1", meta, json.dumps(src), json.dumps(src)]))
        (ckpt / "offsets" / f".{b}.crc").write_bytes(b"x")
    for b in (4, 5):
        (ckpt / "commits" / str(b)).write_text("v1\n{}")
    (ckpt / "commits" / "5").unlink()  # batch 5 planned, not committed ... and 6 planned too
    retarget_batch(ckpt, 4, {T: {"0": 10, "1": 12, "2": 0}})
    lines = (ckpt / "offsets" / "4").read_text().splitlines()
    assert lines[:2] == ["v1", meta]
    assert [json.loads(x) for x in lines[2:]] == [{T: {"0": 10, "1": 12}}] * 2  # its own partitions only
    assert sorted(p.name for p in (ckpt / "offsets").iterdir()) == ["4"]  # crc of the rewritten entry dropped too
