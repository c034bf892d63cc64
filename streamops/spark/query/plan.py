"""A declared job (``streamops.job``) as a Spark query: the driver side. ``JobQuery`` builds the plan,
states the shape facts the operations need (scans of the input, seed rows and their schema) and
hands each batch's output to ``records``; ``worker`` holds the functions the executors run.

Two shapes, chosen by the declaration:

- **aggregate** (``Job.aggregate``): parse (vectorized ``parse_arrow`` first, then ``parse`` +
  ``contribute`` per record) -> ``groupBy(key).agg(max/sum/min)`` in the RocksDB state store,
  united with the DLQ rows. The parse runs where the input is read, then one exchange by the
  job's key, which the aggregation needs and the DLQ branch reuses: one parse per record. Spark
  still counts the union's two branches as two scans of the source (two entries per offsets-log
  batch: ``sources``).
- **update** (``initial``/``update``): parse -> ``groupBy(key, lane).applyInPandasWithState``
  whose state is the serialized state (one ``blob`` column, ``state_serde``). Rejected records
  travel through the same operator in lane 1 (grouped by source partition, never given state),
  so the input is read once. The function folds each key's events in input order, emits, expires
  and writes the changelog record itself.

``records(table, batch_id)`` turns a batch's output into the records the committer writes (the
output, the changelog and the DLQ, encoded by ``records``); ``advance_clocks`` moves a job's
stream time after each batch; the query observes its input and state partitions (``observed``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from streamops.app.shape import input_scans
from streamops.arrow import DLQ_COLUMNS, parsed_arrow_schema
from streamops.job import Job
from streamops.spark.query.named import named_processor
from streamops.spark.query.observed import (
    OBSERVED_HOT_KEYS,
    OBSERVED_INPUT,
    OBSERVED_STATE_PARTITIONS,
    hot_keys,
    input_timestamps,
    state_partition_records,
)
from streamops.spark.query.records import aggregate_records, batch_headers, update_records
from streamops.spark.query.task_records import EncodeSpec
from streamops.spark.query.worker import (
    REJECT_LANE,
    TIMED_DDL,
    UPDATE_OUT_DDL,
    UPDATE_PARSED_DDL,
    UPDATE_STATE_DDL,
    parse_aggregate,
    parse_update,
    seed_state,
    seed_timed_state,
    update_state,
)


@dataclass(frozen=True)
class ClockStep:
    """``JobQuery.advance_clocks``: the stream times after a batch, and the tick to commit with it."""

    clocks: Any  # checkpoints.layout.Clocks
    ticks: list


@dataclass(frozen=True)
class Topics:
    output: str
    changelog: str
    dlq: str
    #: jobs with stream time: where the driver writes a tick when the watermark moves (read back as input)
    ticks: str | None = None


class JobQuery:
    """One job's Spark plan and the hand-over of its output rows to ``records`` (see module docstring)."""

    @classmethod
    def for_spec(cls, spec: Any, repo: Any) -> JobQuery:
        """The app's declared job with the spec's state partitions and its live topics."""
        from streamops.spec import load_job

        return cls(load_job(spec, repo), state_partitions=spec.state_partitions,
                   topics=Topics(spec.live_output_topic, spec.changelog_topic, spec.dlq_topic, spec.ticks_topic),
                   idle_timeouts_ms=spec.idle_timeout_ms)

    def __init__(self, job_cls: type[Job], *, state_partitions: int, topics: Topics | None = None,
                 idle_timeouts_ms: dict[str, int] | None = None) -> None:
        self.job_cls = job_cls
        #: per input topic: how long a partition may be quiet before it stops holding the watermark
        self.idle_timeouts_ms = dict(idle_timeouts_ms or {})
        self.job = job_cls()
        self.state_partitions = state_partitions
        self.topics = topics
        self.aggregate = job_cls.is_aggregate()
        self.timed = job_cls.has_time()
        self.named = job_cls.has_named_state()

    # -- shape facts the operations need -------------------------------------------------------
    def worker_modules(self) -> tuple[str, ...]:
        """What this query's tasks import in their Python workers beyond the platform's own (the
        startup warm-up imports them first): the job's module, and pandas where the per-key
        function runs on pandas frames (``applyInPandasWithState``, ``transformWithStateInPandas``)."""
        return (self.job_cls.__module__, *(() if self.aggregate else ("pandas",)))

    @property
    def sources(self) -> int:
        """Scans of the input in the query plan (Spark keeps one offsets entry per scan)."""
        return input_scans(self.job_cls)

    @property
    def fields(self) -> list[str]:
        return list(self.job_cls.aggregate or {})

    def parsed_schema(self) -> pa.Schema:
        """Aggregate jobs: the parse stage's rows (key, fields, then the DLQ coordinates:
        ``streamops.arrow.parsed_arrow_schema``)."""
        return parsed_arrow_schema(self.job_cls)

    def seed_ddl(self) -> str:
        """The rows a checkpoint is seeded from: one per key holding its whole state."""
        if self.aggregate:
            agg = self.job_cls.aggregate or {}
            return ", ".join([f"{self.job_cls.key_name} string", *(f"{f} {a.type}" for f, a in agg.items())])
        return "key string, lane int, blob binary"

    def seed_schema(self) -> pa.Schema:
        types = {"string": pa.string(), "long": pa.int64(), "double": pa.float64(), "int": pa.int32(),
                 "binary": pa.binary()}
        return pa.schema([(n, types[t]) for n, t in (part.split() for part in self.seed_ddl().split(","))])

    def seed_table(self, states: Mapping[str, Any]) -> pa.Table:
        """Seed rows for these states (key -> state), typed as ``seed_ddl`` says."""
        schema = self.seed_schema()
        rows = [self.seed_row(k, s) for k, s in states.items()]
        return pa.table({f.name: pa.array([r[i] for r in rows], f.type) for i, f in enumerate(schema)}, schema=schema)

    def seed_row(self, key: str, state: Any) -> tuple:
        if self.aggregate:
            return (key, *(state.get(f) for f in self.fields))
        return (key, 0, self.job_cls.state_serde.dumps(state))

    # -- the plan ---------------------------------------------------------------------------------
    def build(self, raw, checkpoint: Path | None = None):
        """Kafka-schema DataFrame (streaming or batch) -> the rows ``records`` encodes. A job with
        stream time reads its partitions' stream times from ``checkpoint``'s clocks (``layout``).
        An update job's batch DataFrame (an executor's warm-up) gets the parse stage only: Spark
        runs ``applyInPandasWithState`` in streaming queries only."""
        cols = raw.select("key", "value", "topic", "partition", "offset", "timestamp")
        if cols.isStreaming:
            cols = self.observe_input(cols)
        if self.aggregate:
            return self._build_aggregate(cols)
        return self._build_update(cols, checkpoint)

    # -- observed metrics (the end-to-end latency and the state partitions' skew, ``observe.metrics``) --
    def observe_input(self, cols):
        """The newest and oldest Kafka timestamp among the batch's input records (``input_timestamps``)."""
        ticks = self.topics.ticks if self.topics is not None and self.timed else None
        return cols.observe(OBSERVED_INPUT, *input_timestamps(ticks))

    def observe_state_partitions(self, rows, keys: list[str], only=None):
        """Records per state partition (``state_partition_records``) and the hottest keys (``hot_keys``)."""
        rows = rows.observe(OBSERVED_HOT_KEYS, *hot_keys(keys[0], only))
        counts = state_partition_records(keys, self.state_partitions, only)
        return rows.observe(OBSERVED_STATE_PARTITIONS, *counts) if counts else rows

    def _build_aggregate(self, cols):
        from pyspark.sql import functions as F

        key = self.job_cls.key_name
        # parsed where it is read, then one exchange by the job's key: it is the aggregation's own
        # distribution (no other exchange), and the DLQ branch reads the same exchange (Spark
        # reuses it), so each record is parsed and shuffled once (the exchange used to come first,
        # by the Kafka key, and each branch ran the parse above it)
        parsed = cols.mapInArrow(parse_aggregate(self.job_cls, self.parsed_schema()),
                                 _ddl(self.parsed_schema())).repartition(self.state_partitions, key)
        # both branches must leave the exchange alike for Spark to reuse it: the optimizer would
        # push each branch's filter (a deterministic one, or a conjunction's deterministic part)
        # and its columns below the exchange. So each filter is one nondeterministic expression
        # (under an always-true ``spark_partition_id() >= 0``) that names every parsed column
        def above(condition):
            every = F.hash(*parsed.columns) == 0  # never evaluated: it only names the columns
            return F.when(F.spark_partition_id() >= 0, condition).otherwise(every)

        valid = parsed.where(above(F.col("reason").isNull()))
        if valid.isStreaming:
            valid = self.observe_state_partitions(valid, [key])
        states = self.state_op(valid.drop(*(n for n, _t in DLQ_COLUMNS)))
        nulls = [F.lit(None).cast(t).alias(n) for n, t in
                 [("reason", "string"), ("raw_key", "binary"), ("raw_value", "binary"), ("src_topic", "string"),
                  ("src_partition", "int"), ("src_offset", "long")]]
        agg = self.job_cls.aggregate or {}
        out = states.select(F.lit("state").alias("kind"), key, *self.fields, *nulls)
        dlq = parsed.where(above(F.col("reason").isNotNull())).select(
            F.lit("dlq").alias("kind"), key, *(F.lit(None).cast(agg[f].type).alias(f) for f in self.fields),
            *(n for n, _t in DLQ_COLUMNS))
        return out.unionByName(dlq)

    def state_op(self, rows):
        """The stateful operator over seed-shaped rows (the query's and the seed's: same state)."""
        if self.aggregate:
            from pyspark.sql import functions as F

            agg = self.job_cls.aggregate or {}
            fn = {"sum": F.sum, "max": F.max, "min": F.min}
            return rows.groupBy(self.job_cls.key_name).agg(*(fn[a.kind](f).alias(f) for f, a in agg.items()))
        if self.named:
            if self.timed:
                from pyspark.sql import functions as F

                rows = rows.withColumn("wm", F.timestamp_millis(F.lit(1))).withWatermark("wm", "1 millisecond")
            return self._transform_with_state(rows, seed=True)
        if self.timed:  # each key's next timer becomes its event-time timeout, as in the app
            from pyspark.sql import functions as F

            rows = rows.withColumn("wm", F.timestamp_millis(F.lit(1))).withWatermark("wm", "1 millisecond")
            return rows.groupBy("key", "lane").applyInPandasWithState(
                seed_timed_state(self.job_cls), outputStructType=UPDATE_OUT_DDL, stateStructType=UPDATE_STATE_DDL,
                outputMode="update", timeoutConf="EventTimeTimeout")
        return rows.groupBy("key", "lane").applyInPandasWithState(
            seed_state, outputStructType=UPDATE_OUT_DDL, stateStructType=UPDATE_STATE_DDL,
            outputMode="update", timeoutConf="NoTimeout")

    def _transform_with_state(self, rows, *, seed: bool = False):
        """Named state: ``transformWithStateInPandas`` with one state variable per name."""
        return rows.groupBy("key", "lane").transformWithStateInPandas(
            named_processor(self.job_cls, seed=seed), outputStructType=UPDATE_OUT_DDL, outputMode="Update",
            timeMode="EventTime" if self.timed else "None")

    def _build_update(self, cols, checkpoint: Path | None = None):
        if not cols.isStreaming:
            fn = parse_update(self.job_cls, checkpoint=None, ticks_topic=self.topics.ticks if self.topics else None)
            return cols.mapInArrow(fn, UPDATE_PARSED_DDL + (TIMED_DDL if self.timed else ""))
        if not self.timed:
            parsed = self.observe_state_partitions(cols.mapInArrow(parse_update(self.job_cls), UPDATE_PARSED_DDL),
                                                   ["key", "lane"]).repartition(self.state_partitions, "key", "lane")
            return self._per_key(parsed)
        # Stream time (streamops.stream_time). Each row carries the watermark as of the previous
        # batch's clocks, plus 1 ms: Spark's own watermark (the largest value seen, minus the 1 ms
        # delay) becomes ours a batch later, never runs ahead of it, and is below every row's value
        # (no row is ever dropped as late by Spark). Keys with timers sleep in an event-time timeout
        # and wake when it passes their next timer.
        from pyspark.sql import functions as F

        ticks = self.topics.ticks if self.topics is not None else None
        parsed = (cols.mapInArrow(parse_update(self.job_cls, checkpoint=checkpoint, ticks_topic=ticks),
                                  UPDATE_PARSED_DDL + TIMED_DDL)
                  .withColumn("wm", F.timestamp_millis("wm_ms")).withWatermark("wm", "1 millisecond")
                  .drop("wm_ms"))  # one column fewer for each group's frame (``worker`` module docstring)
        # events and rejected records count (the clock and tick rows are the driver's bookkeeping)
        parsed = self.observe_state_partitions(parsed, ["key", "lane"], only=F.col("lane") <= REJECT_LANE
                                               ).repartition(self.state_partitions, "key", "lane")
        return self._per_key(parsed)

    def _per_key(self, parsed):
        """The update shape's stateful operator over the parsed rows, exchanged by (key, lane):
        ``applyInPandasWithState`` over one state blob, or named state's ``transformWithStateInPandas``
        (bench/state_api.py measured the others PySpark offers; docs/benchmarks.md)."""
        if self.named:
            return self._transform_with_state(parsed)
        return parsed.groupBy("key", "lane").applyInPandasWithState(
            update_state(self.job_cls), outputStructType=UPDATE_OUT_DDL, stateStructType=UPDATE_STATE_DDL,
            outputMode="update", timeoutConf="EventTimeTimeout" if self.timed else "NoTimeout")

    # -- the records --------------------------------------------------------------------------------
    def encode_spec(self, partitions: Mapping[str, int]) -> EncodeSpec:
        """What the tasks need to make the records themselves (``commit_on: executors``);
        ``partitions``: the output, changelog and DLQ topics' partition counts."""
        t = self.topics
        if t is None:
            raise ValueError("JobQuery built without topics cannot encode records")
        return EncodeSpec(self.job_cls, t.output, t.changelog, t.dlq, dict(partitions))

    def records(self, table: pa.Table, batch_id: int) -> list:
        """A batch's output rows as the records the committer writes (``records``)."""
        t = self.topics
        if t is None:
            raise ValueError("JobQuery built without topics cannot encode records")
        if self.aggregate:
            return aggregate_records(self.job, table, batch_id, output=t.output, changelog=t.changelog, dlq=t.dlq)
        return update_records(table, batch_id, output=t.output, changelog=t.changelog, dlq=t.dlq)

    def advance_clocks(self, table: pa.Table | Mapping[str, int], batch_id: int, checkpoint: Path,
                       partitions: list[tuple[str, int]], ends: dict[tuple[str, int], int] | None = None,
                       now_ms: int | None = None) -> ClockStep:
        """Jobs with stream time, on the driver after batch ``batch_id`` ran and before it commits:
        the batch's clock rows (in its output ``table``, or as {"topic/partition": largest event
        time} where the tasks summed them up) folded into the stream times, idle inputs released
        (``stream_time.step_clocks``, with ``ends`` the batch's end offset per partition), all of it
        written for the next batch's tasks (``layout.write_clocks``); and a tick record when the
        watermark moved, so that Spark runs a batch that carries it even if no input comes (then a
        batch with no data fires the due timers)."""
        from streamops import stream_time
        from streamops.checkpoints import layout
        from streamops.spark.commit import OutRecord
        from streamops.spark.query.records import clock_rows

        prev = layout.read_clocks(checkpoint, batch_id - 1)
        before = dict(prev.partitions) if prev is not None else {}
        clocks = dict(before)
        for key, ts in (table if isinstance(table, Mapping) else clock_rows(table)).items():
            topic, _, part = key.rpartition("/")
            tp = (topic, int(part))
            clocks[tp] = max(clocks.get(tp, int(ts)), int(ts))
        step = stream_time.step_clocks(
            before, clocks, partitions, ends or {}, idle=prev.idle if prev else None,
            moved=prev.moved if prev else None, raises=prev.raises if prev else None,
            timeouts_ms=self.idle_timeouts_ms, now_ms=int(time.time() * 1000) if now_ms is None else now_ms)
        now = layout.Clocks(batch_id, step.clocks, step.watermark, idle=step.idle, moved=step.moved,
                            raises=step.raises)
        layout.write_clocks(checkpoint, now, partitions)
        wm = step.watermark
        moved = wm is not None and (prev is None or prev.watermark is None or wm > prev.watermark)
        if not moved or self.topics is None or self.topics.ticks is None:
            return ClockStep(now, [])
        return ClockStep(now, [OutRecord(self.topics.ticks, None, str(wm).encode(), batch_headers(batch_id))])


def _ddl(schema: pa.Schema) -> str:
    names = {pa.string(): "string", pa.int64(): "long", pa.float64(): "double", pa.int32(): "int",
             pa.binary(): "binary"}
    return ", ".join(f"{f.name} {names[f.type]}" for f in schema)
