"""``observe.watermark``: a stream-time app's watermark, its lag behind the newest stream time, the
input partition that holds it and since which batch (walking back the clocks files no further
than needed and no further than they are kept), its idle partitions (the clocks file's optional
``idle`` key, present or not), and the lines ``streamops status`` prints of it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from streamops.checkpoints import layout
from streamops.host.files import write_json
from streamops.observe import watermark as wm_
from streamops.observe.watermark import Holder, IdlePartition, WatermarkStatus, watermark_status

pytestmark = pytest.mark.unit

Partition = tuple[str, int]
#: batch b is planned at T0_MS + b seconds
T0_MS = int(datetime(2026, 11, 28, 20, 0, tzinfo=UTC).timestamp() * 1000)
O0, O1, P0, P1 = ("orders-placed", 0), ("orders-placed", 1), ("product-prices", 0), ("product-prices", 1)


def write_batch(ckpt: Path, batch: int, times: dict[Partition, int | None],
                idle: dict[Partition, int] | None = None) -> None:
    """Batch ``batch`` as the driver leaves it: its offsets log entry (planned at T0_MS + batch s),
    its clocks (``times``; with ``idle``, the file's ``idle`` key, those partitions raised to the
    watermark of the others) and its commit."""
    idle_ = idle or {}
    live = [st for tp, st in times.items() if tp not in idle_]
    wm = None if not live or any(st is None for st in live) else min(live)
    parts = {tp: wm if tp in idle_ else st for tp, st in times.items()}
    layout.write_clocks(ckpt, layout.Clocks(batch, {tp: st for tp, st in parts.items() if st is not None}, wm),
                        list(times))
    if idle is not None:  # the key an idleness timeout adds (the driver's clocks step)
        path = ckpt / layout.CLOCKS / str(batch)
        raw = json.loads(path.read_text())
        raw["idle"] = {}
        for (t, p), since in sorted(idle.items()):
            raw["idle"].setdefault(t, {})[str(p)] = since
        write_json(path, raw)
    for log in ("offsets", "commits"):
        (ckpt / log).mkdir(parents=True, exist_ok=True)
    (ckpt / "offsets" / str(batch)).write_text(
        f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":{T0_MS + batch * 1000}}}\n{{"orders-placed":{{"0":{batch}}}}}\n')
    (ckpt / "commits" / str(batch)).write_text("v1\n{}")


#: the stream times after each batch: orders-placed[1] has shown nothing at first, then
#: product-prices[1] (also in batch 1), then product-prices[0] falls quiet at 500 from batch 3 on
HOLDERS = [
    {O0: 1000, O1: None, P0: 500, P1: None},   # 0: orders-placed[1] (no event; first of two)
    {O0: 2000, O1: 1500, P0: 500, P1: None},   # 1: product-prices[1] (no event)
    {O0: 2500, O1: 2500, P0: 500, P1: 400},    # 2: product-prices[1] (400): the same holder
    {O0: 3000, O1: 3500, P0: 500, P1: 3000},   # 3: product-prices[0] (500)
    *({O0: 3000 + 1000 * i, O1: 3500 + 1000 * i, P0: 500, P1: 3000 + 1500 * i} for i in range(1, 5)),  # 4-7
]


def test_the_holder_and_since_which_batch_it_holds_the_watermark(tmp_path: Path) -> None:
    for b, times in enumerate(HOLDERS):
        write_batch(tmp_path / "all", b, times)
    for b, times in enumerate(HOLDERS[:2]):
        write_batch(tmp_path / "first2", b, times)
    assert watermark_status(tmp_path / "all") == WatermarkStatus(
        batch_id=7, watermark_ms=500, newest_ms=9000, lag_ms=8500,
        holder=Holder("product-prices", 0, 500, since_batch=3, since_ms=T0_MS + 3000, since_exact=True), idle=[])
    # a partition that has shown no event holds the watermark at None; it held it in batch 1, not 0
    assert watermark_status(tmp_path / "first2") == WatermarkStatus(
        batch_id=1, watermark_ms=None, newest_ms=2000, lag_ms=None,
        holder=Holder("product-prices", 1, None, since_batch=1, since_ms=T0_MS + 1000, since_exact=True), idle=[])
    write_batch(tmp_path / "one", 0, HOLDERS[0])
    assert watermark_status(tmp_path / "one").holder == Holder("orders-placed", 1, None, 0, T0_MS, True)  # the first batch
    # the clocks of a batch that is not committed yet are not read
    (tmp_path / "all" / "commits" / "7").unlink()
    assert watermark_status(tmp_path / "all").batch_id == 6


def test_the_walk_back_reads_only_what_it_needs_and_stops_at_the_oldest_file_kept(tmp_path: Path, monkeypatch) -> None:
    last = layout.CLOCKS_RETAINED + 29
    for b in range(last + 1):  # product-prices[0] the holder throughout but in 126
        write_batch(tmp_path / "kept", b, {O0: 1000 + b, P0: 10 if b != last - 3 else 2000})
    read: list[int] = []
    clocks_file = layout.clocks_file
    monkeypatch.setattr(layout, "clocks_file", lambda ckpt, b: read.append(b) or clocks_file(ckpt, b))
    w = watermark_status(tmp_path / "kept")
    assert w.holder == Holder("product-prices", 0, 10, last - 2, T0_MS + (last - 2) * 1000, True)
    assert read == [last, last - 1, last - 2, last - 3]  # the newest file, then back to the other holder

    (tmp_path / "kept" / layout.CLOCKS / str(last - 3)).unlink()  # a gap ends the walk: it held it at least since
    read.clear()
    w = watermark_status(tmp_path / "kept")
    assert (w.holder.since_batch, w.holder.since_exact) == (last - 2, False) and len(read) == 4

    for b in range(last + 1):
        write_batch(tmp_path / "quiet", b, {O0: 1000 + b, P0: 10})
    read.clear()
    w = watermark_status(tmp_path / "quiet")
    oldest = last - layout.CLOCKS_RETAINED + 1  # write_clocks keeps CLOCKS_RETAINED files
    assert w.holder == Holder("product-prices", 0, 10, oldest, T0_MS + oldest * 1000, False)
    assert len(read) == layout.CLOCKS_RETAINED + 1 and read[-1] == oldest - 1  # the kept ones and one missing


@pytest.mark.parametrize("with_idle", [True, False])
def test_idle_partitions_never_hold_the_watermark(tmp_path: Path, with_idle: bool) -> None:
    """product-prices[0] falls quiet at 100; from batch 2 an idleness timeout releases it (the
    file's ``idle`` key, since an hour before T0): orders-placed[0] holds the watermark from there.
    Without the key (no timeout set, or a driver before it) it holds the watermark still."""
    since = T0_MS - 3_600_000
    for b in range(5):
        times = {O0: 5000 + b, O1: 6000 + b, P0: 100, P1: 7000}
        write_batch(tmp_path, b, times, {P0: since} if with_idle and b >= 2 else None)
    w = watermark_status(tmp_path)
    if with_idle:
        # product-prices[0] is raised to the watermark (5004), tied with orders-placed[0], and not chosen
        assert w == WatermarkStatus(4, 5004, 7000, 1996, Holder("orders-placed", 0, 5004, 2, T0_MS + 2000, True),
                                    [IdlePartition("product-prices", 0, since)])
    else:
        assert w == WatermarkStatus(4, 100, 7000, 6900, Holder("product-prices", 0, 100, 0, T0_MS, True), [])
    every = layout.ClocksFile(4, {O0: 10, P0: 10}, 10, {O0: since, P0: since})
    assert wm_.holding(every) is None  # every partition idle: none holds it


def test_an_app_without_stream_time_or_a_batch_has_none(tmp_path: Path) -> None:
    assert watermark_status(tmp_path / "nothing") is None
    write_batch(tmp_path, 0, {O0: 1})
    (tmp_path / layout.CLOCKS / "0").unlink()  # a job without stream time writes no clocks
    assert watermark_status(tmp_path) is None
    write_batch(tmp_path, 1, {O0: 1})
    (tmp_path / "offsets" / "1").unlink()  # the offsets log's entry gone: the batch's time is unknown
    assert watermark_status(tmp_path).holder == Holder("orders-placed", 0, 1, 1, None, False)


@pytest.mark.parametrize(("ms", "text"), [(0, "0ms"), (850, "850ms"), (42_900, "42s"), (252_000, "4m12s"),
                                          (11_100_000, "3h05m"), (183_600_000, "2d03h")])
def test_span(ms: int, text: str) -> None:
    assert wm_.span(ms) == text


def test_the_lines_of_streamops_status() -> None:
    at = int(datetime(2026, 11, 28, 20, 1, 13, tzinfo=UTC).timestamp() * 1000)
    wm = int(datetime(2026, 11, 28, 20, 10, tzinfo=UTC).timestamp() * 1000)
    held = WatermarkStatus(1830, wm, wm + 252_000, 252_000, Holder("prices", 2, wm, 1820, at, True), [])
    assert wm_.render(held.to_dict()) == [
        ("  watermark 2026-11-28T20:10:00Z (lags newest stream time by 4m12s), held by prices[2] since batch 1820 "
        "(2026-11-28T20:01:13Z)")]
    waiting = WatermarkStatus(3, None, wm + 5, None, Holder("prices", 0, None, 5, None, False),
                              [IdlePartition("prices", 1, at), IdlePartition("orders", 0, at + 250)])
    assert wm_.render(waiting.to_dict()) == [
        "  watermark none yet, held by prices[0] (no event yet) since batch 5 or earlier",
        "    idle: prices[1] since 2026-11-28T20:01:13Z, orders[0] since 2026-11-28T20:01:13.250Z"]
    nobody = WatermarkStatus(3, wm, wm, 0, None, [IdlePartition("prices", 0, at)])
    assert wm_.render(nobody.to_dict())[0] == ("  watermark 2026-11-28T20:10:00Z (lags newest stream time by 0ms), "
                                               "held by no partition (all idle)")
