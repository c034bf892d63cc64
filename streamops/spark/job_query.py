"""A declared job (``streamops.job``) as a Spark query and its Kafka records.

Two shapes, chosen by the declaration:

- **aggregate** (``Job.aggregate``): parse (vectorized ``parse_arrow`` first, then ``parse`` +
  ``contribute`` per record) -> ``groupBy(key).agg(max/sum/min)`` in the RocksDB state store,
  united with the DLQ rows. Spark plans the union's two branches as two scans of the source (one
  Kafka read through the shared exchange, two entries per offsets-log batch: ``sources``).
- **update** (``initial``/``update``): parse -> ``groupBy(key, lane).applyInPandasWithState``
  whose state is the serialized state (one ``blob`` column, ``state_serde``). Rejected records
  travel through the same operator in lane 1 (grouped by source partition, never given state),
  so the input is read once. The function folds each key's events in input order, emits, expires
  and writes the changelog record itself.

``records(table, batch_id)`` turns a batch's output into the records the committer writes: the
output (``emit``), the changelog (the serialized state, a tombstone for a deleted key) and the
DLQ (raw record, reason and source coordinates in headers), each with the batch id.
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from streamops.app.shape import input_scans
from streamops.app.topics import H_BATCH_ID, H_REASON, H_TRUNCATED
from streamops.arrow import DLQ_COLUMNS, parsed_arrow_schema
from streamops.job import Job, JsonSerde, Record, Reject

if TYPE_CHECKING:
    from streamops.spark.commit import OutRecord

#: the lane of rejected records in an update job's grouping key (events: 0)
REJECT_LANE = 1
#: jobs with stream time: per input partition, the largest event time a task saw (key "topic/partition")
CLOCK_LANE = 2
#: jobs with stream time: a tick record (it only carries the watermark into Spark)
TICK_LANE = 3
#: Spark's local property holding the micro-batch id in a streaming query's tasks
BATCH_ID_PROPERTY = "streaming.sql.batchId"
OUTPUT_JSON = JsonSerde()
#: the streaming query's observed metrics (``Dataset.observe``: Spark reports them in each batch's
#: progress, ``observedMetrics``): the input records' Kafka timestamps (``newest_ms``, ``oldest_ms``)
#: and the records each state partition received (``p0``, ``p1``, ...)
OBSERVED_INPUT = "streamops_input"
OBSERVED_STATE_PARTITIONS = "streamops_state_partitions"
#: ... and the batch's hottest keys (``hot_keys``)
OBSERVED_HOT_KEYS = "streamops_hot_keys"

_COORDS = DLQ_COLUMNS
_COORDS_DDL = ("reason string, raw_key binary, raw_value binary, src_topic string, src_partition int, "
               "src_offset long")
#: update jobs: the parsed rows and the stateful operator's output rows
UPDATE_PARSED_DDL = "key string, lane int, ev binary, " + _COORDS_DDL
UPDATE_OUT_DDL = "kind string, key string, value binary, " + _COORDS_DDL
UPDATE_STATE_DDL = "blob binary"
#: jobs with stream time: each row also carries its event time, its partition's stream time before it
#: (-1: none yet) and the watermark Spark is to learn (``wm_ms``, see ``_build_update``)
TIMED_DDL = ", ts long, st long, wm_ms long"
NO_TIME = -1


def batch_of(headers: list | None) -> int | None:
    """The micro-batch that wrote an output/changelog record (None: not written by a job)."""
    for k, v in headers or ():
        if k == H_BATCH_ID:
            return int(v)
    return None


def dlq_headers(reason: str, topic: str, partition: int, offset: int, batch_id: int) -> tuple:
    from streamops.app.topics import H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC

    return ((H_REASON, reason.encode()), (H_SOURCE_TOPIC, topic.encode()),
            (H_SOURCE_PARTITION, str(partition).encode()), (H_SOURCE_OFFSET, str(offset).encode()),
            (H_BATCH_ID, str(batch_id).encode()))


#: a rejected record's DLQ copy keeps at most this much of its key and value: the copy must fit in
#: one Kafka message (brokers and producers refuse ~1 MB by default), or the batch's transaction
#: fails and the batch replays for ever
DLQ_MAX_BYTES = 256 * 1024


def dlq_record(topic: str, raw_key: bytes | None, raw_value: bytes | None, reason: str, src_topic: str,
               src_partition: int, src_offset: int, batch_id: int) -> OutRecord:
    """A rejected record's DLQ copy; an oversized key or value is cut to ``DLQ_MAX_BYTES`` and
    its original sizes go in a header (the source coordinates find the whole record)."""
    from streamops.spark.commit import OutRecord

    headers = dlq_headers(reason, src_topic, src_partition, src_offset, batch_id)
    sizes = [len(raw_key or b""), len(raw_value or b"")]
    if max(sizes) > DLQ_MAX_BYTES:
        raw_key = None if raw_key is None else raw_key[:DLQ_MAX_BYTES]
        raw_value = None if raw_value is None else raw_value[:DLQ_MAX_BYTES]
        headers = (*headers, (H_TRUNCATED, json.dumps({"key_bytes": sizes[0], "value_bytes": sizes[1]}).encode()))
    return OutRecord(topic, raw_key, raw_value, headers)


def dlq_entry(headers: list | None) -> tuple[tuple[str, int, int], str]:
    """A DLQ record's source coordinates and reason."""
    from streamops.app.topics import H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC

    h = {k: v.decode() for k, v in (headers or [])}
    return (h[H_SOURCE_TOPIC], int(h[H_SOURCE_PARTITION]), int(h[H_SOURCE_OFFSET])), h[H_REASON]


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
    """One job's Spark plan and record encoding (see module docstring)."""

    @classmethod
    def for_spec(cls, spec: Any, repo: Any) -> JobQuery:
        """The app's declared job with the spec's state partitions and its live topics."""
        from streamops.spec import load_job

        return cls(load_job(spec, repo), state_partitions=spec.state_partitions,
                   topics=Topics(spec.live_output_topic, spec.changelog_topic, spec.dlq_topic, spec.ticks_topic))

    def __init__(self, job_cls: type[Job], *, state_partitions: int, topics: Topics | None = None) -> None:
        self.job_cls = job_cls
        self.job = job_cls()
        self.state_partitions = state_partitions
        self.topics = topics
        self.aggregate = job_cls.is_aggregate()
        self.timed = job_cls.has_time()
        self.named = job_cls.has_named_state()

    # -- shape facts the operations need -------------------------------------------------------
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
        parsed = cols.repartition(self.state_partitions, "key").mapInArrow(
            parse_aggregate(self.job_cls, self.parsed_schema()), _ddl(self.parsed_schema()))
        valid = parsed.where(F.col("reason").isNull())
        if valid.isStreaming:
            valid = self.observe_state_partitions(valid, [key])
        states = self.state_op(valid.drop(*(n for n, _t in _COORDS)))
        nulls = [F.lit(None).cast(t).alias(n) for n, t in
                 [("reason", "string"), ("raw_key", "binary"), ("raw_value", "binary"), ("src_topic", "string"),
                  ("src_partition", "int"), ("src_offset", "long")]]
        agg = self.job_cls.aggregate or {}
        out = states.select(F.lit("state").alias("kind"), key, *self.fields, *nulls)
        dlq = parsed.where(F.col("reason").isNotNull()).select(
            F.lit("dlq").alias("kind"), key, *(F.lit(None).cast(agg[f].type).alias(f) for f in self.fields),
            *(n for n, _t in _COORDS))
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
            if self.named:
                return self._transform_with_state(parsed)
            return parsed.groupBy("key", "lane").applyInPandasWithState(
                update_state(self.job_cls), outputStructType=UPDATE_OUT_DDL, stateStructType=UPDATE_STATE_DDL,
                outputMode="update", timeoutConf="NoTimeout")
        # Stream time (streamops.stream_time). Each row carries the watermark as of the previous
        # batch's clocks, plus 1 ms: Spark's own watermark (the largest value seen, minus the 1 ms
        # delay) becomes ours a batch later, never runs ahead of it, and is below every row's value
        # (no row is ever dropped as late by Spark). Keys with timers sleep in an event-time timeout
        # and wake when it passes their next timer.
        from pyspark.sql import functions as F

        ticks = self.topics.ticks if self.topics is not None else None
        parsed = (cols.mapInArrow(parse_update(self.job_cls, checkpoint=checkpoint, ticks_topic=ticks),
                                  UPDATE_PARSED_DDL + TIMED_DDL)
                  .withColumn("wm", F.timestamp_millis("wm_ms")).withWatermark("wm", "1 millisecond"))
        # events and rejected records count (the clock and tick rows are the driver's bookkeeping)
        parsed = self.observe_state_partitions(parsed, ["key", "lane"], only=F.col("lane") <= REJECT_LANE
                                               ).repartition(self.state_partitions, "key", "lane")
        if self.named:
            return self._transform_with_state(parsed)
        return parsed.groupBy("key", "lane").applyInPandasWithState(
            update_state(self.job_cls), outputStructType=UPDATE_OUT_DDL, stateStructType=UPDATE_STATE_DDL,
            outputMode="update", timeoutConf="EventTimeTimeout")

    # -- the records --------------------------------------------------------------------------------
    def records(self, table: pa.Table, batch_id: int) -> list:
        from streamops.spark.commit import OutRecord

        t = self.topics
        if t is None:
            raise ValueError("JobQuery built without topics cannot encode records")
        bid = ((H_BATCH_ID, str(batch_id).encode()),)
        if self.aggregate:
            return self._aggregate_records(table, batch_id, bid)
        out: list[OutRecord] = []
        for row in table.to_pylist():
            kind = row["kind"]
            if kind == "dlq":
                out.append(dlq_record(t.dlq, row["raw_key"], row["raw_value"], row["reason"], row["src_topic"],
                                      row["src_partition"], row["src_offset"], batch_id))
            elif kind == "out":
                out.append(OutRecord(t.output, row["key"].encode(), row["value"], bid))
            elif kind == "changelog":
                out.append(OutRecord(t.changelog, row["key"].encode(), row["value"], bid))
        return out

    def advance_clocks(self, table: pa.Table, batch_id: int, checkpoint: Path,
                       partitions: list[tuple[str, int]]) -> ClockStep:
        """Jobs with stream time, on the driver after batch ``batch_id`` ran and before it commits:
        the batch's clock rows folded into the stream times (``layout.write_clocks``, for the next
        batch's tasks), and a tick record when the watermark moved, so that Spark runs a batch that
        carries it even if no input comes (then a batch with no data fires the due timers)."""
        import pyarrow.compute as pc

        from streamops import stream_time
        from streamops.checkpoints import layout
        from streamops.spark.commit import OutRecord

        prev = layout.read_clocks(checkpoint, batch_id - 1)
        clocks = dict(prev.partitions) if prev is not None else {}
        rows = table.filter(pc.equal(table.column("kind"), "clock")).select(["key", "value"]).to_pylist()
        for row in rows:
            topic, _, part = row["key"].rpartition("/")
            tp = (topic, int(part))
            clocks[tp] = max(clocks.get(tp, int(row["value"])), int(row["value"]))
        wm = stream_time.watermark(clocks, partitions)
        now = layout.Clocks(batch_id, clocks, wm)
        layout.write_clocks(checkpoint, now, partitions)
        moved = wm is not None and (prev is None or prev.watermark is None or wm > prev.watermark)
        if not moved or self.topics is None or self.topics.ticks is None:
            return ClockStep(now, [])
        return ClockStep(now, [OutRecord(self.topics.ticks, None, str(wm).encode(),
                                         ((H_BATCH_ID, str(batch_id).encode()),))])

    def _aggregate_records(self, table: pa.Table, batch_id: int, bid: tuple) -> list:
        """Column by column: at 50k keys a batch, a dict per row and a JSON encoder per state were
        a third of the encoding (the changelog of a JSON-serialized aggregation is formatted directly)."""
        import pyarrow.compute as pc

        from streamops.spark.commit import OutRecord

        t = self.topics
        assert t is not None
        agg = self.job_cls.aggregate or {}
        kinds = table.column("kind")
        states = table.filter(pc.equal(kinds, "state"))
        out: list[OutRecord] = []
        fields = list(agg)
        cols = [(states.column(f).fill_null(a.identity()) if a.kind == "sum" else states.column(f)).to_pylist()
                for f, a in agg.items()]
        changelog = _fields_json(fields) if type(self.job_cls.state_serde) is JsonSerde else \
            self.job_cls.state_serde.dumps
        emit, dumps, output, cl = self.job.emit, OUTPUT_JSON.dumps, t.output, t.changelog
        for key, *values in zip(states.column(self.job_cls.key_name).to_pylist(), *cols):
            state = dict(zip(fields, values))
            kb = key.encode()
            out.append(OutRecord(cl, kb, changelog(state), bid))
            for okey, value in emit(key, state).items():
                out.append(OutRecord(output, kb if okey == key else okey.encode(), dumps(value), bid))
        dlq = table.filter(pc.equal(kinds, "dlq"))
        for row in dlq.select(["raw_key", "raw_value", "reason", "src_topic", "src_partition", "src_offset"]).to_pylist():
            out.append(dlq_record(t.dlq, row["raw_key"], row["raw_value"], row["reason"], row["src_topic"],
                                  row["src_partition"], row["src_offset"], batch_id))
        return out


def input_timestamps(ticks_topic: str | None = None) -> list:
    """Aggregates for ``Dataset.observe`` over Kafka rows: the newest and oldest timestamp (ms;
    ``ticks_topic``'s left out: the driver wrote them). Spark computes them in the scan's tasks
    with its own accumulators: no extra job, a max and a min per record."""
    from pyspark.sql import functions as F

    ts = F.unix_millis("timestamp")
    if ticks_topic is not None:
        ts = F.when(F.col("topic") != ticks_topic, ts)
    return [F.max(ts).alias("newest_ms"), F.min(ts).alias("oldest_ms")]


#: above this many state partitions the records per partition are not observed: one conditional sum
#: per partition and record costs about 8 ns each (bench/observed_metrics.py), ~1 % of a record's
#: work at 32 (the default is 4)
MAX_OBSERVED_STATE_PARTITIONS = 32


def state_partition_records(keys: list[str], partitions: int, only=None) -> list:
    """Aggregates for ``Dataset.observe``: records per state partition (skew a uniform test misses),
    ``p0``, ``p1``, ...; none above ``MAX_OBSERVED_STATE_PARTITIONS``. A row's partition is the one
    Spark's hash partitioning of the stateful operator's keys gives it (``pmod(hash(keys), n)``, as
    ``repartition`` and ``groupBy`` compute it); ``only``: the rows that count. One exact count per
    partition (``histogram_numeric`` with one bin each was cheaper at 200 partitions but merged
    distinct partitions' bins when many tasks' histograms combined)."""
    from pyspark.sql import functions as F

    if partitions > MAX_OBSERVED_STATE_PARTITIONS:
        return []
    part = F.pmod(F.hash(*keys), F.lit(partitions))
    hit = (lambda i: part == i) if only is None else (lambda i: only & (part == i))
    return [F.sum(F.when(hit(i), 1).otherwise(0)).alias(f"p{i}") for i in range(partitions)]


#: how many hottest keys a batch reports, and how many keys the sketch tracks: a key is reported
#: when its records are a large share of the batch's (a frequent-items sketch; uniform keys: none)
HOT_KEYS, HOT_KEYS_TRACKED = 5, 100


def hot_keys(key: str, only=None) -> list:
    """An aggregate for ``Dataset.observe``: the batch's hottest keys with their records (Spark's
    ``approx_top_k`` sketch, updated in the tasks that already run: 50-90 ns a record,
    bench/observed_metrics.py), the skew a uniform test misses, by key; ``only``: the rows that count."""
    from pyspark.sql import functions as F

    k = F.col(key).cast("string")
    if only is not None:
        k = F.when(only, k)
    return [F.call_function("approx_top_k", k, F.lit(HOT_KEYS), F.lit(HOT_KEYS_TRACKED)).alias("hot")]


def _fields_json(fields: list[str]):
    """Canonical JSON (``JsonSerde``) of a dict of these numeric fields, formatted directly."""
    order = sorted(fields)
    heads = [json.dumps(f) + ":" for f in order]

    def dumps(state: dict) -> bytes:
        parts = []
        for head, f in zip(heads, order):
            v = state[f]
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"{f} is {v}: JSON has no such number")  # as JsonSerde (allow_nan=False)
            parts.append(head + ("null" if v is None else repr(v) if isinstance(v, float) else str(v)))
        return ("{" + ",".join(parts) + "}").encode("ascii")

    return dumps


def state_of(job_cls: type[Job], row: dict) -> dict:
    """An aggregate job's state from a row of its fields (a sum nothing contributed to is 0)."""
    agg = job_cls.aggregate or {}
    return {f: (a.identity() if row[f] is None and a.kind == "sum" else row[f]) for f, a in agg.items()}


def _ddl(schema: pa.Schema) -> str:
    names = {pa.string(): "string", pa.int64(): "long", pa.float64(): "double", pa.int32(): "int",
             pa.binary(): "binary"}
    return ", ".join(f"{f.name} {names[f.type]}" for f in schema)


def _records(batch: pa.RecordBatch) -> Iterator[Record]:
    ts = batch.column("timestamp").cast(pa.int64()).to_pylist() if "timestamp" in batch.schema.names \
        else [None] * batch.num_rows
    for key, value, topic, part, off, t in zip(*(batch.column(n).to_pylist() for n in
                                                 ("key", "value", "topic", "partition", "offset")), ts):
        yield Record(topic, part, off, key, value, None if t is None else t // 1000)


# -- the functions Spark runs on executors (module-level: cloudpickled by reference) --------------
def parse_aggregate(job_cls: type[Job], schema: pa.Schema):
    """mapInArrow: Kafka rows -> key + contributed fields (valid) or reason + raw record (rejected)."""
    fields = list(job_cls.aggregate or {})
    key_name = job_cls.key_name

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        job = job_cls()
        fast = job_cls.parse_arrow
        for b in batches:
            if fast is not None:
                done, b = fast(job, b)
                if done is not None and done.num_rows:
                    yield done
                if b is None or not b.num_rows:
                    continue
            cols: dict[str, list] = {f.name: [] for f in schema}
            for r in _records(b):
                parsed = job.parse(r)
                if isinstance(parsed, Reject):
                    cols[key_name].append(None)
                    for f in fields:
                        cols[f].append(None)
                    cols["reason"].append(parsed.reason)
                    cols["raw_key"].append(r.key)
                    cols["raw_value"].append(r.value)
                else:
                    contribution = job.contribute(parsed)
                    cols[key_name].append(job.key(parsed))
                    for f in fields:
                        cols[f].append(contribution.get(f))
                    cols["reason"].append(None)
                    cols["raw_key"].append(None)
                    cols["raw_value"].append(None)
                cols["src_topic"].append(r.topic)
                cols["src_partition"].append(r.partition)
                cols["src_offset"].append(r.offset)
            yield pa.RecordBatch.from_pydict(cols, schema=schema)

    return run


_UPDATE_PARSED = pa.schema([("key", pa.string()), ("lane", pa.int32()), ("ev", pa.binary()), *_COORDS])


_TIMED_PARSED = pa.schema([*_UPDATE_PARSED, ("ts", pa.int64()), ("st", pa.int64()), ("wm_ms", pa.int64())])


def parse_update(job_cls: type[Job], *, checkpoint: Path | None = None, ticks_topic: str | None = None):
    """mapInArrow: Kafka rows -> (key, lane 0, pickled event) or (source partition, lane 1, reason).
    Events keep their raw record when the job screens them or has stream time (a screened or late
    event goes to the DLQ)."""
    if job_cls.has_time():
        return parse_timed(job_cls, checkpoint, ticks_topic)
    keep_raw = job_cls.has_screen()

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        job = job_cls()
        for b in batches:
            cols: dict[str, list] = {f.name: [] for f in _UPDATE_PARSED}
            for r in _records(b):
                parsed = job.parse(r)
                rejected = isinstance(parsed, Reject)
                cols["key"].append(f"{r.topic}/{r.partition}" if rejected else job.key(parsed))
                cols["lane"].append(REJECT_LANE if rejected else 0)
                cols["ev"].append(None if rejected else pickle.dumps(parsed, protocol=5))
                cols["reason"].append(parsed.reason if rejected else None)
                cols["raw_key"].append(r.key if rejected or keep_raw else None)
                cols["raw_value"].append(r.value if rejected or keep_raw else None)
                cols["src_topic"].append(r.topic)
                cols["src_partition"].append(r.partition)
                cols["src_offset"].append(r.offset)
            yield pa.RecordBatch.from_pydict(cols, schema=_UPDATE_PARSED)

    return run


def batch_clocks(checkpoint: Path | None) -> tuple[dict, int | None]:
    """In a task of a streaming query: the stream times and watermark as of the batch before this
    one (``layout.read_clocks``); outside one, or before any clock, none."""
    from pyspark import TaskContext

    from streamops.checkpoints import layout

    ctx = TaskContext.get()
    batch = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
    if checkpoint is None or batch is None:
        return {}, None
    clocks = layout.read_clocks(checkpoint, int(batch) - 1)
    return (clocks.partitions, clocks.watermark) if clocks is not None else ({}, None)


def _timed_batch(rows: list[tuple]) -> pa.RecordBatch:
    columns = list(zip(*rows)) if rows else [[] for _ in _TIMED_PARSED]
    return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(columns, _TIMED_PARSED)],
                                      schema=_TIMED_PARSED)


def parse_timed(job_cls: type[Job], checkpoint: Path | None, ticks_topic: str | None):
    """mapInArrow for a job with stream time: each event with its time and its partition's stream
    time before it (``stream_time``), one clock row per partition the task read (its largest event
    time), tick rows in their own lane; every row carries the watermark for Spark (``_build_update``)."""
    from streamops import stream_time

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        job = job_cls()
        clocks, wm = batch_clocks(checkpoint)
        running: dict[tuple[str, int], int] = dict(clocks)
        seen: set[tuple[str, int]] = set()
        wm_ms = 1 if wm is None else wm + 1
        for b in batches:
            rows: list[tuple] = []  # in _TIMED_PARSED's order
            for r in _records(b):
                where = (r.topic, r.partition, r.offset)
                if r.topic == ticks_topic:
                    rows.append(("tick", TICK_LANE, None, None, None, None, *where, NO_TIME, NO_TIME, wm_ms))
                    continue
                parsed = job.parse(r)
                ts = None if isinstance(parsed, Reject) else stream_time.event_time(job, parsed, r.timestamp_ms)
                if ts is None:
                    reason = parsed.reason if isinstance(parsed, Reject) else stream_time.BAD_TIMESTAMP
                    rows.append((f"{r.topic}/{r.partition}", REJECT_LANE, None, reason, r.key, r.value, *where,
                                 NO_TIME, NO_TIME, wm_ms))
                    continue
                before = stream_time.advance(running, (r.topic, r.partition), ts)
                seen.add((r.topic, r.partition))
                rows.append((job.key(parsed), 0, pickle.dumps(parsed, protocol=5), None, r.key, r.value, *where, ts,
                             NO_TIME if before is None else before, wm_ms))
            yield _timed_batch(rows)
        if seen:
            yield _timed_batch([(f"{t}/{p}", CLOCK_LANE, None, None, None, None, t, p, None, running[(t, p)], NO_TIME,
                                 wm_ms) for t, p in sorted(seen)])

    return run


_OUT_COLUMNS = ["kind", "key", "value", "reason", "raw_key", "raw_value", "src_topic", "src_partition",
                "src_offset"]


def _frame(rows: list[tuple]):
    import pandas as pd

    return pd.DataFrame.from_records(rows, columns=_OUT_COLUMNS)


def _dlq_row(reason: str, raw_key, raw_value, topic: str, partition: int, offset: int) -> tuple:
    return ("dlq", None, None, reason, raw_key, raw_value, topic, int(partition), int(offset))


def update_state(job_cls: type[Job]):
    """applyInPandasWithState: fold one key's events of a batch into its state (see module docstring)."""
    if job_cls.has_time():
        return update_timed(job_cls)

    def run(group: tuple, frames: Iterator, state) -> Iterator:
        key, lane = group
        yield _frame(update_key(job_cls, key, lane, _group_columns(frames), BlobStore(job_cls, state)))

    return run


def update_key(job_cls: type[Job], key: str, lane: int, c: dict[str, list], store: Any) -> list[tuple]:
    """One key's events of a batch (a job without stream time) folded into its state in ``store``
    (``BlobStore`` or ``NamedStore``): the rows to emit."""
    # plain lists, not pandas, per group: a group is a handful of events, and pandas' concat,
    # sort and itertuples took ~3/4 of the function's time per group (bench/update_state.py)
    rows: list[tuple] = []
    coords = list(zip(c["raw_key"], c["raw_value"], c["src_topic"], c["src_partition"], c["src_offset"]))
    if lane == REJECT_LANE:  # rejected by parse: straight to the DLQ, never any state
        return [_dlq_row(reason, *coord) for reason, coord in zip(c["reason"], coords)]
    job = job_cls()
    # input order: (topic, partition, offset), whatever order the frames came in
    order = sorted(range(len(coords)), key=lambda i: coords[i][2:])
    loaded = store.load()
    current = job.initial(key) if loaded is None else loaded
    if job_cls.has_screen():
        for i in order:
            ev = pickle.loads(c["ev"][i])
            reason = job.screen(key, current, ev)
            if reason is not None:
                rows.append(_dlq_row(reason, *coords[i]))
            else:
                current = job.update(key, current, [ev])
    else:
        current = job.update(key, current, [pickle.loads(c["ev"][i]) for i in order])
    _finish(job, key, current, store, rows)
    return rows


def _finish(job: Job, key: str, current: Any, store: Any, rows: list[tuple]) -> Any:
    """Emit ``current``, expire it and write what is kept (None: the key is deleted) to the store,
    which adds its changelog rows; returns what is kept."""
    for okey, value in job.emit(key, current).items():
        rows.append(("out", okey, OUTPUT_JSON.dumps(value), None, None, None, None, None, None))
    kept = job.expire(key, current) if type(job).has_expire() else current
    return store.save(key, kept, rows)


class BlobStore:
    """A key's single state in ``applyInPandasWithState``'s GroupState: one serialized blob."""

    def __init__(self, job_cls: type[Job], state) -> None:
        self.serde, self.state = job_cls.state_serde, state

    def load(self) -> Any:
        return self.serde.loads(self.state.get[0]) if self.state.exists else None

    def watermark(self) -> int:
        return self.state.getCurrentWatermarkMs()

    def save(self, key: str, kept: Any, rows: list[tuple]) -> Any:
        if kept is None:
            if self.state.exists:
                self.state.remove()
            rows.append(("changelog", key, None, None, None, None, None, None, None))
            return None
        blob = self.serde.dumps(kept)
        self.state.update((blob,))
        rows.append(("changelog", key, blob, None, None, None, None, None, None))
        return kept

    def set_timer(self, ts: int | None, wm: int | None) -> None:
        if ts is not None:  # Spark wakes the key once its watermark is past ts - 1, i.e. reaches ts
            self.state.setTimeoutTimestamp(max(ts - 1, wm or 1))


def update_timed(job_cls: type[Job]):
    """applyInPandasWithState for a job with stream time (``timed_key``)."""

    def run(group: tuple, frames: Iterator, state) -> Iterator:
        key, lane = group
        yield _frame(timed_key(job_cls, key, lane, _group_columns(frames, _TIMED_COLUMNS), BlobStore(job_cls, state)))

    return run


def timed_key(job_cls: type[Job], key: str, lane: int, c: dict[str, list], store: Any) -> list[tuple]:
    """``stream_time.run_key`` over the key's events of the batch and Spark's watermark; a key left
    with timers sleeps until the watermark reaches its next one (also with no more events).
    Clock, tick and rejected rows come in their own lanes."""
    from streamops import stream_time

    if lane == TICK_LANE:
        return []
    if lane == CLOCK_LANE:
        if len(c["ts"]) != 1:  # two tasks read one partition in a batch: their clocks would disagree
            raise RuntimeError(f"{key} was read by {len(c['ts'])} tasks in one micro-batch; stream time "
                               f"needs one task per Kafka partition (do not set the source's minPartitions)")
        return [("clock", key, str(int(c["ts"][0])).encode(), None, None, None, None, None, None)]
    coords = list(zip(c["raw_key"], c["raw_value"], c["src_topic"], c["src_partition"], c["src_offset"]))
    if lane == REJECT_LANE:
        return [_dlq_row(reason, *coord) for reason, coord in zip(c["reason"], coords)]
    job = job_cls()
    wm = store.watermark()
    wm = wm if wm >= stream_time.MIN_TS else None
    order = sorted(range(len(coords)), key=lambda i: coords[i][2:])
    items = [stream_time.Timed((coords[i][2], int(coords[i][3]), int(coords[i][4])), pickle.loads(c["ev"][i]),
                               int(c["ts"][i]), None if c["st"][i] == NO_TIME else int(c["st"][i]))
             for i in order]
    raw = {(t, int(p), int(o)): (k, v) for k, v, t, p, o in coords}
    rejected: dict = {}
    rows: list[tuple] = []
    current = stream_time.run_key(job, key, store.load(), items, wm, rejected)
    for where, reason in rejected.items():
        rows.append(_dlq_row(reason, *raw[where], *where))
    kept = _finish(job, key, current, store, rows)
    if job_cls.has_timers():
        store.set_timer(None if kept is None else stream_time.next_timer(job, key, kept), wm)
    return rows


class NamedStore:
    """A key's named state (``streamops.named_state``) in ``transformWithStateInPandas``'s state
    variables: loaded whole, written part by part (``named_state.changes``), with one changelog
    row per changed part and at most one registered timer, the next one."""

    def __init__(self, job_cls: type[Job], variables: dict[str, Any], handle, watermark_ms: int) -> None:
        self.values = job_cls.state_values or {}
        self.vars, self.handle, self.wm = variables, handle, watermark_ms
        self.loaded: dict[str, Any] | None = None

    def load(self) -> dict[str, Any] | None:
        from streamops import named_state as ns

        state: dict[str, Any] = {}
        for name, kind in self.values.items():
            var = self.vars[name]
            if isinstance(kind, ns.Value):
                got = var.get()
                state[name] = None if got is None else json.loads(got[0])
            elif isinstance(kind, ns.ListOf):
                state[name] = [json.loads(v[0]) for v in var.get()]
            else:
                state[name] = {k[0]: json.loads(v[0]) for k, v in var.iterator()}
        self.loaded = None if ns.is_empty(self.values, state) else state
        # the job may change what it is handed in place: keep a copy to diff against
        return None if self.loaded is None else json.loads(json.dumps(self.loaded))

    def watermark(self) -> int:
        return self.wm

    def save(self, key: str, kept: Any, rows: list[tuple]) -> Any:
        from streamops import named_state as ns

        if kept is not None:
            ns.check_shape(self.values, key, kept)
            if ns.is_empty(self.values, kept):
                kept = None
        done = ns.changes(self.values, self.loaded, kept)
        dumps = ns._dumps
        for c in done:
            var = self.vars[c.name]
            if c.op == "put":
                var.updateValue((c.entry,), (dumps(c.value),))
            elif c.op == "remove":
                var.removeKey((c.entry,))
            elif c.op == "clear":
                var.clear()
            elif c.op == "append":
                var.appendList([(dumps(v),) for v in c.value])
            elif isinstance(self.values[c.name], ns.ListOf):
                var.put([(dumps(v),) for v in c.value])
            else:
                var.update((dumps(c.value),))
        for ckey, value in ns.changelog_records(self.values, key, kept, done):
            rows.append(("changelog", ckey, value, None, None, None, None, None, None))
        self.loaded = kept
        return kept

    def set_timer(self, ts: int | None, wm: int | None) -> None:
        """Spark fires a timer once its watermark reaches it (expiry <= watermark)."""
        have = list(self.handle.listTimers())
        for t in have:
            if t != ts:
                self.handle.deleteTimer(t)
        if ts is not None and ts not in have:
            self.handle.registerTimer(ts)


def named_processor(job_cls: type[Job], *, seed: bool = False):
    """The ``StatefulProcessor`` of a job with named state: ``update_key``/``timed_key`` over a
    ``NamedStore``; with ``seed``, it writes each key's state from a seed row (``seed_ddl``)."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    from streamops import named_state as ns
    from streamops import stream_time

    values, timed = job_cls.state_values or {}, job_cls.has_time()

    class Processor(StatefulProcessor):
        def init(self, handle) -> None:
            self.handle = handle
            self.vars: dict[str, Any] = {}
            for name, kind in values.items():
                if isinstance(kind, ns.Value):
                    self.vars[name] = handle.getValueState(name, "json string")
                elif isinstance(kind, ns.ListOf):
                    self.vars[name] = handle.getListState(name, "json string")
                else:
                    self.vars[name] = handle.getMapState(name, "entry string", "json string")

        def _store(self, timer_values) -> NamedStore:
            return NamedStore(job_cls, self.vars, self.handle, timer_values.getCurrentWatermarkInMs())

        def handleInputRows(self, key, rows, timerValues) -> Iterator:
            k, lane = key[0], int(key[1])
            store = self._store(timerValues)
            if seed:
                job = job_cls()
                for pdf in rows:
                    for blob in pdf["blob"]:
                        store.load()
                        kept = store.save(k, json.loads(blob), [])
                        if timed and job_cls.has_timers():
                            store.set_timer(None if kept is None else stream_time.next_timer(job, k, kept), None)
                yield _frame([])
                return
            if timed:
                out = timed_key(job_cls, k, lane, _group_columns(rows, _TIMED_COLUMNS), store)
            else:
                out = update_key(job_cls, k, lane, _group_columns(rows), store)
            yield _frame(out)

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
            empty = {n: [] for n in _TIMED_COLUMNS}
            yield _frame(timed_key(job_cls, key[0], int(key[1]), empty, self._store(timerValues)))

        def close(self) -> None:
            pass

    return Processor()


_GROUP_COLUMNS = ("ev", "reason", "raw_key", "raw_value", "src_topic", "src_partition", "src_offset")
_TIMED_COLUMNS = (*_GROUP_COLUMNS, "ts", "st")


def _group_columns(frames: Iterator, names: tuple[str, ...] = _GROUP_COLUMNS) -> dict[str, list]:
    """One group's frames (``UPDATE_PARSED_DDL``) as Python lists per column, frames concatenated."""
    cols: dict[str, list] = {n: [] for n in names}
    for pdf in frames:
        for n in names:
            cols[n].extend(pdf[n].tolist())
    return cols


def seed_timed_state(job_cls: type[Job]):
    """The seed query's function for a job with stream time: the state, and its next timer as the
    key's event-time timeout (what ``update_timed`` leaves)."""
    from streamops import stream_time

    def run(group: tuple, frames: Iterator, state) -> Iterator:
        import pandas as pd

        job, loads = job_cls(), job_cls.state_serde.loads
        for pdf in frames:
            for blob in pdf["blob"]:
                state.update((blob,))
                nxt = stream_time.next_timer(job, group[0], loads(blob))
                if nxt is not None:
                    state.setTimeoutTimestamp(nxt - 1)
        yield pd.DataFrame({c: [] for c in _OUT_COLUMNS})

    return run


def seed_state(group: tuple, frames: Iterator, state) -> Iterator:
    """The seed query's function: the one row per key holds the key's serialized state."""
    import pandas as pd

    for pdf in frames:
        for blob in pdf["blob"]:
            state.update((blob,))
    yield pd.DataFrame({c: [] for c in _OUT_COLUMNS})
