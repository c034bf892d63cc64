"""Warm-up of new executors before a live scale-out hands them the query's tasks.

A new executor's first tasks are slow (class loading, interpreted code, generated code compiled
by Janino, the Python daemon and worker boot, the job's imports, the first Kafka consumer): its
first Kafka-read task took 8 s where a warm one takes 0.2 s, and the whole batch waited for it.
Kafka Streams solves the same problem with warm-up replicas (KIP-441): a new instance catches up
before active tasks move to it. Here:

1. While a scale-out is under way the driver is *armed*: the executor plugin
   (``plugin/WarmupPlugin.java``) holds each executor that registers in its ``init()``, before
   it tells the driver it is launched, so Spark offers it nothing yet.
2. The driver queues a warm-up job pinned to that executor (its partitions prefer exactly that
   executor id, the process-locality wait is long from before the job is planned until its first
   task runs: only then, since the query's task sets of those moments get the long wait too and
   the Kafka source has some partitions' read tasks prefer the new executor) in a FAIR pool that
   sorts before the query's while none of its tasks runs, then releases the executor: its
   first tasks are the warm-up's. While a warm-up task runs the query's pool goes first, so the
   executors already there run warm-up tasks only when the query leaves a core idle.
3. The warm-up runs the job's imports and reads the newest records of each input partition with
   the Kafka source's reader (Python side), and runs them through the job's query as a batch
   DataFrame (JVM side: the same operators, code generation and shuffle); then one batch of the
   job's streaming query with its state stores pinned to the executor (``AppWarmup``).
4. Only then does the live resize count the executor, declare the new size and move state
   partitions onto it (``live.LiveControl``, ``placement``); the executor, started at a
   lower CPU priority, gets its priority back (``warmed``).

Without ``javac`` (no plugin jar) the warm-up still runs, but it races the query for the new
executor's first offer. The plugin's jar and the FAIR pools are settings of the driver's session
(``spark.warmup_plugin``, beside ``session``); their use is here.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamops.spark.warmup_plugin import PLUGIN_CLASS, POOL, QUERY_POOL

if TYPE_CHECKING:
    from streamops.kafka.config import KafkaConfig

log = logging.getLogger("streamops.warmup")
runtime_log = logging.getLogger("streamops.runtime")  # the driver's own lines (``AppWarmup``)

#: newest records per input partition the warm-up reads and runs through the query
WARMUP_RECORDS = 50
#: a warm-up that takes longer is cancelled and the executor used cold
WARMUP_BUDGET_S = 60.0
#: while a warm-up job is planned, tasks wait this long for their preferred executor
PINNED_WAIT = "600s"
LOCALITY_KEY = "spark.locality.wait.process"


def use_query_pool(sc: Any) -> None:
    """Run the jobs of queries this thread starts from now on in QUERY_POOL (with FAIR scheduling
    only: drivers that resize live), ahead of warm-up work."""
    if (sc.getConf().get("spark.scheduler.mode") or "").upper() == "FAIR":
        sc.setLocalProperty("spark.scheduler.pool", QUERY_POOL)


class ExecutorWarmup:
    """Warms each executor that registers while armed (see the module docstring).

    ``work(executor_id, pin)`` is the warm-up itself; ``pin(strings)`` makes a one-partition
    DataFrame of them that only that executor will process. ``cold()`` says which executors are not warm yet: the
    live resize does not count them.
    """

    def __init__(self, spark: Any, work: Callable[[str, Callable], None]) -> None:
        self.spark = spark
        self.sc = spark.sparkContext
        self.jvm = self.sc._jvm
        self.jsc = self.sc._jsc.sc()
        self.work = work
        self.plugin = None
        if PLUGIN_CLASS in (self.sc.getConf().get("spark.plugins") or ""):
            try:
                plugin = functools.reduce(getattr, PLUGIN_CLASS.split("."), self.jvm)
                plugin.armed()  # raises if the class is not on the driver's classpath
                self.plugin = plugin
            except Exception as exc:  # noqa: BLE001 - warm up without holding
                log.warning("the warm-up plugin is not loaded (%s): new executors are not held", exc)
        self.lock = threading.Lock()
        self.warming: dict[str, threading.Thread] = {}
        self.armed = False
        self.known: set[str] = set()
        self.took: dict[str, float] = {}  # executor -> seconds its warm-up took (this scale-out)
        self.released: dict[str, threading.Event] = {}  # set once the held executor may start
        self.pinning = 0  # warm-ups holding the locality wait at PINNED_WAIT
        self.saved_wait: str | None = None
        #: executors counted before their warm-up ended (``count_early``: the query was idle)
        self.early: set[str] = set()

    @property
    def holds(self) -> bool:
        return self.plugin is not None

    def arm(self, on: bool, known: set[str]) -> None:
        """Hold and warm executors that register from now on (``known``: the ones there now),
        or stop holding (and let every held executor go)."""
        with self.lock:
            self.armed = on
            if on:
                self.known = set(known)
                self.took = {}
                self.early = set()
        if self.plugin is not None:
            self.plugin.arm(on)

    def poll(self, registered: set[str]) -> None:
        """Start the warm-up of each newly held executor (without the plugin: newly registered)."""
        if not self.armed:
            return
        new = set(self.plugin.held()) if self.plugin is not None else registered - self.known
        for eid in sorted(new):
            with self.lock:
                if eid in self.warming or eid in self.took:
                    continue
                t = threading.Thread(target=self._warm, args=(eid,), name=f"warmup-{eid}", daemon=True)
                self.warming[eid] = t
            t.start()

    def cold(self, registered: set[str]) -> set[str]:
        """Registered executors not warm yet: while armed every new one (it may not have reached
        the plugin yet), else those still warming."""
        with self.lock:
            if self.armed:
                return {e for e in registered if e not in self.known and e not in self.took and e not in self.early}
            return {e for e in self.warming if e in registered and e not in self.early}

    def count_early(self, registered: set[str]) -> set[str]:
        """Count executors whose warm-up job is queued (released) before it ends; for a scale-out
        of an idle query only (``live.LiveControl``): with no batch to wait for, waiting for
        the warm-up would only delay the new size, and the warm-up's tasks, queued first, still
        run before any task of the query on that executor."""
        with self.lock:
            early = {e for e in registered if e in self.warming and e not in self.known
                     and (ev := self.released.get(e)) is not None and ev.is_set()}
            self.early |= early
        return early

    def wait_released(self, eid: str, timeout: float) -> bool:
        """Wait until executor ``eid`` is released to run its pinned warm-up job (or its warm-up ended)."""
        with self.lock:
            event = self.released.setdefault(eid, threading.Event())
        return event.wait(timeout)

    def _warm(self, eid: str) -> None:
        t0 = time.monotonic()
        group = f"streamops-warmup-{eid}"
        unpin = self._once(lambda: self.pin_locality(False))
        with self.lock:
            released_event = self.released.setdefault(eid, threading.Event())
        try:
            self._await_known(eid)
            self.pin_locality(True)
            self.sc.setLocalProperty("spark.scheduler.pool", POOL)
            self.sc.setJobGroup(group, f"streamops warm-up of executor {eid}", interruptOnCancel=True)
            released = [False]

            def pin(data: list[str]):
                frame = self._pinned_frame(eid, data)
                if not released[0]:  # the first job is queued: let the executor start
                    threading.Thread(target=self._release_when_queued, args=(eid, group, released, unpin),
                                     daemon=True).start()
                return frame

            timer = threading.Timer(WARMUP_BUDGET_S, self.sc.cancelJobGroup, args=(group,))
            timer.start()
            try:
                self.work(eid, pin)
            finally:
                timer.cancel()
            log.warning("executor %s warmed up in %.1f s", eid, time.monotonic() - t0)
        except Exception as exc:  # noqa: BLE001 - a cold executor is slower, not wrong
            log.warning("warm-up of executor %s failed (%s); using it cold", eid, str(exc).splitlines()[0][:300])
        finally:
            released_event.set()
            if self.plugin is not None:
                self.plugin.release(eid)
                self.plugin.warmed(eid)  # its priority comes back now (see WarmupAgent)
            unpin()
            self.sc.setLocalProperty("spark.scheduler.pool", None)
            self.sc.setLocalProperty("spark.jobGroup.id", None)
            with self.lock:
                self.warming.pop(eid, None)
                self.took[eid] = round(time.monotonic() - t0, 2)

    @staticmethod
    def _once(action: Callable[[], None]) -> Callable[[], None]:
        """``action`` run by the first of several callers (threads) only."""
        gate = threading.Lock()
        done = [False]

        def run() -> None:
            with gate:
                if done[0]:
                    return
                done[0] = True
            action()

        return run

    def pin_locality(self, on: bool) -> None:
        """Hold the process-locality wait at PINNED_WAIT while any warm-up's pinned job is planned
        and its first task not yet running (task sets read it when created); the value from
        before the first comes back after the last."""
        conf = self.jsc.conf()
        with self.lock:
            if on:
                if self.pinning == 0:
                    self.saved_wait = conf.get(LOCALITY_KEY) if conf.contains(LOCALITY_KEY) else None
                    conf.set(LOCALITY_KEY, PINNED_WAIT)
                self.pinning += 1
                return
            self.pinning -= 1
            if self.pinning == 0:
                if self.saved_wait is None:
                    conf.remove(LOCALITY_KEY)
                else:
                    conf.set(LOCALITY_KEY, self.saved_wait)

    def pin_state_stores(self, query: Any, eid: str, partitions: int) -> None:
        """Record executor ``eid`` as the home of every state store of a just-started query, so
        its stateful tasks prefer that executor. Must run before its first batch is planned."""
        from streamops.spark.driver.placement import StatePlacement

        StatePlacement(self.spark, query, partitions).place(dict.fromkeys(range(partitions), eid))

    def _await_known(self, eid: str, timeout: float = 10.0) -> None:
        """The task scheduler learns an executor from an offer (held ones offer 0 cores): until
        then a task preferring it has no valid locality level but ANY and would run anywhere."""
        backend, sched = self.jsc.schedulerBackend(), self.jsc.taskScheduler()
        deadline = time.monotonic() + timeout
        while not sched.isExecutorAlive(eid):
            if time.monotonic() > deadline:
                raise TimeoutError(f"executor {eid} never reached the task scheduler")
            backend.reviveOffers()
            time.sleep(0.05)

    def _release_when_queued(self, eid: str, group: str, released: list[bool], unpin: Callable[[], None]) -> None:
        """Release the held executor once the pinned job's stage is submitted (queued first);
        ``unpin`` once its first task runs there: task sets read the locality wait when they are
        made, so the pinned one keeps PINNED_WAIT, and the query's task sets made after it get
        the usual wait again instead of waiting for the warming executor (the Kafka source has
        some of its partitions' tasks prefer every registered executor, this one included)."""
        tracker = self.sc.statusTracker()
        deadline = time.monotonic() + 10.0

        def stages() -> list:
            infos = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
            return [st for info in infos if info is not None for s in info.stageIds
                    if (st := tracker.getStageInfo(s)) is not None]

        while time.monotonic() < deadline and not stages():
            time.sleep(0.02)
        released[0] = True
        if self.plugin is not None:
            self.plugin.release(eid)
        with self.lock:
            self.released.setdefault(eid, threading.Event()).set()
        log.info("executor %s released: its warm-up job is queued", eid)
        while time.monotonic() < deadline + WARMUP_BUDGET_S and eid in self.warming and not any(
                st.numActiveTasks() + st.numCompletedTasks() + st.numFailedTasks() for st in stages()):
            time.sleep(0.05)  # (a warm-up that ended first has unpinned already)
        unpin()

    def _pinned_frame(self, eid: str, data: list[str]):
        """A DataFrame (one row, ``value`` = ``data`` joined by newlines) in one partition that prefers
        executor ``eid`` (Spark's ``executor_HOST_ID`` location: that executor only). Built in the
        JVM: a Python RDD would start a second Python daemon on the executor, not the one the
        query's Arrow UDFs and Kafka reads use."""
        from pyspark.sql import DataFrame

        jvm = self.jvm
        to_seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq
        where = to_seq([f"executor_{self._host(eid)}_{eid}"])
        items = to_seq([jvm.scala.Tuple2("\n".join(data), where)])  # one element: one partition
        tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("java.lang.String"))
        jrdd = self.jsc.makeRDD(items, tag)
        jds = self.spark._jsparkSession.createDataset(jrdd, jvm.org.apache.spark.sql.Encoders.STRING())
        return DataFrame(jds.toDF(), self.spark)

    def _host(self, eid: str) -> str:
        from streamops.spark.driver.placement import executor_host

        return executor_host(self.spark, eid)


def read_newest(modules: tuple[str, ...], bootstrap: str, topics: list[str],
                client: dict[str, str] | None = None) -> Callable:
    """The pinned task (an Arrow UDF, like the query's parse): the job's imports, then the
    ``TOPIC|PARTITION|START|END`` ranges read with a read_committed consumer, as Arrow batches of
    Spark's Kafka schema without headers (the job's parse runs on them in ``build``)."""

    def run(batches):
        import importlib

        for name in modules:
            importlib.import_module(name)
        for batch in batches:
            for lines in batch.column("value").to_pylist():
                for line in (lines or "").split("\n"):
                    if line.count("|") != 3:
                        continue
                    topic, part, start, end = line.rsplit("|", 3)
                    got = read_range_arrow(bootstrap, topic, int(part), int(start), int(end), client)
                    if got is not None:
                        yield got

    return run


def read_range_arrow(bootstrap: str, topic: str, partition: int, start: int, end: int,
                     client: dict[str, str] | None = None, timeout: float = 10.0):
    """Records [start, end) of one partition (what is there within ``timeout``) as one Arrow batch
    of Spark's Kafka schema without headers; None if there are none."""
    import time

    import pyarrow as pa
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "_streamops-warmup", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True, **(client or {})})
    rows: list = []
    try:
        c.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        pos = start
        while pos < end and time.monotonic() < deadline:
            for m in c.consume(min(10_000, end - pos), timeout=0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        pos = end
                        break
                    continue
                if m.offset() >= end:
                    pos = end
                    break
                rows.append(m)
                pos = m.offset() + 1
    finally:
        c.close()
    if not rows:
        return None
    return pa.RecordBatch.from_arrays([
        pa.array([m.key() for m in rows], pa.binary()), pa.array([m.value() for m in rows], pa.binary()),
        pa.array([topic] * len(rows), pa.string()), pa.array([partition] * len(rows), pa.int32()),
        pa.array([m.offset() for m in rows], pa.int64()),
        pa.array([m.timestamp()[1] * 1000 for m in rows], pa.timestamp("us", tz="UTC")),
        pa.array([m.timestamp()[0] for m in rows], pa.int32())],
        names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"])


def query_warmup(spark: Any, kafka: KafkaConfig, topics: list[str], modules: tuple[str, ...],
                 build: Callable) -> Callable[[str, Callable], None]:
    """The warm-up of a streaming app's executor: the newest ``WARMUP_RECORDS`` of each input
    partition read on it (pinned) and run through the job's query (``build``) as a batch."""

    def work(_eid: str, pin: Callable) -> None:
        from streamops.kafka.admin import end_offsets
        from streamops.spark.driver.standby import rehearsal_range
        from streamops.spark.kafka_io import KAFKA_DDL

        start, end, _total = rehearsal_range({t: end_offsets(kafka, t) for t in topics}, WARMUP_RECORDS)
        ranges = [f"{t}|{p}|{o}|{end[t][p]}" for t, parts in start.items() for p, o in parts.items()
                  if end[t][p] > o]
        client = kafka.librdkafka()  # rendered here: the executors get the settings, not the config
        raw = pin(ranges or ["-"]).mapInArrow(read_newest(modules, kafka.bootstrap, topics, client), KAFKA_DDL)
        build(raw).toArrow()

    return work


class AppWarmup:
    """The warm-up of one new executor of this app, ``ExecutorWarmup``'s work (``executors``, wired
    here): a pinned batch over the newest records (reads, parse: ``query_warmup``), then one batch
    of the streaming query with its state stores pinned to the executor (the stateful path:
    ``rehearse``, a ``standby.QueryRehearsal``)."""

    def __init__(self, spark: Any, kafka: KafkaConfig, topics: list[str], *, modules: tuple[str, ...],
                 build: Callable, rehearse: Callable[..., list[float]], state_partitions: int) -> None:
        self.spark, self.rehearse, self.state_partitions = spark, rehearse, state_partitions
        self.pinned = query_warmup(spark, kafka, topics, modules, build)
        self.executors = ExecutorWarmup(spark, self.warm_executor)

    def warm_executor(self, eid: str, pin: Callable) -> None:
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
            self.pinned(eid, pin)
        except BaseException:
            cancelled.set()
            raise
        runtime_log.info("executor %s: pinned warm-up batch done in %.1f s", eid, time.monotonic() - t0)
        streaming.join(2 * WARMUP_BUDGET_S)
        if failed:
            raise failed[0]

    def _warm_streaming(self, eid: str, failed: list[BaseException], cancelled: threading.Event) -> None:
        warm, sc = self.executors, self.spark.sparkContext
        try:
            warm.wait_released(eid, WARMUP_BUDGET_S)
            if cancelled.is_set():  # the pinned part failed before the executor was released
                return
            sc.setLocalProperty("spark.scheduler.pool", POOL)
            t0 = time.monotonic()  # the reads are warm by then: one input partition is enough
            self.rehearse(per_partition=WARMUP_RECORDS, batches=1, name=f"warmup-{eid}",
                          timeout=WARMUP_BUDGET_S, partitions=1, encode=False,
                          on_start=lambda q: warm.pin_state_stores(q, eid, self.state_partitions))
            runtime_log.info("executor %s: streaming warm-up batch done in %.1f s", eid, time.monotonic() - t0)
        except BaseException as exc:  # noqa: BLE001 - reported by warm_executor
            failed.append(exc)
        finally:
            sc.setLocalProperty("spark.scheduler.pool", None)
