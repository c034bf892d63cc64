"""A batch's records committed by the tasks that make them (spec ``commit_on: executors``; issue
39, item 3), where the driver path collects every row and writes it from one producer.

Inside ``foreachBatch``, the query's output rows become Kafka records on the executors
(``query.task_records``), and each partition of them is written in its own transaction under
``streamops-APP-pN``, with the batch as the offset of that partition's marker group
(``_streamops-APP-task-pN``) on the commits topic in the same transaction
(``spark.kafka_writer``). A retried or zombie task is fenced by its transactional id, and a
partition whose marker already holds the batch writes nothing, so a replayed batch is written once.
The driver then commits the batch marker, the consumer group's offsets and a stream-time job's
tick in its own transaction (``commit.BatchCommitter``), from what the tasks summed up
(``task_records.BatchTotals``): no record passes through the driver.

A rewind (``BatchCommitter.rewind``) bumps the marker's ``writer_epoch``, which is part of every
task marker after it, so the batches after a restore are written again.
"""

from __future__ import annotations

from typing import Any

from streamops.app.topics import task_group_prefix, transactional_id
from streamops.kafka.config import KafkaConfig
from streamops.spark.query.task_records import (
    RECORD_DDL,
    BatchTotals,
    EncodeSpec,
    encode_batches,
    totals_param,
)


class TaskCommit:
    """The executors' half of a batch's commit, for one start of the app's query (module docstring)."""

    def __init__(self, spark: Any, kafka: KafkaConfig, app: str, commits_topic: str, encode: EncodeSpec,
                 *, timeout_s: float = 60.0) -> None:
        self.spark, self.kafka, self.app, self.commits_topic = spark, kafka, app, commits_topic
        self.encode, self.timeout_s = encode, timeout_s
        self.totals = spark.sparkContext.accumulator({}, totals_param())

    def write(self, df: Any, batch_id: int, *, marker: int, emitted_until: dict) -> BatchTotals:
        """Evaluate the batch (the state store advances even where nothing is written) and write its
        records; ``marker``: its task marker (``BatchCommitter.task_marker``). What the tasks summed up."""
        from streamops.spark.kafka_writer import write_transactional

        records = df.mapInArrow(encode_batches(self.encode, batch_id, emitted_until, self.totals), RECORD_DDL)
        write_transactional(records, kafka=self.kafka, transactional_prefix=transactional_id(self.app),
                            marker_topic=self.commits_topic, marker_group_prefix=task_group_prefix(self.app),
                            batch_id=marker, timeout_s=self.timeout_s)
        done = self.totals.value
        totals = done.pop(batch_id, None) or BatchTotals()
        self.totals.value = {k: v for k, v in done.items() if k > batch_id}  # nothing older is ever read
        return totals
