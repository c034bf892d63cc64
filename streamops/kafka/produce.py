"""Produce keyed records fast (batched, idempotent), optionally at a steady rate.

Partitioning is deterministic: keyed records go where Kafka's default partitioner puts them,
``toPositive(murmur2(key)) % partitions`` (``default_partition``; librdkafka's ``murmur2_random``
partitioner computes it), so a key lands in the same partition as from a Java producer or Kafka
Streams, and one key stays in one partition, which order-dependent jobs need. Records without a
key go round-robin by their position per topic. With idempotence on, each partition receives its
records in the order given, so the same input gives the same (key, value) sequence per partition.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, Producer

from streamops.kafka.admin import client_config
from streamops.kafka.config import KafkaConfig
from streamops.kafka.exceptions import ProduceError

#: producer settings tuned for throughput; ``config`` passed by the caller wins
PRODUCE_DEFAULTS: dict[str, Any] = {
    "enable.idempotence": True,  # implies acks=all and ordered, de-duplicated retries
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "batch.num.messages": 50_000,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 512 * 1024,
    "message.timeout.ms": 30_000,  # a broker that went away fails the run instead of hanging it
    "partitioner": "murmur2_random",  # Kafka's default partitioner for keyed records (Java-compatible)
    "delivery.report.only.error": True,
}


# -- Kafka's default partitioner ---------------------------------------------------------------
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c) as a signed 32-bit int, like Java's.

    librdkafka computes the same for the produce path; this copy lets the tooling say where a key
    lands without a broker (``app lint``'s sample, ``check``'s diagnosis)."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    end = length & ~3
    for i in range(0, end, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest:
        if rest == 3:
            h ^= data[end + 2] << 16
        if rest >= 2:
            h ^= data[end + 1] << 8
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a non-null key: ``toPositive(murmur2(key)) % n``."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class TokenBucket:
    """Admits ``rate`` tokens per second on average, with bursts of at most ``burst`` tokens.

    ``take()`` never blocks: it returns how many seconds the caller must wait before the token
    it just took may be used, which keeps the bucket pure and testable with a fake clock.
    """

    def __init__(self, rate: float, *, burst: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be > 0, got {rate!r}")
        self.rate = float(rate)
        self.burst = float(burst) if burst is not None else max(1.0, self.rate / 20)
        self._clock = clock
        self._tokens = self.burst
        self._at = clock()

    def take(self, n: float = 1.0) -> float:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate) - n
        self._at = now
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate


#: shortest pause when pacing: shorter waits add up in the bucket and are slept off together
#: (sleeping ~1 ms per record at 1000/s would spin the CPU: the client's poll() counts whole ms)
PACE_STEP_S = 0.005


def paced_wait(bucket: TokenBucket) -> float:
    """Take a token; how long to sleep now: 0 until the debt reaches ``PACE_STEP_S``, then all of it."""
    wait = bucket.take()
    return wait if wait >= PACE_STEP_S else 0.0


@dataclass(frozen=True)
class ProduceResult:
    topic: str  # the topic, or the topics joined by ", "
    records: int
    bytes: int
    seconds: float
    per_topic: Mapping[str, int] = field(default_factory=dict)  # records sent per topic

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def produce(
    kafka: KafkaConfig | str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    *,
    partitions: int,
    rate: float | None = None,
    progress: Callable[[int], None] | None = None,
    config: Mapping[str, Any] | None = None,
    flush_timeout: float = 60.0,
) -> ProduceResult:
    """Send ``(key, value)`` records to ``topic`` (with ``partitions`` partitions); see
    ``produce_to_topics``."""
    return produce_to_topics(kafka, ((topic, k, v) for k, v in records), partitions={topic: partitions},
                             rate=rate, progress=progress, config=config, flush_timeout=flush_timeout)


def produce_to_topics(kafka: KafkaConfig | str, records: Iterable[tuple[str, bytes | None, bytes | None]], *,
                      partitions: Mapping[str, int], rate: float | None = None,
                      progress: Callable[[int], None] | None = None, config: Mapping[str, Any] | None = None,
                      flush_timeout: float = 60.0) -> ProduceResult:
    """Send ``(topic, key, value)`` records (``partitions``: each topic's partition count; a
    record for another topic is a ``ValueError``) and wait until every one is acknowledged.
    ``rate`` (records/s) paces sending smoothly; ``progress(sent)`` is called at most 10 times per
    second and once at the end. Raises ``ProduceError`` if any record is not delivered."""
    failures: list[str] = []
    fatal: list[str] = []
    producer = _producer(kafka, config, failures, fatal)
    send = producer.produce
    poll = producer.poll
    bucket = TokenBucket(rate) if rate else None
    clock = time.monotonic
    t0 = clock()
    next_tick = t0 + 0.1
    sent = nbytes = 0
    keyless = dict.fromkeys(partitions, 0)
    per_topic = dict.fromkeys(partitions, 0)
    names = ", ".join(partitions)
    only = names if len(partitions) == 1 else None  # one topic: its count is ``sent`` (a hot loop)
    try:
        for topic, key, value in records:
            if only is None:
                try:
                    per_topic[topic] += 1
                except KeyError:
                    raise ValueError(f"a record for topic {topic!r}, which is not one of {names}") from None
            elif topic != only:
                raise ValueError(f"a record for topic {topic!r}, which is not {only}")
            if bucket is not None:
                _pace(bucket, poll)
            part = -1  # a keyed record: the partitioner decides (murmur2_random, Kafka's default)
            if key is None:  # round robin
                part = keyless[topic] % partitions[topic]
                keyless[topic] += 1
            try:
                send(topic, value, key, part)
            except BufferError:  # local queue full: let deliveries drain it, then send
                _send_when_queued(producer, (topic, value, key, part), failures, fatal, names, sent)
            sent += 1
            nbytes += 0 if value is None else len(value)
            if sent & 1023 == 0 or bucket is not None:
                if sent & 1023 == 0:
                    poll(0)
                    _check(failures, fatal, names, sent)
                if progress is not None and clock() >= next_tick:
                    progress(sent)
                    next_tick = clock() + 0.1
        _flush(producer, flush_timeout, failures, fatal, names, sent)
    except BaseException:
        producer.purge()  # drop what is still queued: do not deliver after a failure
        producer.poll(0)
        raise
    _check(failures, fatal, names, sent)
    elapsed = clock() - t0
    if progress is not None:
        progress(sent)
    return ProduceResult(names, sent, nbytes, elapsed, per_topic if only is None else {only: sent})


def _producer(kafka: KafkaConfig | str, config: Mapping[str, Any] | None, failures: list[str], fatal: list[str]) -> Producer:
    """A producer whose delivery failures and fatal errors land in ``failures`` and ``fatal``."""

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    def on_error(err: KafkaError) -> None:
        if err.fatal():
            fatal.append(err.str())

    return Producer(client_config(kafka, {
        **PRODUCE_DEFAULTS, **(config or {}), "on_delivery": on_delivery, "error_cb": on_error}))


def _send_when_queued(producer: Producer, record: tuple[str, bytes | None, bytes | None, int], failures: list[str],
                      fatal: list[str], names: str, sent: int) -> None:
    """Send ``(topic, value, key, partition)`` once the local queue has room, serving deliveries."""
    while True:
        producer.poll(0.05)
        _check(failures, fatal, names, sent)
        try:
            producer.produce(*record)
            return
        except BufferError:
            continue


def _pace(bucket: TokenBucket, poll: Callable[[float], Any]) -> None:
    """Wait for the next token, serving the producer's callbacks meanwhile."""
    if (wait := paced_wait(bucket)) > 0:
        until = time.monotonic() + wait
        while (left := until - time.monotonic()) > 0:
            poll(max(left, 0.001))


def _flush(producer: Producer, flush_timeout: float, failures: list[str], fatal: list[str], names: str,
           sent: int) -> None:
    """Wait until every record sent is acknowledged (``ProduceError`` past ``flush_timeout``)."""
    deadline = time.monotonic() + flush_timeout
    while (pending := producer.flush(min(1.0, max(0.0, deadline - time.monotonic())))) > 0:
        _check(failures, fatal, names, sent)
        if time.monotonic() >= deadline:
            raise ProduceError(f"{pending} of {sent} records to {names} were not acknowledged within "
                               f"{flush_timeout:g}s after the last send")


def _check(failures: list[str], fatal: list[str], topic: str, sent: int) -> None:
    if fatal:
        raise ProduceError(f"producer to {topic} failed fatally: {fatal[0]}")
    if failures:
        raise ProduceError(f"{len(failures)} record(s) to {topic} could not be delivered "
                           f"(of {sent} sent so far): {failures[0]}")
