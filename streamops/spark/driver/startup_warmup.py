"""Warm-up of the executors a driver starts with, while the driver gets its query going.

A driver's first batch paid for what every later one finds ready: on ``local[2]`` a backlog's
first batch of 60,000 ``user_activity`` records took 8.2 s against 1.6-2.8 s for the next ones;
its first two read+parse tasks took 1.9 s each (0.25 s later: the Python workers' fork and the
job's imports), its first two state tasks 1.25 s (0.3 s later: RocksDB's native library among
them). Meanwhile, from the session's start to the query's first task, the driver opens its
committer (fencing, the lineage check), starts the query and plans its first batch: about 5 s in
which the executors idle.

So right after the executors settle, a background thread runs, on every task slot at once, the
Python side of the job's tasks (a worker per slot, each importing the job's modules: Spark keeps
the workers and hands them the query's tasks) and, for RocksDB state, loads its native library
in every executor's JVM. Nothing depends on it: the query starts as it did, its tasks take a slot
as soon as one is free, and a warm-up that fails is logged and forgotten.

On unless ``STREAMOPS_STARTUP_WARMUP=0``. Under CPU contention the query's first tasks do wait
for the warm-up's, which hold both slots while their workers fork and import, but that is the work
those tasks would do themselves: with eight busy processes beside it a backlog's first batch still
took less time with the warm-up than without (docs/benchmarks.md, "The startup warm-up under
contention").

New executors of a live scale-out have their own warm-up (``warmup``), pinned and held.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("streamops.runtime")

#: Spark's loader of RocksDB's JNI library (what the first RocksDB state store calls)
ROCKSDB_LOADER = "org.apache.spark.sql.execution.streaming.state.RocksDBLoader"
#: each warm-up task lasts at least this long, so all of them run at once and each slot gets its own
#: worker (a task that ended first would hand its worker to the next one)
HOLD_S = 0.5
JOB_GROUP = "streamops-startup-warmup"
#: the environment variable that turns the warm-up off (``0``)
ENABLE_ENV = "STREAMOPS_STARTUP_WARMUP"


def enabled() -> bool:
    """Whether drivers warm their task slots at start: yes unless ``ENABLE_ENV`` is ``0``."""
    return os.environ.get(ENABLE_ENV, "1") != "0"


@dataclass(frozen=True)
class SlotWarmup:
    """What a startup warm-up did: the Python workers it ran in (``(host, pid)``), over how many
    task slots, whether RocksDB's library was loaded, and how long it took."""

    slots: int
    workers: frozenset[tuple[str, int]]
    rocksdb: bool
    seconds: float


def import_modules(modules: tuple[str, ...], hold_s: float) -> Callable[[Iterator], Iterator]:
    """The warm-up task (mapInArrow): the modules imported in this worker, the task held for
    ``hold_s``, and the worker's (host, pid) as its one row."""

    def run(batches):
        import importlib
        import os
        import socket

        import pyarrow as pa

        t0 = time.monotonic()
        for name in modules:
            importlib.import_module(name)
        for _ in batches:
            pass
        time.sleep(max(0.0, hold_s - (time.monotonic() - t0)))
        yield pa.RecordBatch.from_pydict({"host": [socket.gethostname()], "pid": [os.getpid()]})

    return run


def warm_slots(spark: Any, modules: tuple[str, ...], *, rocksdb: bool, hold_s: float = HOLD_S) -> SlotWarmup:
    """One task per task slot importing ``modules`` in its Python worker; with ``rocksdb`` one per
    slot loading RocksDB's library in its executor's JVM."""
    sc = spark.sparkContext
    slots = max(1, int(sc.defaultParallelism))
    t0 = time.monotonic()
    rows = (spark.range(0, slots, 1, slots)
            .mapInArrow(import_modules(tuple(modules), hold_s), "host string, pid long").collect())
    if rocksdb:
        spark.range(0, slots, 1, slots).selectExpr(f"java_method('{ROCKSDB_LOADER}', 'loadLibrary')").collect()
    return SlotWarmup(slots, frozenset((r.host, int(r.pid)) for r in rows), rocksdb, time.monotonic() - t0)


class StartupWarmup:
    """``warm_slots`` in a daemon thread, in the warm-up pool (a live driver's query pool goes
    first); its outcome logged, a failure too, never raised. ``cancel()`` (the driver stopping)
    cancels its jobs."""

    def __init__(self, spark: Any, modules: tuple[str, ...], *, rocksdb: bool) -> None:
        self.spark, self.modules, self.rocksdb = spark, modules, rocksdb
        self.done: SlotWarmup | None = None
        self.cancelled = threading.Event()
        self.thread = threading.Thread(target=self._run, name="startup-warmup", daemon=True)

    def start(self) -> StartupWarmup:
        self.thread.start()
        return self

    def cancel(self, timeout: float = 5.0) -> None:
        if not self.thread.is_alive():
            return
        self.cancelled.set()
        with contextlib.suppress(Exception):  # the context may be stopping already
            self.spark.sparkContext.cancelJobGroup(JOB_GROUP)
        self.thread.join(timeout)

    def _run(self) -> None:
        from streamops.spark.warmup_plugin import POOL

        sc = self.spark.sparkContext
        try:
            sc.setLocalProperty("spark.scheduler.pool", POOL)
            sc.setJobGroup(JOB_GROUP, "streamops: warm-up of the executors' task slots", interruptOnCancel=True)
            done = self.done = warm_slots(self.spark, self.modules, rocksdb=self.rocksdb)
            log.info("startup warm-up: %d Python workers over %d task slots%s in %.1f s", len(done.workers),
                     done.slots, ", RocksDB loaded" if done.rocksdb else "", done.seconds)
        except Exception as exc:  # noqa: BLE001 - the query runs cold instead
            if self.cancelled.is_set():
                log.info("startup warm-up cancelled: the driver is stopping")
            else:
                log.warning("startup warm-up failed (the first batch runs cold): %s",
                            str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__)
