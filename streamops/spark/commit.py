"""Exactly-once effects of a micro-batch: one Kafka transaction per batch, with a batch marker.

Why transactions and not idempotent upserts alone: upserts make the *latest value per key*
right after a replay, but every replay would still append duplicate records (DLQ entries
included). Here each batch's output, changelog and DLQ records plus a marker
``{"batch_id": N}`` on the app's compacted commits topic are committed atomically under a
``transactional.id`` per app. A restarted driver fences its dead predecessor (aborting any
half-written batch), reads the last committed marker, and skips batches it already committed —
while still letting Spark recompute them so the state store advances. Readers use
``isolation.level=read_committed``.

Each marker names the checkpoint it counts batches of (``checkpoint_id``, Spark's query id); a
driver does not start on a checkpoint the last marker is not about (``checkpoints.lineage``).

The latest marker wins (markers of one app share a key, so one partition, in order). A restore
to a savepoint writes a *rewind* marker (``rewind``) so the batches after the savepoint are
written again: upserts (profiles, changelog) are idempotent per key; records tied to one input
record (DLQ entries, carrying the ``streamops.source.*`` headers) whose input offset was already
emitted before the rewind (``emitted_until``) are dropped, so no record is counted twice.

That holds while an input offset names the same record. A partition deleted and created again
starts over at offset 0 with other records: markers carry each input partition's origin
(``kafka.identity``), and a committer that finds a partition recreated forgets what was emitted
from its previous life and records when it noticed (``input_recreated``; ``check`` leaves the DLQ
entries of that previous life out).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from streamops.app.marker import last_marker
from streamops.app.topics import (
    H_SOURCE_OFFSET,
    H_SOURCE_PARTITION,
    H_SOURCE_TOPIC,
    SINK_PARTITIONER,
    consumer_group,
    transactional_id,
)
from streamops.checkpoints import lineage
from streamops.exceptions import StreamopsError
from streamops.kafka import identity
from streamops.kafka.config import KafkaConfig

log = logging.getLogger(__name__)

Header = tuple[str, bytes]
@dataclass(frozen=True)
class OutRecord:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: Sequence[Header] = ()


class CommitterWedged(StreamopsError):
    """A call of the batch's transaction did not return in time; the committer is not usable.

    Operator action: none; the query restarts from its checkpoint with a new committer (the
    replayed batch is written once). If it repeats, check the broker (`streamops platform status`).
    """


Offsets = dict[str, dict[str, int]]
#: the longest a batch waits for ``send_offsets_to_transaction`` (milliseconds when the group
#: coordinator answers; a coordinator that moved can hang it, ``_send_offsets``): beyond this the
#: batch fails and is replayed. At 60 s the loss of the coordinator's node paused an app 74 s on
#: the three-node cluster, at 15 s 26-32 s (docs/benchmarks.md, issue 41)
SEND_OFFSETS_S = 15.0
#: our own clock's slack over librdkafka's timeout before the call counts as hung
GUARD_SLACK_S = 5.0
#: a task marker is ``epoch << EPOCH_SHIFT | batch_id`` (``BatchCommitter.task_marker``): 2**40 batches per epoch
EPOCH_SHIFT = 40


def merge_max(a: Offsets, b: Offsets) -> Offsets:
    out = {t: dict(ps) for t, ps in a.items()}
    for t, ps in b.items():
        for p, o in ps.items():
            out.setdefault(t, {})[str(p)] = max(int(o), out.get(t, {}).get(str(p), -1))
    return out


def already_emitted(record: OutRecord, emitted_until: Offsets) -> bool:
    """A record tied to one input record whose input offset is below what was emitted before."""
    if not emitted_until or not record.headers:
        return False
    h = dict(record.headers)
    try:
        topic = h[H_SOURCE_TOPIC].decode()
        partition, offset = h[H_SOURCE_PARTITION].decode(), int(h[H_SOURCE_OFFSET])
    except (KeyError, ValueError):
        return False
    return offset < emitted_until.get(topic, {}).get(partition, -1)


class BatchCommitter:
    """Commits each micro-batch's records exactly once (see module docstring)."""

    def __init__(self, kafka: KafkaConfig, app: str, commits_topic: str, *, checkpoint: Path | None = None,
                 producer_config: dict | None = None, timeout: float = 60.0) -> None:
        """``kafka``: the app's client configuration. ``checkpoint``: the one the committed batches
        belong to; its id goes into each marker."""
        self.app = app
        self.checkpoint = checkpoint
        self._checkpoint_id: str | None = None
        self.commits_topic = commits_topic
        self.timeout = timeout
        self.producer = Producer({
            "bootstrap.servers": kafka.bootstrap, **kafka.librdkafka(),
            "transactional.id": transactional_id(app),
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1_000_000,
            "transaction.timeout.ms": 120_000,
            "partitioner": SINK_PARTITIONER,
            **(producer_config or {}),
        })
        # fences an older instance with the same transactional.id and aborts its open transaction
        self.producer.init_transactions(timeout)
        # the input offsets of each batch also go to the consumer group named after the app, in the
        # batch's transaction, for Kafka's tools and lag exporters (the checkpoint stays the truth)
        group = Consumer({"bootstrap.servers": kafka.bootstrap, **kafka.librdkafka(),
                          "group.id": consumer_group(app), "enable.auto.commit": False, "log_level": 0})
        try:  # only its metadata is needed; a consumer kept open would keep connecting for nothing
            self._group_metadata = group.consumer_group_metadata()
        finally:
            group.close()
        marker = last_marker(kafka, commits_topic, app) or {}
        self.last_committed: int = int(marker.get("batch_id", -1))
        self.emitted_until: Offsets = marker.get("emitted_until") or {}
        self.dropped = 0  # records not written again after a rewind (already emitted)
        #: bumped by each rewind: the tasks' per-partition markers (``task_marker``) of batches
        #: before it are below every batch after it, so a rewound batch is written again
        self.writer_epoch: int = int(marker.get("writer_epoch", 0))
        self.kafka = kafka
        self.origins: identity.Origins = marker.get("input_origin") or {}
        #: {topic: {partition: ms}}: when a recreated input partition was noticed
        self.input_recreated: dict[str, dict[str, int]] = marker.get("input_recreated") or {}
        self._notice_recreated(set(self.emitted_until) | set(self.origins))

    def _notice_recreated(self, topics: set[str]) -> None:
        """Forget what was emitted from input partitions that were deleted and created again."""
        if not topics:
            return
        current = identity.origins(self.kafka, topics)
        now_ms = int(time.time() * 1000)
        for topic, parts in identity.recreated(self.origins, current, self.emitted_until).items():
            for p in parts:
                was = self.emitted_until.get(topic, {}).pop(p, None)
                self.input_recreated.setdefault(topic, {})[p] = now_ms
                log.warning("%s: input %s[%s] was recreated (it is not the partition batches up to %s read, up "
                            "to offset %s): records at its offsets are new, and rejected ones go to the DLQ again",
                            self.app, topic, p, self.last_committed, was)
        self.origins = {**self.origins, **current}

    def emitted_before(self, input_end: Offsets | None) -> Offsets:
        """What was emitted before this batch (``already_emitted``'s bound), once input partitions
        seen for the first time have their origin (a recreated one forgets what it emitted)."""
        if input_end and set(input_end) - set(self.origins):
            self._notice_recreated(set(input_end) - set(self.origins))  # topics seen first: their origin
        return self.emitted_until

    def task_marker(self, batch_id: int) -> int:
        """The per-partition marker of ``batch_id`` when the tasks write its records
        (``spark.kafka_writer``): the batch id in this rewind epoch (``writer_epoch``)."""
        return (self.writer_epoch << EPOCH_SHIFT) | batch_id

    def commit(self, batch_id: int, records: Iterable[OutRecord], input_end: Offsets | None = None,
               marker_extra: dict | None = None, written: int = 0) -> int | None:
        """Write ``records`` + marker atomically; None if ``batch_id`` was already committed.

        ``input_end``: the batch's input end offsets, kept in the marker as ``emitted_until``;
        ``marker_extra``: more of what the batch's state depends on (``stream_time``: a job's clocks);
        ``written``: records of the batch its tasks committed before (counted in the marker)."""
        if batch_id <= self.last_committed:
            return None
        self.emitted_before(input_end)
        n = written
        emitted = merge_max(self.emitted_until, input_end or {})
        self.producer.begin_transaction()
        try:
            for r in records:
                if already_emitted(r, self.emitted_until):
                    self.dropped += 1
                    continue
                self._produce(r.topic, r.key, r.value, list(r.headers))
                n += 1
            # input_end: the input this batch's state (and so the changelog) reflects; rebuild-state
            # starts a checkpoint rebuilt from the changelog there
            marker = {"batch_id": batch_id, "records": n, "committed_at_ms": int(time.time() * 1000),
                      "emitted_until": emitted, "input_end": input_end or {},
                      "checkpoint_id": self.checkpoint_id(), "writer_epoch": self.writer_epoch, **self._identity(),
                      **(marker_extra or {})}
            self._produce(self.commits_topic, self.app.encode(), json.dumps(marker).encode(), [])
            if input_end:
                self._send_offsets([TopicPartition(t, int(p), int(o)) for t, ps in input_end.items()
                                    for p, o in ps.items()])
            self.producer.commit_transaction(self.timeout)
        except CommitterWedged:
            raise  # its producer is stuck in a call: the next driver's fences it (aborting the transaction)
        except BaseException:
            try:
                self.producer.abort_transaction(self.timeout)
            except KafkaException:
                pass
            raise
        self.last_committed = batch_id
        self.emitted_until = emitted
        return n

    def _send_offsets(self, offsets: list[TopicPartition]) -> None:
        """``send_offsets_to_transaction``, bounded by our own clock: librdkafka can block in it
        past its timeout, for good, when the group coordinator went away during the call (a broker
        restart; librdkafka issues 5456 and 5511, open). The batch then fails as a commit timeout
        does, and the query's restart makes a new committer, whose ``init_transactions`` fences this
        producer and aborts its transaction: the batch is written once, by the replay."""
        done = threading.Event()
        failed: list[BaseException] = []
        limit = min(self.timeout, SEND_OFFSETS_S)

        def call() -> None:
            try:
                self.producer.send_offsets_to_transaction(offsets, self._group_metadata, limit)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the caller
                failed.append(exc)
            finally:
                done.set()

        threading.Thread(target=call, name=f"{self.app}-send-offsets", daemon=True).start()
        if not done.wait(limit + GUARD_SLACK_S):
            raise CommitterWedged(f"{self.app}: committing the batch's input offsets to consumer group "
                                  f"{consumer_group(self.app)!r} did not return in {limit + GUARD_SLACK_S:g} s "
                                  f"(the broker's group coordinator went away?); the batch will be replayed")
        if failed:
            raise failed[0]

    def _identity(self) -> dict:
        return {"input_origin": self.origins, **({"input_recreated": self.input_recreated}
                                                 if self.input_recreated else {})}

    def checkpoint_id(self) -> str | None:
        """The checkpoint's id, once Spark has written it (at the query's first start)."""
        if self._checkpoint_id is None and self.checkpoint is not None:
            self._checkpoint_id = lineage.checkpoint_id(self.checkpoint)
        return self._checkpoint_id

    def rewind(self, batch_id: int) -> dict:
        """Mark ``batch_id`` of ``checkpoint`` as the last committed one (a restore to a savepoint
        at that batch); fences any running instance. What was emitted before stays recorded."""
        marker = {"batch_id": batch_id, "records": 0, "committed_at_ms": int(time.time() * 1000),
                  "emitted_until": self.emitted_until, "rewind": True, "rewound_from": self.last_committed,
                  "checkpoint_id": self.checkpoint_id(), "writer_epoch": self.writer_epoch + 1, **self._identity()}
        self.producer.begin_transaction()
        try:
            self._produce(self.commits_topic, self.app.encode(), json.dumps(marker).encode(), [])
            self.producer.commit_transaction(self.timeout)
        except BaseException:
            self.producer.abort_transaction(self.timeout)
            raise
        self.last_committed = batch_id
        self.writer_epoch += 1
        return marker

    def _produce(self, topic: str, key: bytes | None, value: bytes | None, headers: list[Header]) -> None:
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, headers=headers or None)
                return
            except BufferError:
                self.producer.poll(0.05)

    def close(self) -> None:
        self.producer.flush(self.timeout)
