"""What Spark runs on the executors, in their Python workers: the parse stage (``mapInArrow``),
the update jobs' per-group functions (``applyInPandasWithState``, ``transformWithStateInPandas``:
each key's events folded in input order, emitted, expired, and the changelog rows written), the
state they keep (``BlobStore``; named state's ``NamedStore`` and processor are in ``named``) and the
seed queries' functions.

The driver (``plan.JobQuery``) hands Spark closures over these; cloudpickle ships what they name
here by reference, so each worker imports this module: everything is top-level and importable,
and imports stay lean (no Kafka admin, ledger or spec; ``runner.WARM_MODULES`` preloads it).
pandas, Spark's classes and the stream-time and named-state helpers load where used.

Update jobs' rows (DDL for the plan, Arrow for the functions): parsed (key, lane, and the rest of
the row pickled in one ``row`` column: ``ROW_FIELDS``), rejected records in ``REJECT_LANE`` keyed
by source partition and never given state, clock and tick lanes for stream time; out (kind, key,
value; a DLQ row's fields packed in its value, ``records.pack_dlq``), which ``records`` encodes.
One column, not one per field: PySpark hands the
per-group function each group as a pandas frame built column by column, and with ten columns that
conversion was most of the state stage's time (docs/benchmarks.md, "Update jobs' rows in one
column").
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from streamops.job import Job, Record, Reject, key_or_reject
from streamops.spark.query.records import DLQ_FIELDS, OUTPUT_JSON, pack_dlq

#: the lane of rejected records in an update job's grouping key (events: 0)
REJECT_LANE = 1
#: jobs with stream time: per input partition, the largest event time a task saw (key "topic/partition")
CLOCK_LANE = 2
#: jobs with stream time: a tick record (it only carries the watermark into Spark)
TICK_LANE = 3
#: Spark's local property holding the micro-batch id in a streaming query's tasks
BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: update jobs: the parsed rows (the grouping key, then ``ROW_FIELDS`` pickled as one tuple) and the
#: stateful operator's output rows
UPDATE_PARSED_DDL = "key string, lane int, row binary"
#: out rows: a ``dlq`` row's value is the rejected record and its reason (``records.pack_dlq``)
UPDATE_OUT_DDL = "kind string, key string, value binary"
UPDATE_STATE_DDL = "blob binary"
#: jobs with stream time: each row also carries the watermark Spark is to learn (``wm_ms``, see
#: ``plan.JobQuery._build_update``)
TIMED_DDL = ", wm_ms long"
#: what a parsed row's ``row`` column holds, in this order: the event (None when rejected), the DLQ
#: columns, and for stream time the event's time and its partition's stream time before it
#: (``NO_TIME``: none yet)
ROW_FIELDS = ("ev", *DLQ_FIELDS, "ts", "st")
NO_TIME = -1


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
                key = parsed if isinstance(parsed, Reject) else key_or_reject(job, parsed)
                if isinstance(key, Reject):
                    parsed = key
                    cols[key_name].append(None)
                    for f in fields:
                        cols[f].append(None)
                    cols["reason"].append(parsed.reason)
                    cols["raw_key"].append(r.key)
                    cols["raw_value"].append(r.value)
                else:
                    contribution = job.contribute(parsed)
                    cols[key_name].append(key)
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


_UPDATE_PARSED = pa.schema([("key", pa.string()), ("lane", pa.int32()), ("row", pa.binary())])


_TIMED_PARSED = pa.schema([*_UPDATE_PARSED, ("wm_ms", pa.int64())])


def pack_row(ev: Any, reason: str | None, raw_key: bytes | None, raw_value: bytes | None, topic: str | None,
             partition: int | None, offset: int | None, ts: int = NO_TIME, st: int = NO_TIME) -> bytes:
    """A parsed row's ``row`` column (``ROW_FIELDS``)."""
    return pickle.dumps((ev, reason, raw_key, raw_value, topic, partition, offset, ts, st), protocol=5)


def unpack_row(blob: bytes) -> dict[str, Any]:
    """A ``row`` column's value as a dict of ``ROW_FIELDS`` (the inverse of ``pack_row``)."""
    return dict(zip(ROW_FIELDS, pickle.loads(blob)))


def _parsed_batch(rows: list[tuple], schema: pa.Schema) -> pa.RecordBatch:
    columns = list(zip(*rows)) if rows else [[] for _ in schema]
    return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(columns, schema)], schema=schema)


def parse_update(job_cls: type[Job], *, checkpoint: Path | None = None, ticks_topic: str | None = None):
    """mapInArrow: Kafka rows -> (key, lane 0, the event's row) or (source partition, lane 1, the reason's row).
    Events keep their raw record when the job screens them or has stream time (a screened or late
    event goes to the DLQ)."""
    if job_cls.has_time():
        return parse_timed(job_cls, checkpoint, ticks_topic)
    keep_raw = job_cls.has_screen()

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        job = job_cls()
        for b in batches:
            rows: list[tuple] = []
            for r in _records(b):
                parsed = job.parse(r)
                key = parsed if isinstance(parsed, Reject) else key_or_reject(job, parsed)
                if isinstance(key, Reject):
                    rows.append((f"{r.topic}/{r.partition}", REJECT_LANE,
                                 pack_row(None, key.reason, r.key, r.value, r.topic, r.partition, r.offset)))
                else:
                    raw_key, raw_value = (r.key, r.value) if keep_raw else (None, None)
                    rows.append((key, 0, pack_row(parsed, None, raw_key, raw_value, r.topic, r.partition, r.offset)))
            yield _parsed_batch(rows, _UPDATE_PARSED)

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
    """Rows of (key, lane, *``ROW_FIELDS``, wm_ms) as parsed rows (``_TIMED_PARSED``)."""
    return _parsed_batch([(r[0], r[1], pack_row(*r[2:11]), r[11]) for r in rows], _TIMED_PARSED)


def parse_timed(job_cls: type[Job], checkpoint: Path | None, ticks_topic: str | None):
    """mapInArrow for a job with stream time: each event with its time and its partition's stream
    time before it (``stream_time``), one clock row per partition the task read (its largest event
    time), tick rows in their own lane; every row carries the watermark for Spark
    (``plan.JobQuery._build_update``)."""
    from streamops import stream_time

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        job = job_cls()
        clocks, wm = batch_clocks(checkpoint)
        running: dict[tuple[str, int], int] = dict(clocks)
        seen: set[tuple[str, int]] = set()
        wm_ms = 1 if wm is None else wm + 1
        for b in batches:
            rows: list[tuple] = []  # key, lane, ROW_FIELDS, wm_ms
            for r in _records(b):
                where = (r.topic, r.partition, r.offset)
                if r.topic == ticks_topic:
                    rows.append(("tick", TICK_LANE, None, None, None, None, *where, NO_TIME, NO_TIME, wm_ms))
                    continue
                parsed = job.parse(r)
                ts = None if isinstance(parsed, Reject) else stream_time.event_time(job, parsed, r.timestamp_ms)
                key = key_or_reject(job, parsed) if ts is not None else None
                if ts is None or isinstance(key, Reject):
                    reason = (parsed.reason if isinstance(parsed, Reject) else
                              key.reason if isinstance(key, Reject) else stream_time.BAD_TIMESTAMP)
                    rows.append((f"{r.topic}/{r.partition}", REJECT_LANE, None, reason, r.key, r.value, *where,
                                 NO_TIME, NO_TIME, wm_ms))
                    continue
                before = stream_time.advance(running, (r.topic, r.partition), ts)
                seen.add((r.topic, r.partition))
                rows.append((key, 0, parsed, None, r.key, r.value, *where, ts,
                             NO_TIME if before is None else before, wm_ms))
            yield _timed_batch(rows)
        if seen:
            yield _timed_batch([(f"{t}/{p}", CLOCK_LANE, None, None, None, None, t, p, None, running[(t, p)], NO_TIME,
                                 wm_ms) for t, p in sorted(seen)])

    return run


_OUT_COLUMNS = ["kind", "key", "value"]


def _frame(rows: list[tuple]):
    import pandas as pd

    return pd.DataFrame.from_records(rows, columns=_OUT_COLUMNS)


def _dlq_row(reason: str, raw_key, raw_value, topic: str, partition: int, offset: int) -> tuple:
    return ("dlq", None, pack_dlq(reason, raw_key, raw_value, topic, int(partition), int(offset)))


def update_state(job_cls: type[Job]):
    """applyInPandasWithState: fold one key's events of a batch into its state (``update_key``)."""
    if job_cls.has_time():
        return update_timed(job_cls)

    def run(group: tuple, frames: Iterator, state) -> Iterator:
        key, lane = group
        yield _frame(update_key(job_cls, key, lane, _group_columns(frames), BlobStore(job_cls, state)))

    return run


def update_key(job_cls: type[Job], key: str, lane: int, c: dict[str, list], store: Any) -> list[tuple]:
    """One key's events of a batch (a job without stream time) folded into its state in ``store``
    (``BlobStore`` or ``named.NamedStore``): the rows to emit."""
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
            ev = c["ev"][i]
            reason = job.screen(key, current, ev)
            if reason is not None:
                rows.append(_dlq_row(reason, *coords[i]))
            else:
                current = job.update(key, current, [ev])
    else:
        current = job.update(key, current, [c["ev"][i] for i in order])
    _finish(job, key, current, store, rows)
    return rows


def _finish(job: Job, key: str, current: Any, store: Any, rows: list[tuple]) -> Any:
    """Emit ``current``, expire it and write what is kept (None: the key is deleted) to the store,
    which adds its changelog rows; returns what is kept."""
    for okey, value in job.emit(key, current).items():
        rows.append(("out", okey, OUTPUT_JSON.dumps(value)))
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
            rows.append(("changelog", key, None))
            return None
        blob = self.serde.dumps(kept)
        self.state.update((blob,))
        rows.append(("changelog", key, blob))
        return kept

    def set_timer(self, ts: int | None, wm: int | None) -> None:
        if ts is not None:  # Spark wakes the key once its watermark is past ts - 1, i.e. reaches ts
            self.state.setTimeoutTimestamp(max(ts - 1, wm or 1))


def update_timed(job_cls: type[Job]):
    """applyInPandasWithState for a job with stream time (``timed_key``)."""

    def run(group: tuple, frames: Iterator, state) -> Iterator:
        key, lane = group
        yield _frame(timed_key(job_cls, key, lane, _group_columns(frames), BlobStore(job_cls, state)))

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
        return [("clock", key, str(int(c["ts"][0])).encode())]
    coords = list(zip(c["raw_key"], c["raw_value"], c["src_topic"], c["src_partition"], c["src_offset"]))
    if lane == REJECT_LANE:
        return [_dlq_row(reason, *coord) for reason, coord in zip(c["reason"], coords)]
    job = job_cls()
    wm = store.watermark()
    wm = wm if wm >= stream_time.MIN_TS else None
    order = sorted(range(len(coords)), key=lambda i: coords[i][2:])
    items = [stream_time.Timed((coords[i][2], int(coords[i][3]), int(coords[i][4])), c["ev"][i],
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


def _group_columns(frames: Iterator) -> dict[str, list]:
    """One group's frames (``UPDATE_PARSED_DDL``) as Python lists per field of ``ROW_FIELDS``
    (events unpickled), frames concatenated."""
    loads = pickle.loads
    rows = [loads(blob) for pdf in frames for blob in pdf["row"].tolist()]
    fields = list(zip(*rows)) if rows else [() for _ in ROW_FIELDS]
    return {n: list(fields[i]) for i, n in enumerate(ROW_FIELDS)}


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
