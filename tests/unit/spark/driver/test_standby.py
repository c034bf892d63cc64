"""Warm standby handover files: ready, promotion, and a standby that is never promoted."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from streamops.app import control
from streamops.app.dir import AppDir
from streamops.spark.driver import standby


def test_promotion_releases_a_ready_standby(tmp_path: Path) -> None:
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(
        standby.await_promotion(AppDir(tmp_path), lambda: False, lambda: None, timeout=30)))
    t.start()
    deadline = time.time() + 10
    while not control.standby_ready(AppDir(tmp_path), os.getpid()):
        assert time.time() < deadline
        time.sleep(0.01)
    assert not control.standby_ready(AppDir(tmp_path), os.getpid() + 1)  # another process's standby
    control.release_standby(AppDir(tmp_path))
    t.join(10)
    assert result == [True]
    assert not AppDir(tmp_path).standby_ready.exists() and not AppDir(tmp_path).standby_go.exists()


def test_a_stopped_or_forgotten_standby_gives_up(tmp_path: Path) -> None:
    assert standby.await_promotion(AppDir(tmp_path), lambda: True, lambda: None) is False
    idles: list[int] = []
    assert standby.await_promotion(AppDir(tmp_path), lambda: False, lambda: idles.append(1), timeout=0.3, poll=0.05) is False
    assert idles  # surplus executors are trimmed while waiting


def test_the_warm_up_task_imports_the_modules_and_reports_its_worker() -> None:
    import sys

    sys.modules.pop("colorsys", None)
    out = list(standby._warm(("json", "colorsys"), hold=0.0)(iter([1, 2])))
    assert len(out) == 1 and out[0][0] == os.getpid() and out[0][1] >= 0
    assert "colorsys" in sys.modules


def test_the_rehearsal_reads_the_newest_records_of_every_partition() -> None:
    start, end, total = standby.rehearsal_range(
        {"in": {0: (0, 1200), 1: (100, 300), 2: (50, 50)}, "other": {0: (7, 9)}}, per_partition=500)
    assert start == {"in": {"0": 700, "1": 100, "2": 50}, "other": {"0": 7}}
    assert end == {"in": {"0": 1200, "1": 300, "2": 50}, "other": {"0": 9}}
    assert total == 500 + 200 + 0 + 2


class _Query:
    """What ``rehearse`` needs of a StreamingQuery: its sink is called from a thread."""

    def __init__(self, done, batches: int, error: str | None = None) -> None:
        self.isActive, self.stopped, self._error = True, False, error
        self._thread = threading.Thread(target=self._run, args=(done, batches))
        self._thread.start()

    def _run(self, done, batches: int) -> None:
        for b in range(batches):
            time.sleep(0.02)
            done(b)
        if self._error:
            self.isActive = False

    def exception(self):
        return self._error

    def stop(self) -> None:
        self.stopped, self.isActive = True, False
        self._thread.join()


def test_the_rehearsal_runs_its_batches_then_stops_and_removes_its_checkpoint(tmp_path: Path) -> None:
    queries: list[_Query] = []

    def start_query(checkpoint: Path, done):
        checkpoint.mkdir(parents=True)
        (checkpoint / "offsets").mkdir()
        queries.append(_Query(done, batches=5))
        return queries[-1]

    took = standby.rehearse(start_query, tmp_path / "scratch", batches=2, timeout=30)
    assert len(took) >= 2 and all(t >= 0 for t in took)
    assert queries[0].stopped and not (tmp_path / "scratch").exists()


def test_a_failed_rehearsal_raises_and_still_cleans_up(tmp_path: Path) -> None:
    def start_query(checkpoint: Path, done):
        checkpoint.mkdir(parents=True)
        return _Query(done, batches=0, error="boom")

    with pytest.raises(RuntimeError, match="boom"):
        standby.rehearse(start_query, tmp_path / "scratch", batches=2, timeout=30)
    assert not (tmp_path / "scratch").exists()


def test_limit_partitions_keeps_the_first_non_empty_ranges() -> None:
    start, end, _total = standby.rehearsal_range(
        {"in": {0: (50, 50), 1: (0, 300), 2: (0, 40), 10: (0, 9)}}, per_partition=100)
    assert standby.limit_partitions(start, end, 2) == 100 + 40
    assert start == {"in": {"0": 50, "1": 200, "2": 0, "10": 9}}  # 10 emptied: start moved to end
    assert end == {"in": {"0": 50, "1": 300, "2": 40, "10": 9}}
