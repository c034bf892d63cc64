"""``streamops app lint --from-file``: record lines keep their topic, partition, key and timestamp
beside plain lines; bad lines are refused with their line numbers (exit 2); and lint warns when
its input makes more than ``LATE_SHARE`` of the records late."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from streamops.cli import main
from streamops.job import Job, Record, Reject, is_text, json_object
from streamops.kafka.produce import default_partition
from streamops.state.lint import LATE_RECORDS, lint, render
from streamops.state.sample import LATE_SHARE, Lateness, file_records
from tests.fixtures.job_repo import REPO, write_repo

T0 = 1_767_225_600_000


class Visits(Job):
    """Counts a user's visits; stream time from the Kafka timestamp (no ``timestamp()``), no grace."""

    key_name = "user"
    grace_ms = 0

    def parse(self, record: Record):
        obj = json_object(record.value)
        if isinstance(obj, Reject):
            return obj
        return obj if is_text(obj.get("user")) else Reject("missing_user")

    def key(self, event) -> str:
        return event["user"]

    def initial(self, key: str):
        return 0

    def update(self, key: str, state, events):
        return state + len(events)


#: the module of an app whose job is ``Visits`` (``find_job`` takes the class the module defines)
VISITS_MODULE = "from tests.unit.state.test_lint_sample_files import Visits as _Visits\n\n\n" \
                "class Visits(_Visits):\n    pass\n"


def _write(path: Path, lines: Sequence[str | dict]) -> str:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return str(path)


# -- the two kinds of lines ------------------------------------------------------------------------
def test_record_lines_keep_topic_partition_key_and_timestamp(tmp_path: Path) -> None:
    f = _write(tmp_path / "mixed.jsonl", [
        {"topic": "views", "partition": 3, "key": "u1", "timestamp": T0 + 5, "value": {"user": "u1"}},
        {"topic": "clicks", "value": {"user": "u2"}, "timestamp": T0},  # placed by the job's key
        "",  # blank lines are skipped (and counted in line numbers)
        {"topic": "clicks", "key": None, "value": "not json"},  # no key: round-robin
        {"topic": "clicks", "key": "k1", "value": None},  # a key of its own, no value
        {"value": {"user": "u3"}, "partition": 0, "topic": "views"},
    ])
    plain = _write(tmp_path / "plain.jsonl", ['{"user": "u1"}', '{"user": "u1", "note": "a plain value"}'])
    records = file_records(Visits, "visits", ["clicks", "views"], 4, [f, f"views={plain}"])
    assert [default_partition(k, 4) for k in (b"u1", b"u2", b"k1")] == [0, 2, 1]
    assert records == [
        Record("views", 3, 0, b"u1", b'{"user":"u1"}', T0 + 5),  # default_partition(b"u1", 4) is 0: kept at 3
        Record("clicks", 2, 0, b"u2", b'{"user":"u2"}', T0),  # default_partition(b"u2", 4)
        Record("clicks", 0, 0, None, b"not json", None),
        Record("clicks", 1, 0, b"k1", None, None),  # default_partition(b"k1", 4)
        Record("views", 0, 0, b"u3", b'{"user":"u3"}', None),  # no "key": the job's, the partition kept
        Record("views", 0, 1, b"u1", b'{"user": "u1"}', None),  # plain lines: the value as written
        Record("views", 0, 2, b"u1", b'{"user": "u1", "note": "a plain value"}', None),
    ]


def test_a_line_without_a_key_member_is_keyed_by_the_job(tmp_path: Path) -> None:
    f = _write(tmp_path / "k.jsonl", [{"partition": 2, "value": {"user": "u3"}}, {"value": {"user": "u3"}},
                                      '{"user": "u3"}', {"value": "{oops"}])
    records = file_records(Visits, "visits", ["clicks"], 4, [f])
    assert [(r.partition, r.key) for r in records] == [
        (2, b"u3"), (default_partition(b"u3", 4), b"u3"), (default_partition(b"u3", 4), b"u3"), (0, None)]


# -- bad lines --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("line", "problem"), [
    ({"topic": "views", "partition": 4, "value": "x"},
     "partition 4 is not a partition of views: the app's input_partitions is 4 (0 to 3)"),
    ({"topic": "views", "partition": -1, "value": "x"}, "partition -1 is not a partition of views"),
    ({"topic": "views", "partition": "1", "value": "x"}, 'partition "1" is not a partition of views'),
    ({"topic": "views", "partition": True, "value": "x"}, "partition true is not a partition of views"),
    ({"topic": "orders", "value": "x"}, 'topic "orders" is not an input topic of visits (it reads clicks, views)'),
    ({"value": "x"}, ('a record line without "topic" for visits, which reads several topics (clicks, views): '
                      'give --from-file TOPIC=F.jsonl for each topic to feed, or give the line its "topic"')),
    ('{"user": "u1"}', "a plain line (the value alone) for visits, which reads several topics"),
    ({"topic": "views", "key": 7, "value": "x"}, "key must be a string or null (no key), got 7"),
    ({"topic": "views", "timestamp": "2026-01-01", "value": "x"},
     'timestamp "2026-01-01" is not epoch milliseconds (a whole number from 0 to 9007199254740991)'),
    ({"topic": "views", "timestamp": 1.5, "value": "x"}, "timestamp 1.5 is not epoch milliseconds"),
    ({"topic": "views", "timestamp": -1, "value": "x"}, "timestamp -1 is not epoch milliseconds"),
])
def test_a_bad_line_is_refused_naming_its_line_and_problem(tmp_path: Path, line, problem: str) -> None:
    good = {"topic": "views", "value": {"user": "u1"}}
    f = _write(tmp_path / "bad.jsonl", [good, "", good, line, good])
    with pytest.raises(Exception) as caught:
        file_records(Visits, "visits", ["clicks", "views"], 4, [f])
    assert type(caught.value).__name__ == "UsageError" and caught.value.exit_code == 2
    assert str(caught.value).startswith(f"--from-file: 1 bad line:\n  {f} line 4: {problem}")


def test_many_bad_lines_are_counted_and_the_first_ones_shown(tmp_path: Path) -> None:
    f = _write(tmp_path / "bad.jsonl", [{"topic": "clicks", "partition": 9, "value": "x"}] * 8)
    with pytest.raises(Exception, match=r"^--from-file: 8 bad lines, the first 5:\n") as caught:
        file_records(Visits, "visits", ["clicks"], 4, [f])
    assert [int(n) for n in re.findall(r"line (\d+):", str(caught.value))] == [1, 2, 3, 4, 5]


def test_the_cli_refuses_a_bad_line_with_exit_2(tmp_path: Path, capsys) -> None:
    f = _write(tmp_path / "bad.jsonl", [{"topic": "orders-placed", "partition": 3, "value": {"sku": "a"}}])
    assert main(["app", "lint", "enriched_orders", "--no-spark", "--from-file", f]) == 2
    err = capsys.readouterr().err
    assert f"{f} line 1: partition 3 is not a partition of orders-placed: the app's input_partitions is 3 (0 to 2)" \
        in err


# -- the documented example -------------------------------------------------------------------------
def _doc() -> str:
    return (REPO / "docs" / "writing-a-job.md").read_text()


def test_the_documented_sample_file_is_read_as_documented(tmp_path: Path, capsys) -> None:
    (block,) = re.findall(r"```jsonl\n(.*?)```", _doc(), re.DOTALL)
    f = str(tmp_path / "sample.jsonl")
    Path(f).write_text(block)
    from jobs.enriched_orders import EnrichedOrders

    records = file_records(EnrichedOrders, "enriched_orders", ["orders-placed", "product-prices"], 3, [f])
    assert default_partition(b"sku0001", 3) == 0 and default_partition(b"sku0002", 3) == 1  # as the doc says
    assert [(r.topic, r.partition, r.key, r.timestamp_ms) for r in records] == [
        ("product-prices", 2, b"sku0001", T0), ("orders-placed", 2, b"sku0001", T0 + 1000),
        ("orders-placed", 1, b"sku0002", None), ("orders-placed", 0, None, None)]
    assert main(["app", "lint", "enriched_orders", "--no-spark", "--from-file", f, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["warnings"] == [] and report["topics"] == {"product-prices": 1, "orders-placed": 3}
    assert next(c for c in report["checks"] if c["name"] == "parse")["detail"] == "3 events, 1 rejected"
    # the refusal the doc quotes is the one a line with partition 3 gets
    quoted = re.search(r"`sample\.jsonl line 4: (partition 3 [^`]*)`", " ".join(_doc().split()))
    assert quoted is not None
    Path(f).write_text("".join(block.splitlines(keepends=True)[:3]) + json.dumps(
        {"topic": "orders-placed", "partition": 3, "value": "x"}) + "\n")
    with pytest.raises(Exception) as caught:
        file_records(EnrichedOrders, "enriched_orders", ["orders-placed", "product-prices"], 3, [f])
    assert f"{f} line 4: {quoted[1]}" in str(caught.value)


# -- late records -----------------------------------------------------------------------------------
#: 480 visits of 24 users one second apart, as a keyless producer spread them over 4 partitions
VISITS = [(f"u{i % 24}", T0 + i * 1000, i % 4) for i in range(480)]


def _late_by_the_rule(lines: Sequence[tuple[str, int]], partitions: int) -> int:
    """Late records, counted here from the rule (stream_time.py): each partition's records in file
    order, one more than grace_ms (0) behind the largest time its partition showed before it."""
    top: dict[int, int] = {}
    late = 0
    for user, ts in lines:
        p = default_partition(user.encode(), partitions)
        late += p in top and ts < top[p]
        top[p] = max(top.get(p, ts), ts)
    return late


def test_a_file_in_partition_order_placed_by_key_makes_many_late_and_lint_warns(tmp_path: Path) -> None:
    by_partition = sorted(VISITS, key=lambda v: (v[2], v[1]))  # exported partition by partition
    f = _write(tmp_path / "by_partition.jsonl",
               [{"topic": "visits", "timestamp": ts, "value": {"user": u}} for u, ts, _p in by_partition])
    records = file_records(Visits, "visits", ["visits"], 4, [f])
    late = _late_by_the_rule([(u, ts) for u, ts, _p in by_partition], 4)
    assert late > 0.5 * len(VISITS), late  # the sample's order, not the input, made them late
    report = lint(Visits, records)
    assert report.ok  # a warning, not a failed check
    (warning,) = report.warnings
    assert warning.name == LATE_RECORDS
    assert warning.counts == {"late": late, "records": 480, "share": round(late / 480, 4), "limit": LATE_SHARE}
    assert warning.detail.startswith(f"{late:,} of 480 records ({late / 480:.1%}) are late (DLQ reason 'late'), "
                                     f"more than the 5% lint expects of a sample: ")
    assert "grace_ms = 0 ms" in warning.detail and "Lines in partition order rather than time order" in warning.detail
    text = render(report)
    assert text.splitlines()[0] == "lint Visits: OK, 1 warning (480 sample records)"
    assert f"  WARN late records: {late:,} of 480 records" in text


def test_the_same_file_with_its_partitions_or_in_time_order_makes_none_late(tmp_path: Path) -> None:
    by_partition = sorted(VISITS, key=lambda v: (v[2], v[1]))
    kept = _write(tmp_path / "kept.jsonl", [{"topic": "visits", "partition": p, "key": u, "timestamp": ts,
                                             "value": {"user": u}} for u, ts, p in by_partition])
    timed = _write(tmp_path / "timed.jsonl", [{"timestamp": ts, "value": {"user": u}} for u, ts, _p in VISITS])
    for f in (kept, timed):
        report = lint(Visits, file_records(Visits, "visits", ["visits"], 4, [f]))
        assert report.warnings == [], render(report)
        assert "WARN" not in render(report)


def test_the_warning_is_for_more_than_the_share() -> None:
    assert LATE_SHARE == 0.05
    assert not Lateness(20, 400, 0, 10).warns() and Lateness(21, 400, 0, 10).warns()
    assert not Lateness(0, 0, None, None).warns()


def test_the_cli_shows_the_warning_in_json_and_exits_0(tmp_path: Path, monkeypatch, capsys) -> None:
    root, _ = write_repo(tmp_path / "repo", {"visits": VISITS_MODULE}, {"visits": ("visits", ["visits"], 4)})
    monkeypatch.setenv("STREAMOPS_REPO", str(root))
    by_partition = sorted(VISITS, key=lambda v: (v[2], v[1]))
    f = _write(tmp_path / "by_partition.jsonl",
               [{"timestamp": ts, "value": {"user": u}} for u, ts, _p in by_partition])
    late = _late_by_the_rule([(u, ts) for u, ts, _p in by_partition], 4)
    assert main(["app", "lint", "visits", "--no-spark", "--from-file", f, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    (warning,) = report["warnings"]
    assert warning["name"] == "late records" and warning["late"] == late and warning["records"] == 480
    assert warning["detail"].startswith(f"{late:,} of 480 records")
    assert main(["app", "lint", "visits", "--no-spark", "--from-file", f]) == 0
    assert f"WARN late records: {late:,} of 480 records" in capsys.readouterr().out
