"""The records the tasks make (``query.task_records``, ``commit_on: executors``) are the driver
path's, however the rows are cut into Arrow batches: the same topics, keys, values and headers,
each keyed record on the partition librdkafka's consistent_random partitioner picks; a rewind's
DLQ copies already emitted are left out, and the totals the driver gets sum the batch's tasks."""

from __future__ import annotations

import zlib

import pyarrow as pa
import pytest

from jobs.orders import Orders
from jobs.user_activity import UserActivity
from streamops.app.topics import H_BATCH_ID, H_REASON, H_SOURCE_OFFSET
from streamops.spark.query.plan import JobQuery, Topics
from streamops.spark.query.records import pack_dlq
from streamops.spark.query.task_records import (
    RECORD_SCHEMA,
    BatchTotals,
    encode_batches,
    merge_totals,
    sink_partition,
)

TOPICS = Topics("out", "changelog", "dlq", "ticks")
PARTITIONS = {"out": 6, "changelog": 6, "dlq": 3}


class Totals:
    """An accumulator's ``add`` (Spark merges the tasks' values the same way)."""

    def __init__(self) -> None:
        self.value: dict[int, BatchTotals] = {}

    def add(self, v: dict[int, BatchTotals]) -> None:
        self.value = merge_totals(self.value, v)


def _aggregate_rows() -> pa.Table:
    n, bad = 40, 5
    agg = UserActivity.aggregate
    cols = {"kind": ["state"] * n + ["dlq"] * bad, "user_id": [f"u{i}" for i in range(n)] + [None] * bad}
    for f, a in agg.items():
        vals = [(i * 7 if a.type == "long" else i * 1.5) for i in range(n)]
        if f == "last_login_ts":
            vals = [None if i % 3 else i * 1000 for i in range(n)]
        cols[f] = vals + [None] * bad
    cols["reason"] = [None] * n + ["invalid_json", "missing_field", "invalid_json", "bad_key", "invalid_json"]
    cols["raw_key"] = [None] * n + [f"k{i}".encode() for i in range(bad)]
    cols["raw_value"] = [None] * n + [b"{nope" for _ in range(bad)]
    cols["src_topic"] = [None] * n + ["user-events"] * bad
    cols["src_partition"] = [None] * n + [0, 1, 2, 0, 1]
    cols["src_offset"] = [None] * n + [10, 11, 12, 13, 14]
    types = {"kind": pa.string(), "user_id": pa.string(), "reason": pa.string(), "raw_key": pa.binary(),
             "raw_value": pa.binary(), "src_topic": pa.string(), "src_partition": pa.int32(), "src_offset": pa.int64(),
             **{f: (pa.int64() if a.type == "long" else pa.float64()) for f, a in agg.items()}}
    return pa.table({k: pa.array(v, types[k]) for k, v in cols.items()})


def _update_rows() -> pa.Table:
    rows = [("out", f"c{i}", f'{{"n":{i}}}'.encode()) for i in range(20)]
    rows += [("changelog", f"c{i}", f"state-{i}".encode()) for i in range(20)]
    rows += [("changelog", "gone", None)]  # a deleted key's tombstone
    rows += [("dlq", None, pack_dlq("invalid_json", b"k1", b"{x", "orders", 1, 5)),
             ("dlq", None, pack_dlq("missing_field", None, b"{}", "orders", 0, 9))]
    rows += [("clock", "orders/0", b"5000"), ("clock", "orders/1", b"7000")]
    kind, key, value = zip(*rows)
    return pa.table({"kind": pa.array(kind, pa.string()), "key": pa.array(key, pa.string()),
                     "value": pa.array(value, pa.binary())})


def _driver_records(job_cls, table: pa.Table, batch_id: int) -> list[tuple]:
    records = JobQuery(job_cls, state_partitions=4, topics=TOPICS).records(table, batch_id)
    return _sorted([(r.topic, sink_partition(r.key, PARTITIONS[r.topic]), r.key, r.value, tuple(r.headers))
                    for r in records])


def _task_records(job_cls, table: pa.Table, batch_id: int, *, cut: int, emitted=None) -> tuple[list[tuple], Totals]:
    query = JobQuery(job_cls, state_partitions=4, topics=TOPICS)
    totals = Totals()
    out = []
    for start in range(0, table.num_rows, cut):  # one task per slice, each its own Arrow batches
        part = table.slice(start, cut)
        run = encode_batches(query.encode_spec(PARTITIONS), batch_id, emitted or {}, totals)
        for batch in run(iter(part.to_batches(max_chunksize=7))):
            assert batch.schema == RECORD_SCHEMA
            for row in batch.to_pylist():
                out.append((row["topic"], row["partition"], row["key"], row["value"],
                            tuple((h["key"], h["value"]) for h in row["headers"])))
    return _sorted(out), totals


def _sorted(rows: list[tuple]) -> list[tuple]:
    return sorted(rows, key=lambda r: (r[0], -1 if r[1] is None else r[1], r[2] or b"", r[3] or b"", r[4]))


@pytest.mark.parametrize("cut", [1, 6, 1000])
def test_an_aggregate_jobs_records_are_the_driver_paths_whatever_the_cut(cut: int) -> None:
    table = _aggregate_rows()
    got, totals = _task_records(UserActivity, table, 7, cut=cut)
    assert got == _driver_records(UserActivity, table, 7)
    assert {r[0] for r in got} == {"out", "changelog", "dlq"}
    for topic, partition, key, _v, headers in got:
        if topic != "dlq":
            assert partition == zlib.crc32(key) % 6 and (H_BATCH_ID, b"7") in headers
    (t,) = totals.value.values()
    assert totals.value.keys() == {7}
    assert t.records == len(got) and t.dropped == 0 and t.clocks == {}
    assert t.dlq == {"invalid_json": 3, "missing_field": 1, "bad_key": 1}


@pytest.mark.parametrize("cut", [1, 5, 1000])
def test_an_update_jobs_records_and_clock_rows_whatever_the_cut(cut: int) -> None:
    table = _update_rows()
    got, totals = _task_records(Orders, table, 3, cut=cut)
    assert got == _driver_records(Orders, table, 3)
    assert ("changelog", zlib.crc32(b"gone") % 6, b"gone", None, ((H_BATCH_ID, b"3"),)) in got
    t = totals.value[3]
    assert t.records == 20 + 21 + 2 and t.dlq == {"invalid_json": 1, "missing_field": 1}
    assert t.clocks == {"orders/0": 5000, "orders/1": 7000}  # not written anywhere: the driver's


def test_a_rewinds_dlq_copies_already_emitted_are_left_out_and_counted() -> None:
    table = _aggregate_rows()
    got, totals = _task_records(UserActivity, table, 2, cut=4, emitted={"user-events": {"0": 11, "1": 12}})
    dlq = [r for r in got if r[0] == "dlq"]
    # offsets 10 (p0) and 11 (p1) were emitted before the rewind; 12 (p2), 13 (p0: at the bound), 14 (p1) were not
    assert sorted(dict(r[4])[H_SOURCE_OFFSET] for r in dlq) == [b"12", b"13", b"14"]
    t = totals.value[2]
    assert t.dropped == 2 and sum(t.dlq.values()) == 3
    assert all(dict(r[4])[H_REASON] for r in dlq)


def test_totals_of_several_tasks_and_batches_merge_by_batch() -> None:
    a = {1: BatchTotals(3, 0, {"x": 1}, {"t/0": 5}), 2: BatchTotals(1)}
    b = {1: BatchTotals(2, 1, {"x": 2, "y": 1}, {"t/0": 4, "t/1": 9})}
    merged = merge_totals(a, b)
    assert merged[1] == BatchTotals(5, 1, {"x": 3, "y": 1}, {"t/0": 5, "t/1": 9})
    assert merged[2] == BatchTotals(1)


def test_a_keyless_record_is_left_to_the_producer() -> None:
    assert sink_partition(None, 6) is None and sink_partition(b"", 6) is None
    assert sink_partition(b"u1", 6) == zlib.crc32(b"u1") % 6
