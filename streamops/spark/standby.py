"""Warm standby for restart resizes: the next driver gets ready while the current one runs.

A restart resize used to stop the driver and only then start the next one, so the pause held
the new driver's whole start (PySpark's JVM, the SparkContext, registration with the master:
20-30 s on a small machine). A standby driver does all that first and then waits, touching
neither the checkpoint nor the output; the supervisor stops the current driver at a batch
boundary and promotes the standby, which starts the query from the same checkpoint (its
transactional committer fences the old one, as on any restart).

Files in ``apps/APP/``: ``standby.json`` (the standby's pid, once its SparkContext is up) and
``standby.go`` (written by the promotion).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

STANDBY_ENV = "STREAMOPS_STANDBY"
READY = "standby.json"
GO = "standby.go"


def requested() -> bool:
    """Was this driver launched as a standby? (Read once: children must not inherit it.)"""
    return os.environ.pop(STANDBY_ENV, "") == "1"


def mark_ready(app_dir: Path) -> None:
    tmp = app_dir / (READY + ".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "ready_at": time.time()}))
    tmp.replace(app_dir / READY)


def is_ready(app_dir: Path, pid: int) -> bool:
    try:
        return json.loads((app_dir / READY).read_text()).get("pid") == pid
    except (FileNotFoundError, ValueError):
        return False


def release(app_dir: Path) -> None:
    (app_dir / GO).write_text(str(time.time()))


def clear(app_dir: Path) -> None:
    for name in (READY, GO):
        (app_dir / name).unlink(missing_ok=True)


def await_promotion(app_dir: Path, should_stop: Callable[[], bool], idle: Callable[[], None],
                    timeout: float = 900.0, poll: float = 0.1) -> bool:
    """Wait (ready) until promoted (True) or stopped / timed out (False)."""
    mark_ready(app_dir)
    deadline = time.monotonic() + timeout
    while not should_stop() and time.monotonic() < deadline:
        if (app_dir / GO).exists():
            clear(app_dir)
            return True
        idle()
        time.sleep(poll)
    return False


def _warm(modules: tuple[str, ...], hold: float):
    def run(_rows):
        import importlib
        import os
        import time as t

        t0 = t.monotonic()
        for name in modules:
            importlib.import_module(name)
        took = t.monotonic() - t0
        t.sleep(hold)  # keep this core busy so the next task lands on another executor
        yield os.getpid(), round(took, 3)

    return run


def warm_executors(spark, modules: tuple[str, ...], tasks: int, hold: float = 0.5) -> list[tuple[int, float]]:
    """Start Python workers on the executors and import what the job's tasks import (the
    Kafka source reader, Arrow, the job module), so the first batch after the promotion does
    not pay for it. Python workers are reused between tasks, so the imports stay."""
    sc = spark.sparkContext
    sc.setJobDescription("streamops standby warm-up")
    try:
        return sc.parallelize(range(tasks), tasks).mapPartitions(_warm(modules, hold)).collect()
    finally:
        sc.setJobDescription(None)
