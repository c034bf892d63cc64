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
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from streamops.job import Job, JsonSerde, Record, Reject

if TYPE_CHECKING:
    from streamops.spark.commit import OutRecord

H_REASON = "streamops.dlq.reason"
H_BATCH_ID = "streamops.batch_id"
#: the lane of rejected records in an update job's grouping key (events: 0)
REJECT_LANE = 1
OUTPUT_JSON = JsonSerde()

_COORDS = [("reason", pa.string()), ("raw_key", pa.binary()), ("raw_value", pa.binary()),
           ("src_topic", pa.string()), ("src_partition", pa.int32()), ("src_offset", pa.int64())]
_COORDS_DDL = ("reason string, raw_key binary, raw_value binary, src_topic string, src_partition int, "
               "src_offset long")
_ARROW_TYPES = {"long": pa.int64(), "double": pa.float64()}
#: update jobs: the parsed rows and the stateful operator's output rows
UPDATE_PARSED_DDL = "key string, lane int, ev binary, " + _COORDS_DDL
UPDATE_OUT_DDL = "kind string, key string, value binary, " + _COORDS_DDL
UPDATE_STATE_DDL = "blob binary"


def batch_of(headers: list | None) -> int | None:
    """The micro-batch that wrote an output/changelog record (None: not written by a job)."""
    for k, v in headers or ():
        if k == H_BATCH_ID:
            return int(v)
    return None


def dlq_headers(reason: str, topic: str, partition: int, offset: int, batch_id: int) -> tuple:
    from streamops.spark.commit import H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC

    return ((H_REASON, reason.encode()), (H_SOURCE_TOPIC, topic.encode()),
            (H_SOURCE_PARTITION, str(partition).encode()), (H_SOURCE_OFFSET, str(offset).encode()),
            (H_BATCH_ID, str(batch_id).encode()))


#: a rejected record's DLQ copy keeps at most this much of its key and value: the copy must fit in
#: one Kafka message (brokers and producers refuse ~1 MB by default), or the batch's transaction
#: fails and the batch replays for ever
DLQ_MAX_BYTES = 256 * 1024
H_TRUNCATED = "streamops.dlq.truncated"


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
    from streamops.spark.commit import H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC

    h = {k: v.decode() for k, v in (headers or [])}
    return (h[H_SOURCE_TOPIC], int(h[H_SOURCE_PARTITION]), int(h[H_SOURCE_OFFSET])), h[H_REASON]


@dataclass(frozen=True)
class Topics:
    output: str
    changelog: str
    dlq: str


class JobQuery:
    """One job's Spark plan and record encoding (see module docstring)."""

    @classmethod
    def for_spec(cls, spec: Any, repo: Any) -> JobQuery:
        """The app's declared job with the spec's state partitions and its live topics."""
        from streamops.spec import load_job

        return cls(load_job(spec, repo), state_partitions=spec.state_partitions,
                   topics=Topics(spec.live_output_topic, spec.changelog_topic, spec.dlq_topic))

    def __init__(self, job_cls: type[Job], *, state_partitions: int, topics: Topics | None = None) -> None:
        self.job_cls = job_cls
        self.job = job_cls()
        self.state_partitions = state_partitions
        self.topics = topics
        self.aggregate = job_cls.is_aggregate()

    # -- shape facts the operations need -------------------------------------------------------
    @property
    def sources(self) -> int:
        """Scans of the input in the query plan (Spark keeps one offsets entry per scan)."""
        return 2 if self.aggregate else 1

    @property
    def fields(self) -> list[str]:
        return list(self.job_cls.aggregate or {})

    def parsed_schema(self) -> pa.Schema:
        """Aggregate jobs: the parse stage's rows (key, fields, then the DLQ coordinates)."""
        agg = self.job_cls.aggregate or {}
        return pa.schema([(self.job_cls.key_name, pa.string()),
                          *((f, _ARROW_TYPES[a.type]) for f, a in agg.items()), *_COORDS])

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
    def build(self, raw):
        """Kafka-schema DataFrame (streaming or batch) -> the rows ``records`` encodes."""
        cols = raw.select("key", "value", "topic", "partition", "offset", "timestamp")
        if self.aggregate:
            return self._build_aggregate(cols)
        return self._build_update(cols)

    def _build_aggregate(self, cols):
        from pyspark.sql import functions as F

        key = self.job_cls.key_name
        parsed = cols.repartition(self.state_partitions, "key").mapInArrow(
            parse_aggregate(self.job_cls, self.parsed_schema()), _ddl(self.parsed_schema()))
        states = self.state_op(parsed.where(F.col("reason").isNull()).drop(*(n for n, _t in _COORDS)))
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
        return rows.groupBy("key", "lane").applyInPandasWithState(
            seed_state, outputStructType=UPDATE_OUT_DDL, stateStructType=UPDATE_STATE_DDL,
            outputMode="update", timeoutConf="NoTimeout")

    def _build_update(self, cols):
        parsed = cols.mapInArrow(parse_update(self.job_cls), UPDATE_PARSED_DDL).repartition(
            self.state_partitions, "key", "lane")
        return parsed.groupBy("key", "lane").applyInPandasWithState(
            update_state(self.job_cls), outputStructType=UPDATE_OUT_DDL, stateStructType=UPDATE_STATE_DDL,
            outputMode="update", timeoutConf="NoTimeout")

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


def parse_update(job_cls: type[Job]):
    """mapInArrow: Kafka rows -> (key, lane 0, pickled event) or (source partition, lane 1, reason).
    Events keep their raw record when the job screens them (a screened event goes to the DLQ)."""
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


_OUT_COLUMNS = ["kind", "key", "value", "reason", "raw_key", "raw_value", "src_topic", "src_partition",
                "src_offset"]


def _frame(rows: list[tuple]):
    import pandas as pd

    return pd.DataFrame.from_records(rows, columns=_OUT_COLUMNS)


def _dlq_row(reason: str, raw_key, raw_value, topic: str, partition: int, offset: int) -> tuple:
    return ("dlq", None, None, reason, raw_key, raw_value, topic, int(partition), int(offset))


def update_state(job_cls: type[Job]):
    """applyInPandasWithState: fold one key's events of a batch into its state (see module docstring)."""
    serde = job_cls.state_serde
    screens, expires = job_cls.has_screen(), job_cls.has_expire()

    def run(group: tuple, frames: Iterator, state) -> Iterator:
        # plain lists, not pandas, per group: a group is a handful of events, and pandas' concat,
        # sort and itertuples took ~3/4 of the function's time per group (bench/update_state.py)
        key, lane = group
        c = _group_columns(frames)
        rows: list[tuple] = []
        coords = list(zip(c["raw_key"], c["raw_value"], c["src_topic"], c["src_partition"], c["src_offset"]))
        if lane == REJECT_LANE:  # rejected by parse: straight to the DLQ, never any state
            for reason, coord in zip(c["reason"], coords):
                rows.append(_dlq_row(reason, *coord))
            yield _frame(rows)
            return
        job = job_cls()
        # input order: (topic, partition, offset), whatever order the frames came in
        order = sorted(range(len(coords)), key=lambda i: coords[i][2:])
        current = serde.loads(state.get[0]) if state.exists else job.initial(key)
        if screens:
            for i in order:
                ev = pickle.loads(c["ev"][i])
                reason = job.screen(key, current, ev)
                if reason is not None:
                    rows.append(_dlq_row(reason, *coords[i]))
                else:
                    current = job.update(key, current, [ev])
        else:
            current = job.update(key, current, [pickle.loads(c["ev"][i]) for i in order])
        for okey, value in job.emit(key, current).items():
            rows.append(("out", okey, OUTPUT_JSON.dumps(value), None, None, None, None, None, None))
        kept = job.expire(key, current) if expires else current
        if kept is None:
            if state.exists:
                state.remove()
            rows.append(("changelog", key, None, None, None, None, None, None, None))
        else:
            blob = serde.dumps(kept)
            state.update((blob,))
            rows.append(("changelog", key, blob, None, None, None, None, None, None))
        yield _frame(rows)

    return run


_GROUP_COLUMNS = ("ev", "reason", "raw_key", "raw_value", "src_topic", "src_partition", "src_offset")


def _group_columns(frames: Iterator) -> dict[str, list]:
    """One group's frames (``UPDATE_PARSED_DDL``) as Python lists per column, frames concatenated."""
    cols: dict[str, list] = {n: [] for n in _GROUP_COLUMNS}
    for pdf in frames:
        for n in _GROUP_COLUMNS:
            cols[n].extend(pdf[n].tolist())
    return cols


def seed_state(group: tuple, frames: Iterator, state) -> Iterator:
    """The seed query's function: the one row per key holds the key's serialized state."""
    import pandas as pd

    for pdf in frames:
        for blob in pdf["blob"]:
            state.update((blob,))
    yield pd.DataFrame({c: [] for c in _OUT_COLUMNS})
