"""Bounded reads: every partition from its low watermark up to an end offset fixed at the start.

No consumer group is joined (partitions are assigned), nothing is committed, and the consumer is
closed as soon as every partition reached its end, so it never idles at the end of a topic (some
brokers answer empty fetches at once, which turns an idle consumer into a busy loop).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from streamops.kafka.admin import (
    DEFAULT_TIMEOUT,
    client_config,
    cluster_metadata,
    end_offsets,
    topic_partitions,
    watermark_offsets,
)
from streamops.kafka.config import KafkaConfig, as_config
from streamops.kafka.exceptions import ConsumeError, OpenTransactionError, TopicError

#: consumer settings for bounded reads; ``config`` passed by the caller wins
READ_DEFAULTS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",  # records deleted under us: continue from the new start
    "isolation.level": "read_committed",
}


def read_topic(
    kafka: KafkaConfig | str,
    topic: str,
    *,
    end: Mapping[int, int] | None = None,
    config: Mapping[str, Any] | None = None,
    batch_size: int = 10_000,
    stall_timeout: float = 30.0,
    past_open_transactions: bool = False,
    last: int | None = None,
    from_offsets: Mapping[int, int] | None = None,
) -> Iterator[Message]:
    """Yield every record of ``topic`` from each partition's low watermark to its end offset
    (``last``: only each partition's newest ``last`` offsets; ``from_offsets``: partition -> the first
    offset to read, for a reader that goes on where it stopped).

    ``end`` maps partition -> exclusive end offset; partitions it leaves out end at their high
    watermark, read once at the start (so records written meanwhile are not read), and ends
    beyond the high watermark are clamped to it. Records come in offset order per partition;
    partitions interleave. A partition also ends when the consumer reports its end (under
    ``read_committed`` that is the last stable offset, so an open transaction does not block).
    Raises ``ConsumeError`` if no partition makes progress for ``stall_timeout`` seconds.

    ``past_open_transactions``: under ``read_committed``, end at the high watermark instead, and
    wait for a transaction open below it (a batch being written) to end: the committed records
    after it belong to the read. A transaction that stays open for ``stall_timeout`` seconds (a
    hanging one: its producer's broker-side state was lost) raises ``OpenTransactionError``, where
    the last stable offset would have given a read silently short of records committed after it.
    """
    kafka = as_config(kafka)
    conf = client_config(kafka, {"group.id": f"streamops-read-{uuid.uuid4().hex}", **READ_DEFAULTS,
                                     **(config or {})})
    consumer = Consumer(conf)
    try:
        parts = topic_partitions(cluster_metadata(consumer, kafka, DEFAULT_TIMEOUT), topic, kafka.bootstrap)
        remaining: dict[int, int] = {}
        start: list[TopicPartition] = []
        # the consumer's own watermarks end at the last stable offset under read_committed
        past = past_open_transactions and conf.get("isolation.level") == "read_committed"
        highs = _high_watermarks(kafka, topic) if past else {}
        for p in parts:
            try:
                low, high = watermark_offsets(consumer, TopicPartition(topic, p), DEFAULT_TIMEOUT)
            except KafkaException as exc:  # timeout / transport
                raise ConsumeError(f"could not read the watermarks of {topic}[{p}]: {exc}") from None
            high = max(high, highs.get(p, high))
            stop = high if end is None or p not in end else min(int(end[p]), high)
            if from_offsets is not None and p in from_offsets:
                low = max(low, int(from_offsets[p]))
            if last is not None:
                low = max(low, stop - last)
            if stop > low:
                remaining[p] = stop
                start.append(TopicPartition(topic, p, low))
        if not remaining:
            return
        consumer.assign(start)
        yield from _drain(consumer, topic, remaining, batch_size, stall_timeout, past)
    finally:
        consumer.close()


def _high_watermarks(kafka: KafkaConfig, topic: str) -> dict[int, int]:
    """``topic``'s high watermarks (what read_uncommitted readers see)."""
    try:
        return {p: hi for p, (_lo, hi) in end_offsets(kafka, topic).items()}
    except TopicError as exc:
        raise ConsumeError(f"could not read the watermarks of {topic}: {exc}") from None


def _drain(consumer: Consumer, topic: str, remaining: dict[int, int], batch_size: int,
           stall_timeout: float, past_open_transactions: bool = False) -> Iterator[Message]:
    last_progress = time.monotonic()
    last_error: KafkaError | None = None
    while remaining:
        msgs = consumer.consume(batch_size, timeout=0.5)
        finished: list[int] = []
        progressed = False
        for m in msgs:
            err = m.error()
            p = m.partition()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    # past open transactions, the end the consumer sees may be one: positions decide
                    if not past_open_transactions and remaining.pop(p, None) is not None:
                        finished.append(p)
                    continue
                if err.fatal():
                    raise ConsumeError(f"reading {topic} failed: {err.str()}")
                last_error = err  # transient (transport, leader change): the client retries
                continue
            progressed = True
            stop = remaining.get(p)
            if stop is None:
                continue
            offset = m.offset()
            if offset < stop:
                yield m
            if offset + 1 >= stop:
                del remaining[p]
                finished.append(p)
        now = time.monotonic()
        if progressed:
            last_progress = now
        if remaining and not (progressed and len(msgs) >= batch_size):
            # control records (transaction markers) and aborted records move the position without
            # yielding a record
            for tp in consumer.position([TopicPartition(topic, p) for p in remaining]):
                if tp.offset >= 0 and tp.offset >= remaining[tp.partition]:
                    del remaining[tp.partition]
                    finished.append(tp.partition)
                    last_progress = now
            if remaining and now - last_progress > stall_timeout:
                raise _stalled(consumer, topic, remaining, stall_timeout, last_error, past_open_transactions)
        if finished and remaining:
            consumer.pause([TopicPartition(topic, p) for p in finished])


def _stalled(consumer: Consumer, topic: str, remaining: dict[int, int], stall_timeout: float,
             last_error: KafkaError | None, past_open_transactions: bool) -> ConsumeError:
    """The error of a read that made no progress: where each partition stands, and why it may be."""
    at = {tp.partition: tp.offset for tp in consumer.position([TopicPartition(topic, p) for p in remaining])}
    where = ", ".join(f"{p}: at {at.get(p, -1)} of {o}" for p, o in sorted(remaining.items()))
    why = f"; last error: {last_error.str()}" if last_error is not None else ""
    if past_open_transactions:
        return OpenTransactionError(
            f"{topic}: a transaction has stayed open for {stall_timeout:g}s below the end of the "
            f"read (partition: position of end offset, {where}){why}. Until it ends, read_committed "
            f"readers see none of the records committed after it. A producer that died in it is "
            f"aborted when its transactional id is used again (start the app: its driver does "
            f"it) or at its transaction timeout; a hanging one (KIP-664) is aborted with "
            f"`streamops platform kafka-tool transactions --bootstrap-server ... find-hanging` "
            f"then `abort`")
    return ConsumeError(
        f"reading {topic} made no progress for {stall_timeout:g}s (partitions still to "
        f"reach their end offsets: {where}){why}"
    )


def latest_per_key(
    kafka: KafkaConfig | str,
    topic: str,
    decode: Callable[[bytes], Any] = json.loads,
    *,
    end: Mapping[int, int] | None = None,
    config: Mapping[str, Any] | None = None,
    raw_keys: bool = False,
    past_open_transactions: bool = False,
    stall_timeout: float = 30.0,
) -> dict[Any, Any]:
    """The last value of every key (a compacted topic's view); a tombstone deletes its key.

    Keys are decoded as UTF-8 (undecodable bytes are backslash-escaped), or kept as bytes with
    ``raw_keys`` (what is written back must have exactly the keys it had); records without a key
    are skipped; ``decode`` runs once per surviving key, on the latest value only.
    ``past_open_transactions``, ``stall_timeout``: as in ``read_topic``.
    """
    latest: dict[Any, bytes] = {}
    for m in read_topic(kafka, topic, end=end, config=config, past_open_transactions=past_open_transactions,
                        stall_timeout=stall_timeout):
        key = m.key()
        if key is None:
            continue
        k = key if raw_keys else key.decode("utf-8", "backslashreplace")
        value = m.value()
        if value is None:
            latest.pop(k, None)
        else:
            latest[k] = value
    return {k: decode(v) for k, v in latest.items()}
