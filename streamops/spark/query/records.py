"""The Kafka records a batch's output rows (``plan.JobQuery.build``) become: the output (``emit``),
the changelog (the serialized state, a tombstone for a deleted key) and the DLQ (the raw record,
its reason and source coordinates in headers), each with the batch id in a header; and reading
those headers back (``dlq_entry``, ``batch_of``).

The driver runs it: the committer encodes each batch (``JobQuery.records``), and check, lint and
verify read records back. The executors' workers take ``OUTPUT_JSON`` from here (an update job's
output is encoded in its per-group function), so this module loads the header names
(``streamops.app.topics``, which loads the Kafka admin) and the committer only where it uses them.
"""

from __future__ import annotations

import json
import math
import pickle
from typing import TYPE_CHECKING

from streamops.app.topics import (
    H_BATCH_ID,
    H_REASON,
    H_SOURCE_OFFSET,
    H_SOURCE_PARTITION,
    H_SOURCE_TOPIC,
    H_TRUNCATED,
)
from streamops.arrow import DLQ_COLUMNS
from streamops.job import Job, JsonSerde

if TYPE_CHECKING:
    import pyarrow as pa

    from streamops.spark.commit import OutRecord

#: an output record's value: canonical JSON of what ``emit`` gave
OUTPUT_JSON = JsonSerde()
#: a rejected record's DLQ copy keeps at most this much of its key and value: the copy must fit in
#: one Kafka message (brokers and producers refuse ~1 MB by default), or the batch's transaction
#: fails and the batch replays for ever
DLQ_MAX_BYTES = 256 * 1024


def batch_headers(batch_id: int) -> tuple:
    """The headers of an output, changelog or tick record written by micro-batch ``batch_id``."""
    return ((H_BATCH_ID, str(batch_id).encode()),)


def batch_of(headers: list | None) -> int | None:
    """The micro-batch that wrote an output/changelog record (None: not written by a job)."""
    for k, v in headers or ():
        if k == H_BATCH_ID:
            return int(v)
    return None


def dlq_headers(reason: str, topic: str, partition: int, offset: int, batch_id: int) -> tuple:
    return ((H_REASON, reason.encode()), (H_SOURCE_TOPIC, topic.encode()),
            (H_SOURCE_PARTITION, str(partition).encode()), (H_SOURCE_OFFSET, str(offset).encode()),
            (H_BATCH_ID, str(batch_id).encode()))


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
    h = {k: v.decode() for k, v in (headers or [])}
    return (h[H_SOURCE_TOPIC], int(h[H_SOURCE_PARTITION]), int(h[H_SOURCE_OFFSET])), h[H_REASON]


#: what an update job's ``dlq`` out row's value holds (``pack_dlq``), in this order: the DLQ columns
DLQ_FIELDS = tuple(name for name, _type in DLQ_COLUMNS)


def pack_dlq(reason: str, raw_key: bytes | None, raw_value: bytes | None, src_topic: str, src_partition: int,
             src_offset: int) -> bytes:
    """A rejected record and its reason as one value: the update job's per-group function (on an
    executor) writes it, ``update_records`` (on the driver) reads it. One column, not six, per out
    row (``worker`` module docstring)."""
    return pickle.dumps((reason, raw_key, raw_value, src_topic, src_partition, src_offset), protocol=5)


def unpack_dlq(value: bytes) -> dict:
    """``pack_dlq``'s fields by name (``DLQ_FIELDS``)."""
    return dict(zip(DLQ_FIELDS, pickle.loads(value)))


def _dlq_of(row: dict, dlq: str, batch_id: int) -> OutRecord:
    """A ``dlq`` output row's DLQ copy."""
    return dlq_record(dlq, row["raw_key"], row["raw_value"], row["reason"], row["src_topic"], row["src_partition"],
                      row["src_offset"], batch_id)


def update_records(table: pa.Table, batch_id: int, *, output: str, changelog: str, dlq: str) -> list[OutRecord]:
    """An update job's batch: each row (``worker``'s out rows) as the record of its kind."""
    from streamops.spark.commit import OutRecord

    bid = batch_headers(batch_id)
    out: list[OutRecord] = []
    for row in table.to_pylist():
        kind = row["kind"]
        if kind == "dlq":
            out.append(_dlq_of(unpack_dlq(row["value"]), dlq, batch_id))
        elif kind == "out":
            out.append(OutRecord(output, row["key"].encode(), row["value"], bid))
        elif kind == "changelog":
            out.append(OutRecord(changelog, row["key"].encode(), row["value"], bid))
    return out


def clock_rows(table: pa.Table) -> dict[str, int]:
    """A stream-time batch's clock rows (``worker.timed_key``'s: key "topic/partition", value its
    largest event time) as {"topic/partition": largest event time}."""
    import pyarrow.compute as pc

    out: dict[str, int] = {}
    if table.num_rows == 0:
        return out
    for row in table.filter(pc.equal(table.column("kind"), "clock")).select(["key", "value"]).to_pylist():
        ts = int(row["value"])
        out[row["key"]] = max(ts, out.get(row["key"], ts))
    return out


def aggregate_records(job: Job, table: pa.Table, batch_id: int, *, output: str, changelog: str,
                      dlq: str) -> list[OutRecord]:
    """An aggregate job's batch, column by column: at 50k keys a batch, a dict per row and a JSON
    encoder per state were a third of the encoding (the changelog of a JSON-serialized aggregation
    is formatted directly)."""
    import pyarrow.compute as pc

    from streamops.spark.commit import OutRecord

    job_cls = type(job)
    bid = batch_headers(batch_id)
    agg = job_cls.aggregate or {}
    kinds = table.column("kind")
    states = table.filter(pc.equal(kinds, "state"))
    out: list[OutRecord] = []
    fields = list(agg)
    cols = [(states.column(f).fill_null(a.identity()) if a.kind == "sum" else states.column(f)).to_pylist()
            for f, a in agg.items()]
    state_bytes = _fields_json(fields) if type(job_cls.state_serde) is JsonSerde else job_cls.state_serde.dumps
    emit, dumps = job.emit, OUTPUT_JSON.dumps
    for key, *values in zip(states.column(job_cls.key_name).to_pylist(), *cols):
        state = dict(zip(fields, values))
        kb = key.encode()
        out.append(OutRecord(changelog, kb, state_bytes(state), bid))
        for okey, value in emit(key, state).items():
            out.append(OutRecord(output, kb if okey == key else okey.encode(), dumps(value), bid))
    dlq_rows = table.filter(pc.equal(kinds, "dlq"))
    for row in dlq_rows.select(["raw_key", "raw_value", "reason", "src_topic", "src_partition",
                                "src_offset"]).to_pylist():
        out.append(_dlq_of(row, dlq, batch_id))
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
