"""A batch's records made by the tasks that produce its rows (issue 39, item 3): the executors'
side of the commit on the executors (``spark.driver.task_commit``).

``encode_batches`` is a ``mapInArrow`` function over the query's output rows: it turns them into
the Kafka records the driver path's ``records`` gives (the same encoders, per Arrow batch), drops
the DLQ copies a rewind already emitted (``commit.already_emitted``), places each keyed record on
the partition librdkafka's ``consistent_random`` partitioner picks (the driver's producer and every
"latest per key" reader agree on it), and adds what the driver needs of the batch (record counts,
DLQ reasons, a stream-time job's clock rows) to an accumulator: ``BatchTotals`` by batch id. The
transactional writer (``spark.kafka_writer``) then writes the records, each partition in its own
transaction.

Loaded by the Python workers: no Kafka admin, ledger or spec.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from streamops.app.topics import H_REASON
from streamops.job import Job

#: the rows the transactional writer takes (``TransactionalKafkaSink``): a null partition lets
#: the producer choose (a record without a key)
RECORD_DDL = "topic string, partition int, key binary, value binary, headers array<struct<key:string,value:binary>>"
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
RECORD_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("key", pa.binary()),
                           ("value", pa.binary()), ("headers", HEADERS_TYPE)])


def sink_partition(key: bytes | None, partitions: int) -> int | None:
    """The partition librdkafka's ``consistent_random`` partitioner (``topics.SINK_PARTITIONER``)
    gives ``key``: CRC-32 of the key modulo the partition count; None (any) for an empty key."""
    if not key:
        return None
    return zlib.crc32(key) % partitions


@dataclass
class BatchTotals:
    """What the driver needs of a batch whose records the tasks wrote (summed over its tasks)."""

    records: int = 0  # records made for Kafka (all partitions, written or skipped as already committed)
    dropped: int = 0  # DLQ copies not made again after a rewind (already emitted)
    dlq: dict[str, int] = field(default_factory=dict)  # DLQ records by reason
    #: a stream-time job's clock rows: the largest event time per input partition ("topic/partition")
    clocks: dict[str, int] = field(default_factory=dict)

    def merge(self, other: BatchTotals) -> BatchTotals:
        self.records += other.records
        self.dropped += other.dropped
        for reason, n in other.dlq.items():
            self.dlq[reason] = self.dlq.get(reason, 0) + n
        for key, ts in other.clocks.items():
            self.clocks[key] = max(ts, self.clocks.get(key, ts))
        return self


def merge_totals(a: dict[int, BatchTotals], b: dict[int, BatchTotals]) -> dict[int, BatchTotals]:
    """Two accumulator values ({batch id: totals}) as one: ``a`` updated in place."""
    for batch_id, totals in b.items():
        a[batch_id] = a[batch_id].merge(totals) if batch_id in a else BatchTotals().merge(totals)
    return a


def totals_param():
    """The accumulator parameter of {batch id: ``BatchTotals``} (pyspark loaded only here)."""
    from pyspark.accumulators import AccumulatorParam

    class TotalsParam(AccumulatorParam):
        def zero(self, value):
            return {}

        def addInPlace(self, value1, value2):
            return merge_totals(value1, value2)

    return TotalsParam()


@dataclass(frozen=True)
class EncodeSpec:
    """What the tasks need to make a batch's records: the job, its topics and their partition counts."""

    job_cls: type[Job]
    output: str
    changelog: str
    dlq: str
    partitions: Mapping[str, int]  # topic -> partition count (output, changelog, DLQ)


def encode_batches(spec: EncodeSpec, batch_id: int, emitted_until: Mapping[str, Mapping[str, int]], totals: Any):
    """``mapInArrow``'s function: the query's output rows -> ``RECORD_SCHEMA`` rows (module
    docstring); ``totals``: the accumulator the task's ``BatchTotals`` go to."""
    from streamops.spark.commit import already_emitted
    from streamops.spark.query.records import aggregate_records, clock_rows, update_records

    aggregate = spec.job_cls.is_aggregate()
    emitted = {t: dict(ps) for t, ps in emitted_until.items()}

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        job = spec.job_cls()
        mine = BatchTotals()
        for batch in batches:
            table = pa.Table.from_batches([batch])
            if aggregate:
                records = aggregate_records(job, table, batch_id, output=spec.output, changelog=spec.changelog,
                                            dlq=spec.dlq)
            else:
                records = update_records(table, batch_id, output=spec.output, changelog=spec.changelog, dlq=spec.dlq)
                mine.merge(BatchTotals(clocks=clock_rows(table)))
            kept = []
            for r in records:
                if r.topic == spec.dlq:
                    if emitted and already_emitted(r, emitted):
                        mine.dropped += 1
                        continue
                    reason = dict(r.headers).get(H_REASON, b"").decode("utf-8", "replace")
                    mine.dlq[reason] = mine.dlq.get(reason, 0) + 1
                kept.append(r)
            mine.records += len(kept)
            if kept:
                yield record_batch(kept, spec.partitions)
        totals.add({batch_id: mine})

    return run


def record_batch(records: list, partitions: Mapping[str, int]) -> pa.RecordBatch:
    """``commit.OutRecord``s as ``RECORD_SCHEMA`` rows, each keyed one on its sink partition."""
    return pa.RecordBatch.from_arrays([
        pa.array([r.topic for r in records], pa.string()),
        pa.array([sink_partition(r.key, partitions[r.topic]) for r in records], pa.int32()),
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], HEADERS_TYPE),
    ], schema=RECORD_SCHEMA)
