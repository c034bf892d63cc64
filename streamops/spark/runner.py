"""The streaming runtime every app's driver runs: read the input, run the job's query, commit
each micro-batch exactly once, report a heartbeat, and stop gracefully at a batch boundary.

``streamops.spark.app`` gives it the declared job's two pure pieces (``JobQuery.build`` and
``records``) through ``run_app``, which takes the checkpoint lock, starts the Spark session and
hands both to an ``AppDriver``, whose constructor wires its collaborators once.
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
from streamops.app.dir import AppDir, read_json, write_json
from streamops.app.preflight import check_lineage
from streamops.app.topics import ensure_app_topics
from streamops.checkpoints.lineage import CheckpointMismatchError
from streamops.settings import Settings
from streamops.spark.driver import live as elastic
from streamops.spark.driver import standby, warmup
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


#: seconds between liveness heartbeats while no batch commits
HEARTBEAT_S = 5.0
#: what every streaming task's Python worker imports (the Kafka reader, Arrow); plus the job module
WARM_MODULES = ("pyarrow", "confluent_kafka", "streamops.spark.job_query")
CONTROL_TICK_S = 0.5  # how often the driver looks for a live resize request and surplus executors
#: exit status of a driver refused because another one holds the app's checkpoint
REFUSED = 3


class ObservedReporter:
    """Writes the driver's observed state to the ledger. Best effort: a ledger outage is logged
    (once per kind of error) and never stops the stream."""

    def __init__(self, settings: Settings, app: str) -> None:
        self.app = app
        self._ledger = None
        self._warned: set[str] = set()
        try:
            from streamops.ledger import Ledger

            self._ledger = Ledger.open(settings.ledger_db_url)
        except Exception as exc:  # noqa: BLE001
            self._warn(exc)

    def _warn(self, exc: Exception) -> None:
        kind = type(exc).__name__
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("%s: cannot write observed state to the ledger (%s); the stream goes on",
                        self.app, str(exc).splitlines()[0][:200])

    def report(self, **fields) -> None:
        if self._ledger is None:
            return
        try:
            self._ledger.report_observed(self.app, **fields)
        except Exception as exc:  # noqa: BLE001
            self._warn(exc)

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()


def prometheus_url(ui_url: str | None) -> str | None:
    """The driver UI's Prometheus endpoint (``session.session_conf``: the streaming query's
    metrics, ``spark.sql.streaming.metricsEnabled``); the executors' are under
    ``/metrics/executors/prometheus/`` (``spark.ui.prometheus.enabled``)."""
    from streamops.spark.session import SPARK_PROMETHEUS_PATH

    return None if not ui_url else f"{ui_url.rstrip('/')}{SPARK_PROMETHEUS_PATH}/"


def dlq_reasons(records: list, dlq_topic: str) -> dict[str, int]:
    """A batch's DLQ records by reason (the header every DLQ record carries)."""
    from streamops.app.topics import H_REASON

    out: dict[str, int] = {}
    for r in records:
        if r.topic != dlq_topic:
            continue
        for k, v in r.headers or ():
            if k == H_REASON:
                reason = v.decode("utf-8", "replace")
                out[reason] = out.get(reason, 0) + 1
    return out


def progress_line(progress: dict) -> dict:
    """One line of the progress file from Spark's own JSON of a ``StreamingQueryProgress``
    (rates Spark could not compute, NaN there, are left out of its JSON: None here)."""
    return {
        "batch_id": progress["batchId"], "timestamp": progress["timestamp"],
        "input_rows": progress.get("numInputRows", 0),
        "input_rows_per_s": progress.get("inputRowsPerSecond"),
        "processed_rows_per_s": progress.get("processedRowsPerSecond"),
        "duration_ms": progress.get("durationMs", {}),
        # each as the JSON text Spark's offsets log holds, as before
        "end_offsets": [json.dumps(s.get("endOffset"), separators=(",", ":")) for s in progress.get("sources", [])],
        # per partition, what the batch read and what was there to read (lag and skew, ``observe``)
        "start_offsets": [json.dumps(s.get("startOffset"), separators=(",", ":")) for s in progress.get("sources", [])],
        "latest_offsets": [json.dumps(s.get("latestOffset"), separators=(",", ":"))
                           for s in progress.get("sources", [])],
        "state_rows": sum(op.get("numRowsTotal", 0) for op in progress.get("stateOperators", [])),
        "state_bytes": sum(op.get("memoryUsedBytes", 0) for op in progress.get("stateOperators", [])),
        **observed_facts(progress.get("observedMetrics") or {}),
    }


def observed_facts(observed: dict) -> dict:
    """What the query's observed metrics (``JobQuery.observe_input``, ``observe_state_partitions``)
    add to a progress line: the input's newest and oldest Kafka timestamps (ms; absent when the
    batch read nothing), the records per state partition (a list, partition 0 first) and the
    hottest keys."""
    from streamops.spark.job_query import OBSERVED_HOT_KEYS, OBSERVED_INPUT, OBSERVED_STATE_PARTITIONS

    out: dict = {}
    inp = observed.get(OBSERVED_INPUT) or {}
    if inp.get("newest_ms") is not None:
        out.update(input_newest_ms=int(inp["newest_ms"]), input_oldest_ms=int(inp["oldest_ms"]))
    parts = observed.get(OBSERVED_STATE_PARTITIONS) or {}
    if parts:  # a sum over no rows is null
        out["state_partition_records"] = [int(parts.get(f"p{i}") or 0) for i in range(len(parts))]
    hot = (observed.get(OBSERVED_HOT_KEYS) or {}).get("hot") or []
    if hot:  # [key (cut at HOT_KEY_CHARS), records], hottest first
        out["hot_keys"] = [[str(h["item"])[:HOT_KEY_CHARS], int(h["count"])] for h in hot if h["item"] is not None]
    return out


#: a hot key as the progress line and the metrics show it: cut to this many characters
HOT_KEY_CHARS = 80


def progress_listener(app_dir: AppDir, reporter: ObservedReporter | None = None, name: str | None = None,
                      extra: Callable[[int], dict] | None = None):
    """A StreamingQueryListener appending one JSON line per micro-batch (rates, durations, offsets)
    and reporting rates and state size as observed state; only the query called ``name`` if
    given (an executor's warm-up runs a query of its own beside the app's).

    PySpark's own wrapper converts each event into Python field by field, one Py4J call each
    (maps and lists element by element): about 0.2 s of the driver JVM's CPU and 0.08 s of
    Python's per batch, more than a small batch's own work (bench/progress_listener.py). This
    one takes the progress as Spark's JSON in one call."""
    from pyspark import SparkContext
    from pyspark.sql.streaming import StreamingQueryListener

    def on_progress(progress: dict) -> None:
        if name is not None and progress.get("name") != name:
            return
        line = progress_line(progress)
        if extra is not None:  # what the driver knows of the batch: executors, DLQ records by reason
            line.update(extra(line["batch_id"]))
        app_dir.append_progress(line)
        if reporter is not None:
            reporter.report(input_rate=line["input_rows_per_s"], processing_rate=line["processed_rows_per_s"],
                            state_rows=line["state_rows"], state_bytes=line["state_bytes"])

    class JsonCallback:
        """The Java interface PySpark's listener wrapper calls (through Py4J's callback server)."""

        def onQueryStarted(self, jevent) -> None:
            pass

        def onQueryProgress(self, jevent) -> None:
            on_progress(json.loads(jevent.progress().json()))

        def onQueryIdle(self, jevent) -> None:
            pass

        def onQueryTerminated(self, jevent) -> None:
            pass

        class Java:
            implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]

    class ProgressRecorder(StreamingQueryListener):
        """Registered with ``spark.streams.addListener`` (which starts the callback server), which
        hands Spark this listener's ``_jlistener``: here the JSON callback, not PySpark's."""

        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:  # only if PySpark called it itself
            on_progress(json.loads(event.progress.json))

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

        @property
        def _jlistener(self):
            if not hasattr(self, "_jlistenerobj"):  # one object: removeListener must find it again
                self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(JsonCallback())
            return self._jlistenerobj

    return ProgressRecorder()


def _reached(end_offset_json: str | dict | None, targets: dict[str, dict[str, int]]) -> bool:
    if not end_offset_json:
        return False
    got = json.loads(end_offset_json) if isinstance(end_offset_json, str) else end_offset_json
    return all(int(got.get(t, {}).get(p, -1)) >= off for t, parts in targets.items() for p, off in parts.items())


def run_app(
    spec: AppSpec,
    settings: Settings,
    *,
    build: Callable,
    to_records: Callable,
    options: RunOptions | None = None,
    advance_clocks: Callable | None = None,
) -> int:
    """Run the app's query until stopped (SIGTERM/SIGINT: graceful, at a batch boundary).

    Refused (``REFUSED``) before any Spark session when another driver holds the checkpoint. A
    failed query (broker restart, lost executor beyond Spark's task retries, a commit that timed
    out) is restarted from its checkpoint with exponential backoff; the transactional committer
    makes the replayed batch exactly-once. ``max_restarts`` failures in a row without a committed
    batch in between end the run with the last error.
    """
    from streamops.host.locks import LockHeld
    from streamops.kafka.admin import end_offsets
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
    stop = threading.Event()

    def request_stop(signum, _frame):
        log.warning("signal %s: stopping %s at the next batch boundary", signum, spec.name)
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    ensure_app_topics(settings, spec, ticks=advance_clocks is not None)
    targets = None
    if opts.stop_at is not None:
        targets = {t: {str(p): int(o) for p, o in ps.items()} for t, ps in opts.stop_at.items()}
    elif opts.exit_at_end:
        targets = {t: {str(p): hi for p, (_lo, hi) in end_offsets(settings.kafka_bootstrap, t).items()}
                   for t in spec.input_topics}
    spark = build_session(spec, settings, master=opts.master, parallelism=opts.parallelism,
                          extra=opts.extra_conf)
    spark.sparkContext.setLogLevel("WARN")
    driver = AppDriver(spark, spec, settings, build=build, to_records=to_records, options=opts, stop=stop,
                       targets=targets, advance_clocks=advance_clocks)
    try:
        if is_standby:
            if not driver.stand_by():
                return 0
            lock = _lock_checkpoint(spec, settings, wait_s=60.0)
        return driver.run()
    finally:
        driver.close()
        if lock is not None:
            lock.release()


class ActiveQuery:
    """The app's streaming query while it runs, as the live resize sees it (``elastic.QueryView``)."""

    def __init__(self, spark, state_partitions: int) -> None:
        self.spark = spark
        self.state_partitions = state_partitions
        self.query = None
        self._placement = None

    def attach(self, query) -> None:
        from streamops.spark.driver.placement import StatePlacement

        self.query = query
        self._placement = StatePlacement(self.spark, query, self.state_partitions)

    def detach(self) -> None:
        self.query = self._placement = None

    def idle(self) -> bool:
        return self.query is not None and _idle(self.query.status)

    def place_state(self, executors: list[str]) -> dict[int, str] | None:
        return None if self._placement is None else self._placement.rebalance(executors)


class AppDriver:
    """One app's driver runtime. Its collaborators are made and handed to each other here, once:
    the app's directory (heartbeat, progress), the observed-state reporter, and on a cluster that
    can add executors the live resize (executor scaler, executor warm-up, the control that
    applies requests) over the running query."""

    def __init__(self, spark, spec: AppSpec, settings: Settings, *, build: Callable, to_records: Callable,
                 options: RunOptions, stop: threading.Event, targets: dict | None = None,
                 advance_clocks: Callable | None = None) -> None:
        self.spark, self.spec, self.settings = spark, spec, settings
        self.build, self.to_records, self.advance_clocks = build, to_records, advance_clocks
        self.options, self.stop, self.targets = options, stop, targets
        self.dir = AppDir.of(settings, spec.name)
        self.last_executors: int | None = None  # as of the last committed batch (the progress file)
        self._facts: dict[int, dict] = {}  # batch id -> what its progress line adds (``batch_facts``)
        self.heartbeat = self.dir.heartbeat
        self.reporter = ObservedReporter(settings, spec.name)
        self.parallelism = options.parallelism or spec.parallelism.default
        self.active = ActiveQuery(spark, spec.state_partitions)
        self.warmup: warmup.ExecutorWarmup | None = None
        self.scaler: elastic.ExecutorScaler | None = None
        self.control: elastic.LiveControl | None = None
        self.settled = False  # settle_executors ran
        if supports_live(spark.sparkContext.master):
            # new executors: a pinned batch over the newest records (reads, parse), then one batch of
            # the streaming query with its state stores pinned to the executor (the stateful path)
            self._pinned_warmup = warmup.query_warmup(spark, settings.kafka_bootstrap, list(spec.input_topics),
                                                      (*WARM_MODULES, spec.job), build)
            self.warmup = warmup.ExecutorWarmup(spark, self._warm_executor)
            self.scaler = elastic.ExecutorScaler(spark, self.parallelism, cold=self.warmup.cold)
            self.control = elastic.LiveControl(self.scaler, self.dir, spec.parallelism.min,
                                               max(spec.parallelism.max, self.parallelism), self.reporter.report,
                                               warmup=self.warmup, query=self.active)

    def close(self) -> None:
        self.reporter.close()
        self.spark.stop()

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> int:
        spec, reporter, hb = self.spec, self.reporter, self.heartbeat
        reporter.report(status="starting", pid=os.getpid(), host=socket.gethostname(),
                        spark_app_id=self.spark.sparkContext.applicationId, parallelism=self.parallelism,
                        executors=None, last_batch=None, error=None)
        self.settle_executors(timeout=60)
        self.spark.streams.addListener(progress_listener(self.dir, reporter, spec.name, extra=self.batch_facts))
        failures = 0
        final = "stopped"
        opts = self.options
        try:
            while not self.stop.is_set():
                committed_before = _last_batch(hb)
                try:
                    self._run_query_once()
                    return 0
                except CheckpointMismatchError as exc:  # going on would skip output: never retried
                    log.error("refused to start (%s): %s", type(exc).__name__, exc)
                    final = "failed"
                    reporter.report(error=str(exc)[:2000])
                    return exc.exit_code
                except Exception as exc:
                    if _last_batch(hb) != committed_before:
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
                    _update_heartbeat(hb, status="restarting", error=str(exc)[:2000], restarts=failures)
                    reporter.report(status="restarting", error=str(exc)[:2000])
                    self.stop.wait(delay)
            return 0
        finally:
            _update_heartbeat(hb, status="stopped")
            reporter.report(status=final, pid=None)

    def _run_query_once(self) -> None:
        """Start the query, run until stopped / caught up (returns) or failed (raises)."""
        from streamops.app.checkpoint import checkpoint_dir
        from streamops.checkpoints import layout
        from streamops.spark.commit import BatchCommitter
        from streamops.spark.kafka_io import clamp_to_bound, read_kafka

        spark, spec, settings, control, reporter, hb = (self.spark, self.spec, self.settings, self.control,
                                                        self.reporter, self.heartbeat)
        bounds = (self.options.starting_offsets, self.options.stop_at)
        # fences any predecessor (a crashed driver's open transaction is aborted here)
        ckpt = checkpoint_dir(settings, spec)  # the offsets log holds each batch's planned input end
        committer = BatchCommitter(settings.kafka_bootstrap, spec.name, spec.commits_topic, checkpoint=ckpt)
        if self.options.stop_at is None:  # a reprocess run has its own identity, and no marker to agree with
            try:  # again at each restart: the broker may have lost a committed batch meanwhile
                check_lineage(settings, spec)
            except BaseException:
                committer.close()
                raise
        started = time.time()

        def sink(df, batch_id: int) -> None:
            t0 = time.monotonic()
            table = df.toArrow()  # always evaluate: the state store must advance even on a replay
            t1 = time.monotonic()
            resized = _control_step(control.boundary) if control is not None else None
            records = self.to_records(table, batch_id)
            end = layout.batch_end_offsets(ckpt, batch_id)
            extra = None
            if self.advance_clocks is not None:  # stream time: the clocks for the next batch, a tick
                step = self.advance_clocks(table, batch_id, ckpt, [
                    (t, int(p)) for t in spec.input_topics for p in end.get(t, {})])
                records += step.ticks
                extra = {"stream_time": stream_time_marker(step.clocks, layout.batch_watermark(ckpt, batch_id))}
            t2 = time.monotonic()
            if bounds[1] is not None:  # a bounded read consumed nothing past its bound
                end = clamp_to_bound(end, bounds[1])
            written = committer.commit(batch_id, records, input_end=end, marker_extra=extra)
            t3 = time.monotonic()
            committed_ms = int(time.time() * 1000)
            ui_url = spark.sparkContext.uiWebUrl
            write_json(hb, {
                "app": spec.name, "pid": os.getpid(), "app_id": spark.sparkContext.applicationId,
                "ui_url": ui_url, "prometheus_url": prometheus_url(ui_url),
                "status": "running", "batch_id": batch_id, "replayed": written is None,
                "records": len(records), "sink_seconds": round(t3 - t0, 3),
                "compute_seconds": round(t1 - t0, 3), "encode_seconds": round(t2 - t1, 3),
                "commit_seconds": round(t3 - t2, 3), **(resized or {}),
                "heartbeat_ms": int(time.time() * 1000), "started_ms": int(started * 1000),
            })
            self.last_executors = self._executors()
            self._facts[batch_id] = {"executors": self.last_executors, "dlq": dlq_reasons(records, spec.dlq_topic),
                                     # a replayed batch was committed by an earlier driver: no latency of its own
                                     **({"committed_ms": committed_ms} if written is not None else {})}
            reporter.report(status="running", last_batch=batch_id, executors=self.last_executors, error=None)

        topics = list(spec.input_topics)
        start = bounds[0] or layout.start_offsets(ckpt)
        stop_at = bounds[1]
        if self.advance_clocks is not None:  # stream time: the ticks come back as input (from the newest)
            topics.append(spec.ticks_topic)
            start = start and {**start, spec.ticks_topic: {"0": -1}}
            stop_at = stop_at and {**stop_at, spec.ticks_topic: {"0": 2**62}}
        raw = read_kafka(
            spark,
            bootstrap_servers=settings.kafka_bootstrap,
            subscribe=",".join(topics),
            # a bounded run, or a reset checkpoint, says where it starts until its first batch is planned
            starting_offsets=(json.dumps(start) if start and layout.last_planned_batch(ckpt) is None
                              else spec.starting_offsets),
            stop_at_offsets=stop_at,
            max_offsets_per_trigger=spec.max_offsets_per_trigger,
            fail_on_data_loss=True,
        )
        warmup.use_query_pool(spark.sparkContext)  # the query's jobs go before executors' warm-ups
        query = (
            self.build(raw, checkpoint=ckpt)
            .writeStream.queryName(spec.name)
            .outputMode("update")
            .foreachBatch(sink)
            .option("checkpointLocation", str(ckpt))
            .trigger(processingTime=spec.trigger_interval)
            .start()
        )
        self.active.attach(query)
        beat = tick = time.monotonic()
        try:
            while query.isActive:
                if control is not None and time.monotonic() - tick > CONTROL_TICK_S:
                    tick = time.monotonic()
                    change = _control_step(control.tick)
                    if change:
                        _update_heartbeat(hb, **change)
                if time.monotonic() - beat > HEARTBEAT_S:  # alive even when no batch runs
                    beat = time.monotonic()
                    _update_heartbeat(hb, status="running")
                    reporter.report(status="running", executors=self._executors())
                if self.targets is not None:
                    progress = query.lastProgress
                    if progress and _reached(progress["sources"][0].get("endOffset"), self.targets) and \
                            committer.last_committed >= progress["batchId"] and \
                            (self.advance_clocks is None or time_settled(ckpt)):
                        self.stop.set()
                if self.stop.is_set():
                    _stop_at_batch_boundary(query, committer, max(60.0, 10 * spec.trigger_seconds),
                                            ckpt / "commits")
                    if bounds[1] is not None and (last := layout.last_committed_batch(ckpt)) is not None:
                        query.awaitTermination(30)
                        layout.clamp_batch_offsets(ckpt, last, bounds[1])  # the next range starts at the bound
                    return
                time.sleep(0.2)
            error = query.exception()
            if error is not None:
                raise RuntimeError(str(error))
        finally:
            self.active.detach()
            if query.isActive:
                query.stop()
            committer.close()

    def batch_facts(self, batch_id: int) -> dict:
        """For the progress line of ``batch_id`` (Spark reports it after the batch's sink ran)."""
        facts = self._facts.pop(batch_id, {"executors": self.last_executors})
        for old in [b for b in self._facts if b < batch_id]:  # a batch Spark reported no progress for
            del self._facts[old]
        return facts

    def _executors(self) -> int:
        """Executors registered with the driver (local mode: the driver itself, 1); with live
        resizing, those not being removed."""
        if self.control is not None:
            with self.control.lock:
                return len(self.control.scaler.executors())
        sc = self.spark.sparkContext
        if sc.master.startswith("local"):
            return 1
        try:
            return max(0, sc._jsc.sc().getExecutorMemoryStatus().size() - 1)
        except Exception:  # noqa: BLE001 - e.g. Spark Connect: unknown
            return 0

    def settle_executors(self, timeout: float) -> None:
        """Before any query runs (``elastic.settle``); once: a promoted standby settled before it
        declared itself ready."""
        if self.scaler is None or self.settled:
            return
        self.settled = True
        t0 = time.monotonic()
        removed = elastic.settle(self.scaler, timeout=timeout, stopped=self.stop.is_set)
        log.info("executors settled at %d in %.1f s%s", len(self.scaler.executors()), time.monotonic() - t0,
                 f" (removed {removed})" if removed else "")

    # -- standby -------------------------------------------------------------------------------
    def stand_by(self) -> bool:
        """Wait, ready, for the promotion (True); False if stopped or never promoted. Nothing
        about the app (checkpoint, ledger, heartbeat) is touched before it."""
        spark, scaler, stop = self.spark, self.scaler, self.stop
        last = [0.0]

        def idle() -> None:  # executors the master launched beyond the target: no task runs yet
            if scaler is not None and time.monotonic() - last[0] > 1.0:
                last[0] = time.monotonic()
                scaler.trim()

        target = scaler.target if scaler is not None else spark.sparkContext.defaultParallelism
        self.settle_executors(timeout=120)  # the executors it will run with, registered before it is ready
        t0 = time.monotonic()
        try:
            took = self.rehearse()
            if took:
                log.warning("standby: rehearsed %d batches of the query in %.1f s (%s s each)", len(took),
                            time.monotonic() - t0, took)
            else:  # nothing to read yet: at least start the Python workers and their imports
                warmed = standby.warm_executors(spark, (*WARM_MODULES, self.spec.job), tasks=2 * target)
                log.warning("standby: no input to rehearse with; warmed %d Python workers in %.1f s",
                            len({p for p, _t in warmed}), time.monotonic() - t0)
        except Exception as exc:  # noqa: BLE001 - a cold start is slower, not wrong
            log.warning("standby: warm-up failed (%s); going on cold", str(exc).splitlines()[0][:200])
        log.warning("standby: SparkContext %s ready; waiting to be promoted", spark.sparkContext.applicationId)
        promoted = standby.await_promotion(self.dir, stop.is_set, idle)
        log.warning("standby %s", "promoted: starting the query" if promoted else "not promoted: exiting")
        return promoted

    def rehearse(self, *, per_partition: int = standby.REHEARSAL_RECORDS, batches: int = standby.REHEARSAL_BATCHES,
                 name: str = "standby-rehearsal", on_start: Callable | None = None,
                 timeout: float = standby.REHEARSAL_BUDGET_S, partitions: int | None = None,
                 encode: bool = True) -> list[float]:
        """The job's query over the newest input records, into a scratch checkpoint
        (``apps/APP/NAME``), output dropped (see ``standby``): [] when the input is empty.
        ``on_start(query)`` runs right after the query starts (before its first batch is planned);
        ``partitions``: read only that many input partitions (fewer read tasks); ``encode``: run the
        sink's encoding too (the driver side: a new driver's is cold, a running one's is not)."""
        from streamops.kafka.admin import end_offsets
        from streamops.spark.kafka_io import read_kafka

        spark, spec, settings = self.spark, self.spec, self.settings
        start, end, total = standby.rehearsal_range(
            {t: end_offsets(settings.kafka_bootstrap, t) for t in spec.input_topics}, per_partition)
        if partitions is not None:
            total = standby.limit_partitions(start, end, partitions)
        if total == 0:
            return []

        def start_query(checkpoint: Path, done: Callable[[int], None]):
            def sink(df, batch_id: int) -> None:
                table = df.toArrow()
                if encode:
                    self.to_records(table, batch_id)  # encoded like a real batch, sent nowhere
                done(batch_id)

            raw = read_kafka(spark, bootstrap_servers=settings.kafka_bootstrap,
                             subscribe=",".join(spec.input_topics), starting_offsets=json.dumps(start),
                             stop_at_offsets=end, max_offsets_per_trigger=max(1, total // batches),
                             fail_on_data_loss=False)
            query = (self.build(raw).writeStream.queryName(f"{spec.name}-{name}").outputMode("update")
                     .foreachBatch(sink).option("checkpointLocation", str(checkpoint))
                     .trigger(processingTime="0 seconds").start())
            if on_start is not None:
                on_start(query)
            return query

        return standby.rehearse(start_query, self.dir.scratch(name), batches=batches, timeout=timeout,
                                should_stop=self.stop.is_set)

    # -- the warm-up of executors a live scale-out adds ------------------------------------------
    def _warm_executor(self, eid: str, pin: Callable) -> None:
        """``ExecutorWarmup``'s work for one new executor. The streaming batch starts as soon as
        the executor runs its pinned job: the driver plans it meanwhile and its tasks (pinned by
        state store) are queued when the pinned job ends, so the executor never idles between the
        two, when a task of the query would take it while it is still half warm."""
        failed: list[BaseException] = []
        cancelled = threading.Event()
        streaming = threading.Thread(target=self._warm_streaming, args=(eid, failed, cancelled),
                                     name=f"warmup-stream-{eid}", daemon=True)
        streaming.start()
        t0 = time.monotonic()
        try:
            self._pinned_warmup(eid, pin)
        except BaseException:
            cancelled.set()
            raise
        log.info("executor %s: pinned warm-up batch done in %.1f s", eid, time.monotonic() - t0)
        streaming.join(2 * warmup.WARMUP_BUDGET_S)
        if failed:
            raise failed[0]

    def _warm_streaming(self, eid: str, failed: list[BaseException], cancelled: threading.Event) -> None:
        warm, sc = self.warmup, self.spark.sparkContext
        assert warm is not None
        try:
            warm.wait_released(eid, warmup.WARMUP_BUDGET_S)
            if cancelled.is_set():  # the pinned part failed before the executor was released
                return
            sc.setLocalProperty("spark.scheduler.pool", warmup.POOL)
            t0 = time.monotonic()  # the reads are warm by then: one input partition is enough
            self.rehearse(per_partition=warmup.WARMUP_RECORDS, batches=1, name=f"warmup-{eid}",
                          timeout=warmup.WARMUP_BUDGET_S, partitions=1, encode=False,
                          on_start=lambda q: warm.pin_state_stores(q, eid, self.spec.state_partitions))
            log.info("executor %s: streaming warm-up batch done in %.1f s", eid, time.monotonic() - t0)
        except BaseException as exc:  # noqa: BLE001 - reported by _warm_executor
            failed.append(exc)
        finally:
            sc.setLocalProperty("spark.scheduler.pool", None)


def time_settled(ckpt: Path) -> bool:
    """A job with stream time has fired every timer its input makes due: Spark's watermark in the
    last committed batch is the one its clocks give (the tick and the batch with no data it starts
    have run). A bounded run (reprocess, ``--exit-at-end``) stops only then."""
    from streamops.checkpoints import layout

    batch = layout.last_committed_batch(ckpt)
    clocks = layout.read_clocks(ckpt, batch) if batch is not None else None
    if clocks is None or clocks.watermark is None:
        return True
    return (layout.batch_watermark(ckpt, batch) or 0) >= clocks.watermark


def stream_time_marker(clocks, spark_watermark: int | None) -> dict:
    """What a job's stream time is after a batch, for its marker: the partitions' clocks
    (``layout.Clocks``) and Spark's watermark in that batch (rebuild-state seeds a checkpoint with both)."""
    return {"clocks": [[t, p, st] for (t, p), st in sorted(clocks.partitions.items())],
            "watermark": clocks.watermark, "spark_watermark": spark_watermark}


def _lock_checkpoint(spec: AppSpec, settings: Settings, *, wait_s: float):
    """Hold the app's checkpoint lock for this driver's life (``app.checkpoint.lock_checkpoint``)."""
    from streamops.app.checkpoint import lock_checkpoint

    return lock_checkpoint(settings, spec, wait_s=wait_s,
                           refused=f"This driver was refused: a second driver on one checkpoint would run the same "
                           f"batches under the same transactional id. To run {spec.name}, use "
                           f"`streamops deploy {spec.name}` (the supervisor runs its driver); to run it by hand, "
                           f"`streamops stop {spec.name}` first.")


def _last_batch(hb: Path) -> int | None:
    data = read_json(hb)
    return data.get("batch_id") if isinstance(data, dict) else None


def _update_heartbeat(hb: Path, **fields) -> None:
    current = read_json(hb)
    write_json(hb, {**(current if isinstance(current, dict) else {}), **fields,
                    "heartbeat_ms": int(time.time() * 1000)})


def add_run_arguments(ap) -> None:
    """The options every job's ``main`` takes (see ``run_setup``)."""
    ap.add_argument("--master", help="Spark master (default: spec, then the platform's)")
    ap.add_argument("--parallelism", type=int)
    ap.add_argument("--max-offsets-per-trigger", type=int, help="override the spec's rate limit")
    ap.add_argument("--trigger-interval", help="override the spec's trigger interval, e.g. '1 second'")
    ap.add_argument("--exit-at-end", action="store_true",
                    help="stop once the input present at start is committed (benchmarks, tests)")
    ap.add_argument("--reprocess", metavar="FILE",
                    help="a bounded run written by `streamops reprocess` (range, output version)")


def run_setup(settings: Settings, app: str, args) -> tuple[AppSpec, RunOptions]:
    """The spec a job runs (the ledger's output version, overrides, or a reprocess's own identity)
    and its run options, from ``add_run_arguments``' options."""
    from streamops.app.outputs import load_live_spec, reprocess_spec

    spec = load_live_spec(settings, app)
    overrides = {"max_offsets_per_trigger": args.max_offsets_per_trigger, "trigger_interval": args.trigger_interval}
    spec = spec.model_validate({**spec.model_dump(), **{k: v for k, v in overrides.items() if v is not None}})
    options = RunOptions(master=args.master, parallelism=args.parallelism, exit_at_end=args.exit_at_end)
    if args.reprocess:
        run = json.loads(Path(args.reprocess).read_text())
        spec = reprocess_spec(spec, run["output_version"])
        options.starting_offsets, options.stop_at = run["start"], run["stop"]
    from streamops.kafka.security import use_app

    use_app(spec, settings)  # every Kafka client of this driver is the app's (its spec's kafka overrides)
    return spec, options


def _idle(status: dict) -> bool:
    """No batch runs and no input waits (Spark's last trigger found none): the query is idle.
    A gap between two batches under load is not idle, so the loaded path stays the boundary's."""
    return not status.get("isTriggerActive", True) and not status.get("isDataAvailable", True)


def _control_step(step: Callable[[], dict | None]) -> dict | None:
    try:
        return step()
    except Exception as exc:  # noqa: BLE001 - resizing must never take the query down
        log.error("live resize control failed: %s", exc)
        return {"control_error": str(exc)[:500]}


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
