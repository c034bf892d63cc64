"""The embedded broker behaves like Kafka for what streamops relies on."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def _topic(bootstrap: str, partitions: int = 3) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the futures
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(timeout=10)
    return name


def _consume(bootstrap: str, topic: str, group: str, expect: int, timeout: float = 30.0) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    deadline = time.time() + timeout
    try:
        while len(out) < expect and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m)
        # drain briefly: nothing beyond `expect` may arrive
        end = time.time() + 1.0
        while time.time() < end:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append(m)
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
    finally:
        c.close()
    return out, {tp.partition: tp.offset for tp in committed}


def test_keyed_produce_consume_group_and_committed_offsets(kafka: str) -> None:
    topic = _topic(kafka)
    p = Producer({"bootstrap.servers": kafka, "enable.idempotence": True})
    sent = [(f"user-{i % 7}", f"event-{i}") for i in range(210)]
    for k, v in sent:
        p.produce(topic, key=k, value=v)
    assert p.flush(10) == 0

    msgs, committed = _consume(kafka, topic, "g1", expect=len(sent))
    assert sorted(m.value().decode() for m in msgs) == sorted(v for _, v in sent)
    partitions_of_key = defaultdict(set)
    for m in msgs:
        partitions_of_key[m.key().decode()].add(m.partition())
    assert all(len(ps) == 1 for ps in partitions_of_key.values()), "a key was split across partitions"
    per_key_order = defaultdict(list)
    for m in sorted(msgs, key=lambda m: (m.partition(), m.offset())):
        per_key_order[m.key().decode()].append(int(m.value().decode().split("-")[1]))
    assert all(seq == sorted(seq) for seq in per_key_order.values()), "per-key order lost"

    lows_highs = {}
    c = Consumer({"bootstrap.servers": kafka, "group.id": "probe"})
    for part in range(3):
        lows_highs[part] = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
    c.close()
    assert committed == {part: hi for part, (_, hi) in lows_highs.items()}
    assert sum(hi - lo for lo, hi in lows_highs.values()) == len(sent)

    # the same group resumes from its committed offsets: only new records arrive
    p.produce(topic, key="user-1", value="event-late")
    p.flush(10)
    again, _ = _consume(kafka, topic, "g1", expect=1)
    assert [m.value() for m in again] == [b"event-late"]


def test_a_broker_killed_with_sigkill_loses_no_acknowledged_write(platform_factory) -> None:
    """Every record the broker acknowledged, plain and in committed transactions, is there after a
    SIGKILL right after the acknowledgement and a start again (the stand-in the platform ran on before
    lost up to its last few seconds of writes). Kafka writes to the page cache and does not fsync each
    write: a process crash loses nothing, a power loss is what replication is for."""
    from streamops.kafka.read import read_topic
    from streamops.platform import manager

    s = platform_factory("broker-sigkill")
    manager.up(s, only=["kafka"])
    b = s.kafka_bootstrap
    topic = _topic(b, partitions=3)
    plain = Producer({"bootstrap.servers": b, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in range(20_000):
        plain.produce(topic, key=f"k{i % 97}".encode(), value=str(i).encode())
    assert plain.flush(60) == 0
    txn = Producer({"bootstrap.servers": b, "transactional.id": "sigkill-probe"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(20_000, 25_000):
        txn.produce(topic, key=f"k{i % 97}".encode(), value=str(i).encode())
    txn.commit_transaction(60)
    assert manager.crash(s, "kafka")  # at once: no time for any flush
    manager.up(s, only=["kafka"])
    got = sorted(int(m.value()) for m in read_topic(b, topic, past_open_transactions=True))
    assert got == list(range(25_000))
