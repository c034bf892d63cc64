"""The streaming runtime every app's driver runs: read the input, run the job's query, commit
each micro-batch exactly once (``sink``), report a heartbeat (``report``), restart a failed query
from its checkpoint, and stop gracefully at a batch boundary, or at a bounded run's end.

The entry point (``main``) gives it the declared job's two pure pieces (``JobQuery.build`` and
``records``) through ``run_app``, which takes the checkpoint lock, starts the Spark session and
hands both to an ``AppDriver``, whose constructor wires its collaborators once. Named ``loop``
(it was ``spark/runner.py``): what is left here is the driver's lifecycle, the restart loop
around each start of the query and the loop that watches it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from streamops.app.control import standby_requested, supports_live
from streamops.app.dir import AppDir
from streamops.app.preflight import check_lineage
from streamops.app.topics import ensure_app_topics
from streamops.checkpoints import layout
from streamops.checkpoints.lineage import CheckpointMismatchError
from streamops.kafka.config import KafkaConfig
from streamops.settings import Settings
from streamops.spark.driver import startup_warmup
from streamops.spark.driver.idle import IdleWake
from streamops.spark.driver.live import (
    ActiveQuery,
    ExecutorScaler,
    LiveControl,
    control_step,
    count_executors,
    settle,
)
from streamops.spark.driver.report import (
    HEARTBEAT_S,
    BatchFacts,
    ObservedReporter,
    last_batch,
    progress_listener,
    update_heartbeat,
)
from streamops.spark.driver.sink import BatchSink
from streamops.spark.driver.standby import QueryRehearsal, Standby
from streamops.spark.driver.warmup import AppWarmup, ExecutorWarmup, use_query_pool
from streamops.spec import AppSpec

log = logging.getLogger("streamops.runtime")


@dataclass
class RunOptions:
    master: str | None = None
    parallelism: int | None = None
    #: stop by itself once the input end offsets seen at start have been committed (benchmarks)
    exit_at_end: bool = False
    #: failed-query restarts in a row (without a committed batch between them) before giving up
    max_restarts: int = 10
    backoff: float = 1.0
    max_backoff: float = 30.0
    extra_conf: dict[str, str] = field(default_factory=dict)
    #: a bounded run (reprocess): start here (when the checkpoint is new) and stop once these
    #: offsets are committed; {topic: {partition: offset}}
    starting_offsets: dict[str, dict[str, int]] | None = None
    stop_at: dict[str, dict[str, int]] | None = None


#: what every streaming task's Python worker imports (the Kafka reader, Arrow); plus the job module
WARM_MODULES = ("pyarrow", "confluent_kafka", "streamops.spark.query.worker")
CONTROL_TICK_S = 0.5  # how often the driver looks for a live resize request and surplus executors
#: exit status of a driver refused because another one holds the app's checkpoint
REFUSED = 3


def run_app(
    spec: AppSpec,
    settings: Settings,
    kafka: KafkaConfig,
    *,
    build: Callable,
    to_records: Callable,
    options: RunOptions | None = None,
    advance_clocks: Callable | None = None,
    encode_spec: Callable | None = None,
    worker_modules: tuple[str, ...] = (),
) -> int:
    """Run the app's query until stopped (SIGTERM/SIGINT: graceful, at a batch boundary).

    Refused (``REFUSED``) before any Spark session when another driver holds the checkpoint. A
    failed query (broker restart, lost executor beyond Spark's task retries, a commit that timed
    out) is restarted from its checkpoint with exponential backoff; the transactional committer
    makes the replayed batch exactly-once. ``max_restarts`` failures in a row without a committed
    batch in between end the run with the last error. ``kafka``: every Kafka client's configuration
    (the app's: its spec's overrides over the platform's defaults). ``encode_spec(partitions)``:
    what the tasks need to make the records (``JobQuery.encode_spec``; ``commit_on: executors``).
    ``worker_modules``: what the query's Python workers import beyond ``WARM_MODULES``
    (``JobQuery.worker_modules``), imported on every task slot before the first batch unless
    ``STREAMOPS_STARTUP_WARMUP=0`` (``startup_warmup``).
    """
    from streamops.host.locks import LockHeld
    from streamops.spark.session import build_session

    opts = options or RunOptions()
    is_standby = standby_requested()
    # one driver per checkpoint: a second one (started by hand beside the supervisor's, or by a
    # second supervisor) would run the same batches with the same transactional id. A standby
    # takes the lock once promoted (the driver it replaces has exited by then).
    try:
        lock = None if is_standby else _lock_checkpoint(spec, settings, wait_s=0.0)
    except LockHeld as exc:
        log.error("%s", exc)
        return REFUSED
    stop = _stop_on_signals(spec.name)
    ensure_app_topics(kafka, spec, ticks=advance_clocks is not None)
    targets = _stop_targets(spec, kafka, opts)
    spark = build_session(spec, settings, master=opts.master, parallelism=opts.parallelism,
                          extra=opts.extra_conf)
    spark.sparkContext.setLogLevel("WARN")
    driver = AppDriver(spark, spec, settings, kafka, build=build, to_records=to_records, options=opts, stop=stop,
                       targets=targets, advance_clocks=advance_clocks, encode_spec=encode_spec)
    try:
        if is_standby:  # a standby rehearses the query while it waits: its executors are warm
            if not driver.stand_by():
                return 0
            lock = _lock_checkpoint(spec, settings, wait_s=60.0)
        warm = not is_standby and startup_warmup.enabled()
        return driver.run(warm_modules=(*WARM_MODULES, spec.job, *worker_modules) if warm else None)
    finally:
        driver.close()
        if lock is not None:
            lock.release()


def _stop_on_signals(app: str) -> threading.Event:
    """An event SIGTERM and SIGINT set: the driver stops at the next batch boundary."""
    stop = threading.Event()

    def request_stop(signum, _frame):
        log.warning("signal %s: stopping %s at the next batch boundary", signum, app)
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    return stop


def _stop_targets(spec: AppSpec, kafka: KafkaConfig, opts: RunOptions) -> dict[str, dict[str, int]] | None:
    """Where a bounded run stops ({topic: {partition: offset}}): a reprocess's end, or with
    ``exit_at_end`` the input's end now; None: run until stopped."""
    from streamops.kafka.admin import end_offsets

    if opts.stop_at is not None:
        return {t: {str(p): int(o) for p, o in ps.items()} for t, ps in opts.stop_at.items()}
    if opts.exit_at_end:
        return {t: {str(p): hi for p, (_lo, hi) in end_offsets(kafka, t).items()}
                for t in spec.input_topics}
    return None


class AppDriver:
    """One app's driver runtime. Its collaborators are made and handed to each other here, once:
    the app's directory (heartbeat, progress), the observed-state reporter, the batches' facts for
    their progress lines, the rehearsal and the standby wait, and on a cluster that can add
    executors the live resize (executor scaler, executor warm-up, the control that applies
    requests) over the running query."""

    def __init__(self, spark, spec: AppSpec, settings: Settings, kafka: KafkaConfig, *, build: Callable,
                 to_records: Callable, options: RunOptions, stop: threading.Event, targets: dict | None = None,
                 advance_clocks: Callable | None = None, encode_spec: Callable | None = None) -> None:
        self.spark, self.spec, self.settings, self.kafka = spark, spec, settings, kafka
        self.build, self.to_records, self.advance_clocks = build, to_records, advance_clocks
        self.encode_spec = encode_spec
        self.options, self.stop, self.targets = options, stop, targets
        self.dir = AppDir.of(settings, spec.name)
        self.facts = BatchFacts()  # what each batch's progress line adds (executors, DLQ reasons)
        self.heartbeat = self.dir.heartbeat
        self.reporter = ObservedReporter(settings, spec.name)
        self.parallelism = options.parallelism or spec.parallelism.default
        self.active = ActiveQuery(spark, spec.state_partitions)
        self.rehearse = QueryRehearsal(spark, spec, kafka, build=build, to_records=to_records,
                                       app_dir=self.dir, stop=stop)
        self.warmup: ExecutorWarmup | None = None
        self.scaler: ExecutorScaler | None = None
        self.control: LiveControl | None = None
        self.settled = False  # settle_executors ran
        self.startup_warmup: startup_warmup.StartupWarmup | None = None  # ``run``'s, while the query starts
        if supports_live(spark.sparkContext.master):
            # new executors: a pinned batch over the newest records (reads, parse), then one batch of
            # the streaming query with its state stores pinned to the executor (the stateful path)
            self.warmup = AppWarmup(spark, kafka, list(spec.input_topics),
                                    modules=(*WARM_MODULES, spec.job), build=build, rehearse=self.rehearse,
                                    state_partitions=spec.state_partitions).executors
            self.scaler = ExecutorScaler(spark, self.parallelism, cold=self.warmup.cold)
            self.control = LiveControl(self.scaler, self.dir, spec.parallelism.min,
                                       max(spec.parallelism.max, self.parallelism), self.reporter.report,
                                       warmup=self.warmup, query=self.active)
        #: stream time with idle timeouts: a quiet input's release needs a batch (``idle.IdleWake``)
        self.idle_wake = IdleWake(kafka, spec.ticks_topic, spec.idle_timeout_ms) \
            if advance_clocks is not None and spec.idle_timeouts else None
        self.standby = Standby(spark, self.dir, scaler=self.scaler, settle=self.settle_executors,
                               rehearse=self.rehearse, stop=stop, modules=(*WARM_MODULES, spec.job))

    def close(self) -> None:
        if self.startup_warmup is not None:
            self.startup_warmup.cancel()
        self.reporter.close()
        if self.idle_wake is not None:
            self.idle_wake.close()
        self.spark.stop()

    # -- the run: the restart loop -------------------------------------------------------------
    def run(self, warm_modules: tuple[str, ...] | None = None) -> int:
        """The restart loop. ``warm_modules``: imported on every task slot in the background while
        the query starts (``startup_warmup``); None: no warm-up."""
        spec, reporter, hb = self.spec, self.reporter, self.heartbeat
        reporter.report(status="starting", pid=os.getpid(), host=socket.gethostname(),
                        spark_app_id=self.spark.sparkContext.applicationId, parallelism=self.parallelism,
                        executors=None, last_batch=None, error=None)
        self.settle_executors(timeout=60)
        if warm_modules is not None:
            from streamops.spark.session import ROCKSDB_PROVIDER

            provider = self.spark.sparkContext.getConf().get("spark.sql.streaming.stateStore.providerClass")
            self.startup_warmup = startup_warmup.StartupWarmup(self.spark, tuple(dict.fromkeys(warm_modules)),
                                                rocksdb=provider == ROCKSDB_PROVIDER).start()
        self.spark.streams.addListener(progress_listener(self.dir, reporter, spec.name, extra=self.facts))
        failures = 0
        final = "stopped"
        opts = self.options
        try:
            while not self.stop.is_set():
                committed_before = last_batch(hb)
                try:
                    self._run_query_once()
                    return 0
                except CheckpointMismatchError as exc:  # going on would skip output: never retried
                    log.error("refused to start (%s): %s", type(exc).__name__, exc)
                    final = "failed"
                    reporter.report(error=str(exc)[:2000])
                    return exc.exit_code
                except Exception as exc:
                    if last_batch(hb) != committed_before:
                        failures = 0
                    failures += 1
                    if failures > opts.max_restarts:
                        log.error("%s failed %d times in a row; giving up: %s", spec.name, failures, exc)
                        final = "failed"
                        reporter.report(error=str(exc)[:2000])
                        raise
                    delay = min(opts.max_backoff, opts.backoff * 2 ** (failures - 1))
                    log.warning("%s query failed (%s); restart %d/%d from the checkpoint in %.1fs",
                                spec.name, str(exc).splitlines()[0][:300], failures, opts.max_restarts, delay)
                    update_heartbeat(hb, status="restarting", error=str(exc)[:2000], restarts=failures)
                    reporter.report(status="restarting", error=str(exc)[:2000])
                    self.stop.wait(delay)
            return 0
        finally:
            update_heartbeat(hb, status="stopped")
            reporter.report(status=final, pid=None)

    # -- one start of the query ------------------------------------------------------------------
    def _run_query_once(self) -> None:
        """Start the query, run until stopped / caught up (returns) or failed (raises)."""
        from streamops.app.checkpoint import checkpoint_dir

        ckpt = checkpoint_dir(self.settings, self.spec)  # the offsets log holds each batch's planned input end
        committer = self._open_committer(ckpt)
        sink = BatchSink(self.spark, self.spec, ckpt, committer, to_records=self.to_records,
                         advance_clocks=self.advance_clocks, control=self.control, stop_at=self.options.stop_at,
                         heartbeat=self.heartbeat, reporter=self.reporter, facts=self.facts,
                         executors=self._executors, started=time.time(), tasks=self._task_commit())
        query = self._start_query(ckpt, sink)
        self.active.attach(query)
        try:
            if self._watch(query, committer, ckpt):
                return
            error = query.exception()
            if error is not None:
                raise RuntimeError(str(error))
        finally:
            self.active.detach()
            if query.isActive:
                query.stop()
            committer.close()

    def _task_commit(self):
        """``commit_on: executors``: the tasks' half of each batch's commit (``task_commit``); else None."""
        if self.spec.commit_on != "executors":
            return None
        if self.encode_spec is None:
            raise ValueError(f"{self.spec.name}: commit_on: executors, but the driver was given no encoder")
        from streamops.kafka.admin import partitions
        from streamops.spark.driver.task_commit import TaskCommit
        from streamops.spark.kafka_writer import writer_jar

        spec = self.spec
        if writer_jar() is None:  # a JRE without javac (the Docker image): the same guarantee, from the driver
            log.warning("%s: commit_on is executors, but there is no javac to build the executors' writer; "
                        "the driver commits each batch's records", spec.name)
            return None
        sinks = (spec.live_output_topic, spec.changelog_topic, spec.dlq_topic)
        counts = {t: len(partitions(self.kafka, t)) for t in sinks}
        return TaskCommit(self.spark, self.kafka, spec.name, spec.commits_topic, self.encode_spec(counts))

    def _open_committer(self, ckpt: Path):
        """The batch committer, which fences any predecessor (a crashed driver's open transaction
        is aborted here), once the checkpoint is known to still fit its marker and input."""
        from streamops.spark.commit import BatchCommitter

        settings, spec = self.settings, self.spec
        committer = BatchCommitter(self.kafka, spec.name, spec.commits_topic, checkpoint=ckpt)
        if self.options.stop_at is None:  # a reprocess run has its own identity, and no marker to agree with
            try:  # again at each restart: the broker may have lost a committed batch meanwhile
                check_lineage(settings, spec, self.kafka)
            except BaseException:
                committer.close()
                raise
        return committer

    def _start_query(self, ckpt: Path, sink: BatchSink):
        """The app's input read from where the checkpoint (or a bounded run) starts, through the
        job's query into ``sink``, started."""
        from streamops.spark.kafka_io import read_kafka

        spark, spec = self.spark, self.spec
        topics = list(spec.input_topics)
        start = self.options.starting_offsets or layout.start_offsets(ckpt)
        stop_at = self.options.stop_at
        if self.advance_clocks is not None:  # stream time: the ticks come back as input (from the newest)
            topics.append(spec.ticks_topic)
            start = start and {**start, spec.ticks_topic: {"0": -1}}
            stop_at = stop_at and {**stop_at, spec.ticks_topic: {"0": 2**62}}
        raw = read_kafka(
            spark,
            kafka=self.kafka,
            subscribe=",".join(topics),
            # a bounded run, or a reset checkpoint, says where it starts until its first batch is planned
            starting_offsets=(json.dumps(start) if start and layout.last_planned_batch(ckpt) is None
                              else spec.starting_offsets),
            stop_at_offsets=stop_at,
            max_offsets_per_trigger=spec.max_offsets_per_trigger,
            fail_on_data_loss=True,
        )
        use_query_pool(spark.sparkContext)  # the query's jobs go before executors' warm-ups
        return (
            self.build(raw, checkpoint=ckpt)
            .writeStream.queryName(spec.name)
            .outputMode("update")
            .foreachBatch(sink)
            .option("checkpointLocation", str(ckpt))
            .trigger(processingTime=spec.trigger_interval)
            .start()
        )

    def _watch(self, query, committer, ckpt: Path) -> bool:
        """While the query runs: live resize requests, the heartbeat, a bounded run's end. True
        once stopped at a batch boundary; False when the query ended by itself."""
        control, hb = self.control, self.heartbeat
        beat = tick = time.monotonic()
        while query.isActive:
            if control is not None and time.monotonic() - tick > CONTROL_TICK_S:
                tick = time.monotonic()
                change = control_step(control.tick)
                if change:
                    update_heartbeat(hb, **change)
            if time.monotonic() - beat > HEARTBEAT_S:  # alive even when no batch runs
                beat = time.monotonic()
                update_heartbeat(hb, status="running")
                self.reporter.report(status="running", executors=self._executors())
            if self.idle_wake is not None:
                self.idle_wake.poll(ckpt)
            if self.targets is not None and self._at_end(committer, ckpt):
                self.stop.set()
            if self.stop.is_set():
                self._stop(query, committer, ckpt)
                return True
            time.sleep(0.2)
        return False

    def _at_end(self, committer, ckpt: Path) -> bool:
        """A bounded run's end: its targets read and committed, and stream time settled.

        Read from the checkpoint, not from the query's progress: a query that has nothing left to
        read runs no batch and reports no progress (a driver started on a checkpoint at the end of
        its input, or a query restarted after its last batch), and it used to wait for ever."""
        if not _reached(layout.next_offsets(ckpt), self.targets):
            return False
        last = layout.last_committed_batch(ckpt)
        return ((last is None or committer.last_committed >= last) and
                (self.advance_clocks is None or time_settled(ckpt)))

    def _stop(self, query, committer, ckpt: Path) -> None:
        """Stop at a batch boundary; a bounded run's next range starts at its bound."""
        _stop_at_batch_boundary(query, committer, max(60.0, 10 * self.spec.trigger_seconds), ckpt / "commits")
        bound = self.options.stop_at
        if bound is not None and (last := layout.last_committed_batch(ckpt)) is not None:
            query.awaitTermination(30)
            layout.clamp_batch_offsets(ckpt, last, bound)  # the next range starts at the bound

    # -- executors and standby ---------------------------------------------------------------------
    def _executors(self) -> int:
        return count_executors(self.spark, self.control)

    def settle_executors(self, timeout: float) -> None:
        """Before any query runs (``live.settle``); once: a promoted standby settled before it
        declared itself ready."""
        if self.scaler is None or self.settled:
            return
        self.settled = True
        t0 = time.monotonic()
        removed = settle(self.scaler, timeout=timeout, stopped=self.stop.is_set)
        log.info("executors settled at %d in %.1f s%s", len(self.scaler.executors()), time.monotonic() - t0,
                 f" (removed {removed})" if removed else "")

    def stand_by(self) -> bool:
        """Wait, ready, for the promotion (``standby.Standby``): True once promoted."""
        return self.standby.wait()


def time_settled(ckpt: Path) -> bool:
    """A job with stream time has fired every timer its input makes due: Spark's watermark in the
    last committed batch is the one its clocks give (the tick and the batch with no data it starts
    have run). A bounded run (reprocess, ``--exit-at-end``) stops only then."""
    batch = layout.last_committed_batch(ckpt)
    clocks = layout.read_clocks(ckpt, batch) if batch is not None else None
    if clocks is None or clocks.watermark is None:
        return True
    return (layout.batch_watermark(ckpt, batch) or 0) >= clocks.watermark


def _reached(next_offsets: dict[tuple[str, int], int], targets: dict[str, dict[str, int]]) -> bool:
    """Every target partition read up to its target (``layout.next_offsets``; a partition the
    checkpoint never read is at 0: an empty one is reached)."""
    return all(next_offsets.get((t, int(p)), 0) >= off for t, parts in targets.items() for p, off in parts.items())


def _lock_checkpoint(spec: AppSpec, settings: Settings, *, wait_s: float):
    """Hold the app's checkpoint lock for this driver's life (``app.checkpoint.lock_checkpoint``)."""
    from streamops.app.checkpoint import lock_checkpoint

    return lock_checkpoint(settings, spec, wait_s=wait_s,
                           refused=f"This driver was refused: a second driver on one checkpoint would run the same "
                           f"batches under the same transactional id. To run {spec.name}, use "
                           f"`streamops deploy {spec.name}` (the supervisor runs its driver); to run it by hand, "
                           f"`streamops stop {spec.name}` first.")


def _stop_at_batch_boundary(query, committer, timeout: float, commit_log: Path | None = None) -> None:
    """Let the batch in flight commit (bounded), then stop before the next one gets far.

    Waiting for ``isTriggerActive`` to fall alone is not enough: when batches take longer than
    the trigger interval the next trigger starts at once, so the query would never look idle.
    A batch that ``stop()`` interrupts is not lost: it was not committed and is replayed.
    """
    done = committer.last_committed
    deadline = time.monotonic() + timeout
    while (query.status.get("isTriggerActive") and committer.last_committed == done
           and time.monotonic() < deadline):
        time.sleep(0.05)
    if commit_log is not None and committer.last_committed != done:
        # the sink's transaction is committed; stopping now would leave Spark's commit log one
        # batch behind the outputs (replayed and skipped on restart, but `check` and savepoints
        # see the checkpoint) — let Spark record the batch first
        marker = commit_log / str(committer.last_committed)
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    query.stop()
