"""Warm standby for restart resizes: the next driver gets ready while the current one runs.

A restart resize used to stop the driver and only then start the next one, so the pause held
the new driver's whole start (PySpark's JVM, the SparkContext, registration with the master:
20-30 s on a small machine). A standby driver does all that first and then waits, touching
neither the checkpoint nor the output; the supervisor stops the current driver at a batch
boundary and promotes the standby, which starts the query from the same checkpoint (its
transactional committer fences the old one, as on any restart).

Getting "ready" includes a *rehearsal*: the job's own query runs two small batches over the last
records of the input into a scratch checkpoint, its output dropped. New executor JVMs are cold
(class loading, JIT, generated code for every stage, the state store's native library, the Kafka
reader's Python workers): a promoted query's first batch took 30-40 s for what a warm one does
in 3. The rehearsal pays that before the promotion, while the current driver still runs.

Files in ``apps/APP/``: ``standby.json`` (the standby's pid, once its SparkContext is up),
``standby.go`` (written by the promotion) and ``standby-rehearsal/`` (the scratch checkpoint,
removed after the rehearsal).

Here: the standby's wait (``Standby``) and the rehearsal (``QueryRehearsal``), which a new
executor's streaming warm-up runs too (``warmup.AppWarmup``); the signals themselves are the
app's (``app.control``: the supervisor reads and writes them without the Spark runtime).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamops.app.control import clear_standby_signals, mark_standby_ready
from streamops.app.dir import AppDir
from streamops.kafka.config import KafkaConfig
from streamops.spec import AppSpec

log = logging.getLogger("streamops.runtime")

REHEARSAL = "standby-rehearsal"
#: records per input partition the rehearsal reads (the newest ones), in REHEARSAL_BATCHES batches
REHEARSAL_RECORDS = 500
REHEARSAL_BATCHES = 2
#: the rehearsal stops after this long even if its batches have not all run (a partly warm
#: standby still beats a cold one, and readiness must stay well inside the supervisor's wait)
REHEARSAL_BUDGET_S = 120.0


def await_promotion(app: AppDir, should_stop: Callable[[], bool], idle: Callable[[], None],
                    timeout: float = 900.0, poll: float = 0.1) -> bool:
    """Wait (ready) until promoted (True) or stopped / timed out (False)."""
    mark_standby_ready(app)
    deadline = time.monotonic() + timeout
    while not should_stop() and time.monotonic() < deadline:
        if app.standby_go.exists():
            clear_standby_signals(app)
            return True
        idle()
        time.sleep(poll)
    return False


def _warm(modules: tuple[str, ...], hold: float):
    def run(_rows):
        import importlib
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


def rehearsal_range(watermarks: dict[str, dict[int, tuple[int, int]]],
                    per_partition: int = REHEARSAL_RECORDS) -> tuple[dict, dict, int]:
    """(start, end, records): the newest ``per_partition`` records of every input partition."""
    start: dict[str, dict[str, int]] = {}
    end: dict[str, dict[str, int]] = {}
    total = 0
    for topic, parts in watermarks.items():
        for p, (lo, hi) in parts.items():
            first = max(lo, hi - per_partition)
            start.setdefault(topic, {})[str(p)] = first
            end.setdefault(topic, {})[str(p)] = hi
            total += hi - first
    return start, end, total


def limit_partitions(start: dict[str, dict[str, int]], end: dict[str, dict[str, int]], keep: int) -> int:
    """Empty every range of a ``rehearsal_range`` but the first ``keep`` non-empty ones (start
    moved up to end, in place); returns the records left."""
    total = 0
    for topic in sorted(start):
        for p in sorted(start[topic], key=int):
            size = end[topic][p] - start[topic][p]
            if size > 0 and keep > 0:
                keep -= 1
                total += size
            else:
                start[topic][p] = end[topic][p]
    return total


def rehearse(start_query: Callable[[Path, Callable], object], workdir: Path, *, batches: int = REHEARSAL_BATCHES,
             timeout: float = REHEARSAL_BUDGET_S, should_stop: Callable[[], bool] = lambda: False) -> list[float]:
    """Run the job's query (``start_query(checkpoint, sink)``) until ``batches`` batches ran; the
    sink it is given returns nothing anywhere. Returns each batch's seconds. The scratch
    checkpoint is removed whatever happens."""
    shutil.rmtree(workdir, ignore_errors=True)
    took: list[float] = []
    last = [time.monotonic()]

    def done_batch(_batch_id: int) -> None:
        now = time.monotonic()
        took.append(round(now - last[0], 2))
        last[0] = now

    query = start_query(workdir, done_batch)
    try:
        deadline = time.monotonic() + timeout
        while query.isActive and len(took) < batches and time.monotonic() < deadline and not should_stop():
            time.sleep(0.1)
        if not query.isActive and query.exception() is not None:
            raise RuntimeError(str(query.exception()))
    finally:
        try:
            query.stop()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return took


class QueryRehearsal:
    """The job's query over the newest input records, into a scratch checkpoint
    (``apps/APP/NAME``), output dropped: a standby's rehearsal, and a new executor's streaming
    warm-up (``warmup.AppWarmup``)."""

    def __init__(self, spark: Any, spec: AppSpec, kafka: KafkaConfig, *, build: Callable, to_records: Callable,
                 app_dir: AppDir, stop: threading.Event) -> None:
        self.spark, self.spec, self.kafka = spark, spec, kafka
        self.build, self.to_records = build, to_records
        self.dir, self.stop = app_dir, stop

    def __call__(self, *, per_partition: int = REHEARSAL_RECORDS, batches: int = REHEARSAL_BATCHES,
                 name: str = "standby-rehearsal", on_start: Callable | None = None,
                 timeout: float = REHEARSAL_BUDGET_S, partitions: int | None = None,
                 encode: bool = True) -> list[float]:
        """Each batch's seconds; [] when the input is empty. ``on_start(query)`` runs right after
        the query starts (before its first batch is planned); ``partitions``: read only that many
        input partitions (fewer read tasks); ``encode``: run the sink's encoding too (the driver
        side: a new driver's is cold, a running one's is not)."""
        from streamops.kafka.admin import end_offsets

        spec = self.spec
        start, end, total = rehearsal_range({t: end_offsets(self.kafka, t) for t in spec.input_topics}, per_partition)
        if partitions is not None:
            total = limit_partitions(start, end, partitions)
        if total == 0:
            return []

        def start_query(checkpoint: Path, done: Callable[[int], None]):
            query = self._start(checkpoint, done, start, end, max(1, total // batches), name, encode)
            if on_start is not None:
                on_start(query)
            return query

        return rehearse(start_query, self.dir.scratch(name), batches=batches, timeout=timeout,
                        should_stop=self.stop.is_set)

    def _start(self, checkpoint: Path, done: Callable[[int], None], start: dict, end: dict, per_trigger: int,
               name: str, encode: bool):
        from streamops.spark.kafka_io import read_kafka

        spark, spec = self.spark, self.spec

        def sink(df, batch_id: int) -> None:
            table = df.toArrow()
            if encode:
                self.to_records(table, batch_id)  # encoded like a real batch, sent nowhere
            done(batch_id)

        raw = read_kafka(spark, kafka=self.kafka,
                         subscribe=",".join(spec.input_topics), starting_offsets=json.dumps(start),
                         stop_at_offsets=end, max_offsets_per_trigger=per_trigger,
                         fail_on_data_loss=False)
        return (self.build(raw).writeStream.queryName(f"{spec.name}-{name}").outputMode("update")
                .foreachBatch(sink).option("checkpointLocation", str(checkpoint))
                .trigger(processingTime="0 seconds").start())


class Standby:
    """A driver launched as a standby: it settles its executors, rehearses the query (or at least
    starts the Python workers with ``modules``), then waits, ready, for its promotion."""

    def __init__(self, spark: Any, app_dir: AppDir, *, scaler: Any, settle: Callable[..., None],
                 rehearse: QueryRehearsal, stop: threading.Event, modules: tuple[str, ...]) -> None:
        self.spark, self.dir, self.scaler, self.settle = spark, app_dir, scaler, settle
        self.rehearse, self.stop, self.modules = rehearse, stop, modules

    def wait(self) -> bool:
        """Wait, ready, for the promotion (True); False if stopped or never promoted. Nothing
        about the app (checkpoint, ledger, heartbeat) is touched before it."""
        spark, scaler, stop = self.spark, self.scaler, self.stop
        last = [0.0]

        def idle() -> None:  # executors the master launched beyond the target: no task runs yet
            if scaler is not None and time.monotonic() - last[0] > 1.0:
                last[0] = time.monotonic()
                scaler.trim()

        target = scaler.target if scaler is not None else spark.sparkContext.defaultParallelism
        self.settle(timeout=120)  # the executors it will run with, registered before it is ready
        self._warm_up(target)
        log.warning("standby: SparkContext %s ready; waiting to be promoted", spark.sparkContext.applicationId)
        promoted = await_promotion(self.dir, stop.is_set, idle)
        log.warning("standby %s", "promoted: starting the query" if promoted else "not promoted: exiting")
        return promoted

    def _warm_up(self, target: int) -> None:
        t0 = time.monotonic()
        try:
            took = self.rehearse()
            if took:
                log.warning("standby: rehearsed %d batches of the query in %.1f s (%s s each)", len(took),
                            time.monotonic() - t0, took)
            else:  # nothing to read yet: at least start the Python workers and their imports
                warmed = warm_executors(self.spark, self.modules, tasks=2 * target)
                log.warning("standby: no input to rehearse with; warmed %d Python workers in %.1f s",
                            len({p for p, _t in warmed}), time.monotonic() - t0)
        except Exception as exc:  # noqa: BLE001 - a cold start is slower, not wrong
            log.warning("standby: warm-up failed (%s); going on cold", str(exc).splitlines()[0][:200])
