"""Exactly-once effects of a micro-batch: one Kafka transaction per batch, with a batch marker.

Why transactions and not idempotent upserts alone: upserts make the *latest value per key*
right after a replay, but every replay would still append duplicate records (DLQ entries
included). Here each batch's output, changelog and DLQ records plus a marker
``{"batch_id": N}`` on the app's compacted commits topic are committed atomically under a
``transactional.id`` per app. A restarted driver fences its dead predecessor (aborting any
half-written batch), reads the last committed marker, and skips batches it already committed —
while still letting Spark recompute them so the state store advances. Readers use
``isolation.level=read_committed``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

Header = tuple[str, bytes]


@dataclass(frozen=True)
class OutRecord:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: Sequence[Header] = ()


def last_committed_batch(bootstrap: str, commits_topic: str, app: str, *, config: dict | None = None,
                         timeout: float = 30.0) -> int:
    """Highest batch id in committed markers for ``app`` (-1 if none)."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"_streamops-{app}-marker-reader",
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "enable.partition.eof": True, "receive.message.max.bytes": 1_000_000_000,
        **(config or {}),
    })
    try:
        md = c.list_topics(commits_topic, timeout=timeout).topics.get(commits_topic)
        if md is None or md.error is not None or not md.partitions:
            return -1
        last = -1
        for p in md.partitions:
            low, high = c.get_watermark_offsets(TopicPartition(commits_topic, p), timeout=timeout)
            if high <= low:
                continue
            # markers are tiny and one per batch; the tail holds the latest (plus control records)
            c.assign([TopicPartition(commits_topic, p, max(low, high - 200))])
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                msgs = c.consume(1000, timeout=1.0)
                done = False
                for m in msgs:
                    if m.error():
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            done = True
                            continue
                        raise KafkaException(m.error())
                    if m.key() == app.encode():
                        last = max(last, int(json.loads(m.value())["batch_id"]))
                if done:
                    break
            c.unassign()
        return last
    finally:
        c.close()


class BatchCommitter:
    """Commits each micro-batch's records exactly once (see module docstring)."""

    def __init__(self, bootstrap: str, app: str, commits_topic: str, *,
                 producer_config: dict | None = None, timeout: float = 60.0) -> None:
        self.app = app
        self.commits_topic = commits_topic
        self.timeout = timeout
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "transactional.id": f"streamops-{app}",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1_000_000,
            "transaction.timeout.ms": 120_000,
            **(producer_config or {}),
        })
        # fences an older instance with the same transactional.id and aborts its open transaction
        self.producer.init_transactions(timeout)
        self.last_committed = last_committed_batch(bootstrap, commits_topic, app)

    def commit(self, batch_id: int, records: Iterable[OutRecord]) -> int | None:
        """Write ``records`` + marker atomically; None if ``batch_id`` was already committed."""
        if batch_id <= self.last_committed:
            return None
        n = 0
        self.producer.begin_transaction()
        try:
            for r in records:
                self._produce(r.topic, r.key, r.value, list(r.headers))
                n += 1
            marker = {"batch_id": batch_id, "records": n, "committed_at_ms": int(time.time() * 1000)}
            self._produce(self.commits_topic, self.app.encode(), json.dumps(marker).encode(), [])
            self.producer.commit_transaction(self.timeout)
        except BaseException:
            try:
                self.producer.abort_transaction(self.timeout)
            except KafkaException:
                pass
            raise
        self.last_committed = batch_id
        return n

    def _produce(self, topic: str, key: bytes | None, value: bytes | None, headers: list[Header]) -> None:
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, headers=headers or None)
                return
            except BufferError:
                self.producer.poll(0.05)

    def close(self) -> None:
        self.producer.flush(self.timeout)
