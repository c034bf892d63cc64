"""``observe.streams``: a progress line as a point (Spark's lag and the records read per
partition), an app's history across a rotation, its newest batches and their DLQ rate."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from streamops.app.dir import AppDir
from streamops.observe import streams as so
from streamops.settings import Settings

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def line(batch: int, at: datetime, *, start: dict | None, end: dict, latest: dict, rate: float = 100.0) -> dict:
    dumps = lambda o: json.dumps(o, separators=(",", ":"))
    return {"batch_id": batch, "timestamp": at.isoformat().replace("+00:00", "Z"), "input_rows": 10,
            "input_rows_per_s": 50.0, "processed_rows_per_s": rate, "duration_ms": {"triggerExecution": 800},
            "end_offsets": [dumps(end)], "start_offsets": [dumps(start) if start else "null"],
            "latest_offsets": [dumps(latest)], "state_rows": 7, "state_bytes": 4096, "executors": 2}


def test_a_progress_line_gives_the_lag_and_the_records_read_per_partition() -> None:
    p = so.point(line(3, T0, start={"in": {"0": 10, "1": 0}}, end={"in": {"0": 40, "1": 5}},
                      latest={"in": {"0": 100, "1": 5}}))
    assert p.lag == {"in/0": 60, "in/1": 0} and p.total_lag == 60
    assert p.read == {"in/0": 30, "in/1": 5}  # skew: one partition read six times the other
    assert (p.batch_id, p.at_ms, p.duration_ms, p.executors) == (3, int(T0.timestamp() * 1000), 800, 2)
    first = so.point(line(0, T0, start=None, end={"in": {"0": 4}}, latest={"in": {"0": 4}}))
    assert first.read == {} and first.lag == {"in/0": 0}  # the first batch has no start offsets


def test_history_spans_the_rotated_file_and_the_window(tmp_path) -> None:
    settings = Settings(home=tmp_path)
    d = AppDir.of(settings, "app1")
    for i in range(40):
        d.append_progress(line(i, T0 + timedelta(seconds=i), start={"in": {"0": i}}, end={"in": {"0": i + 1}},
                               latest={"in": {"0": 50}}), max_bytes=4000)
    files = d.progress_files()
    assert [f.name for f in files] == ["batches.jsonl.1", "batches.jsonl"]
    assert all(f.stat().st_size < 4000 + 1000 for f in files)  # rotated at the bound: two files at most
    kept = so.history(settings, "app1")
    assert [p.batch_id for p in kept] == list(range(kept[0].batch_id, 40)) and kept[0].batch_id > 0
    current_first = json.loads(files[1].read_bytes().splitlines()[0])["batch_id"]
    read: list[str] = []
    real_read = Path.read_bytes
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Path, "read_bytes", lambda self: read.append(self.name) or real_read(self))
        recent = so.history(settings, "app1", since_ms=int((T0 + timedelta(seconds=38)).timestamp() * 1000))
        assert [p.batch_id for p in recent] == [38, 39]
        assert current_first <= 38 and read == ["batches.jsonl"]  # the window starts in the current file
        read.clear()
        older = so.history(settings, "app1", since_ms=int((T0 + timedelta(seconds=current_first - 1)).timestamp()
                                                          * 1000))
        assert older[0].batch_id == current_first - 1 and read == ["batches.jsonl.1", "batches.jsonl"]
    thin = so.history(settings, "app1", max_points=5)  # a long window's chart: every n-th, the newest kept
    assert len(thin) <= 6 and thin[-1].batch_id == 39 and thin[0].batch_id == kept[0].batch_id
    assert d.last_progress()["batch_id"] == 39


def test_the_newest_batches_and_their_dlq_rate(tmp_path) -> None:
    settings = Settings(home=tmp_path)
    d = AppDir.of(settings, "app1")
    for i in range(60):  # one batch every 10 s for 10 minutes, 3 bad records each, 1 late every other
        ln = line(i, T0 + timedelta(seconds=10 * i), start={"in": {"0": i}}, end={"in": {"0": i + 1}},
                  latest={"in": {"0": 70}})
        d.append_progress({**ln, "dlq": {"bad_json": 3, **({"late": 1} if i % 2 else {})}}, max_bytes=20_000)
    now_ms = int((T0 + timedelta(seconds=600)).timestamp() * 1000)
    assert len(d.progress_files()) == 2  # the newest batches span the rotated file and the current one
    pts = so.recent(settings, "app1", since_ms=now_ms - 300_000)
    assert [p.batch_id for p in pts] == list(range(30, 60))
    assert so.dlq_per_minute(pts, now_ms=now_ms) == {"bad_json": 18.0, "late": 3.0}  # 90 and 15 in 5 minutes
