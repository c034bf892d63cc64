"""Warm standby handover files: ready, promotion, and a standby that is never promoted."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from streamops.spark import standby


def test_promotion_releases_a_ready_standby(tmp_path: Path) -> None:
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(
        standby.await_promotion(tmp_path, lambda: False, lambda: None, timeout=30)))
    t.start()
    deadline = time.time() + 10
    while not standby.is_ready(tmp_path, os.getpid()):
        assert time.time() < deadline
        time.sleep(0.01)
    assert not standby.is_ready(tmp_path, os.getpid() + 1)  # another process's standby
    standby.release(tmp_path)
    t.join(10)
    assert result == [True]
    assert not (tmp_path / standby.READY).exists() and not (tmp_path / standby.GO).exists()


def test_a_stopped_or_forgotten_standby_gives_up(tmp_path: Path) -> None:
    assert standby.await_promotion(tmp_path, lambda: True, lambda: None) is False
    idles: list[int] = []
    assert standby.await_promotion(tmp_path, lambda: False, lambda: idles.append(1), timeout=0.3, poll=0.05) is False
    assert idles  # surplus executors are trimmed while waiting


def test_the_standby_flag_is_read_once(monkeypatch) -> None:
    monkeypatch.setenv(standby.STANDBY_ENV, "1")
    assert standby.requested() is True
    assert standby.STANDBY_ENV not in os.environ  # the JVM and Python workers must not inherit it
    assert standby.requested() is False


def test_the_warm_up_task_imports_the_modules_and_reports_its_worker() -> None:
    import sys

    sys.modules.pop("colorsys", None)
    out = list(standby._warm(("json", "colorsys"), hold=0.0)(iter([1, 2])))
    assert len(out) == 1 and out[0][0] == os.getpid() and out[0][1] >= 0
    assert "colorsys" in sys.modules
