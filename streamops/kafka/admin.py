"""Topic administration over the Kafka protocol: create-if-missing, partitions, watermarks.

Everything here works against any Kafka-protocol broker (Apache Kafka in production, the embedded
broker in development); nothing assumes a particular implementation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from pydantic import BaseModel, ConfigDict, Field, field_validator

from streamops.kafka import replication, security
from streamops.kafka.config import KafkaConfig, as_config
from streamops.kafka.exceptions import BrokerAuthError, BrokerUnavailableError, TopicError, TopicNotFoundError

#: seconds to wait for the cluster before calling it unreachable
DEFAULT_TIMEOUT = 8.0

#: errors of a connection that failed at once (refused, reset): worth another try before the timeout
RETRIABLE_CONNECT = (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
CONNECT_RETRY_S = 0.25

#: librdkafka's own log lines (e.g. one per failed connect attempt, every 50-100 ms) go here
#: instead of raw to stderr; silent unless the application configures logging
CLIENT_LOG = logging.getLogger("streamops.kafka.client")
CLIENT_LOG.addHandler(logging.NullHandler())
CLIENT_LOG.addHandler(security.REFUSALS)  # remembers a broker's refusal (SASL, TLS) to name it in errors


log = logging.getLogger(__name__)


class TopicSpec(BaseModel):
    """A topic as it should exist. ``replication_factor=-1``: the platform's replication
    (``kafka.replication``: from the settings or the cluster's size, with its ``min.insync.replicas``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    partitions: int = Field(6, ge=1)
    replication_factor: int = Field(-1, ge=-1)
    config: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _not_dots(cls, v: str) -> str:
        if v in (".", ".."):
            raise ValueError("topic name cannot be '.' or '..'")
        return v

    @field_validator("replication_factor")
    @classmethod
    def _not_zero(cls, v: int) -> int:
        if v == 0:
            raise ValueError("replication_factor must be >= 1, or -1 for the platform's replication")
        return v


class EnsuredTopic(NamedTuple):
    name: str
    created: bool
    partitions: int


def client_config(kafka: KafkaConfig | str, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Base client config: ``kafka``'s address and client security; explicit ``config`` entries win."""
    kafka = as_config(kafka)
    return {"bootstrap.servers": kafka.bootstrap, "logger": CLIENT_LOG, **kafka.librdkafka(), **(config or {})}


def _retrying(call: Callable[[float], Any], codes: tuple[int, ...], timeout: float, *,
              stop: Callable[[], bool] = lambda: False) -> Any:
    """``call(seconds_left)``, asked again after an error in ``codes`` until ``timeout`` has passed
    (or ``stop()`` says the error is final); the last ``KafkaException`` is raised."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call(max(deadline - time.monotonic(), 0.1))
        except KafkaException as exc:
            if exc.args[0].code() not in codes or stop() or time.monotonic() + CONNECT_RETRY_S >= deadline:
                raise
            time.sleep(CONNECT_RETRY_S)


def cluster_metadata(client: Any, kafka: KafkaConfig | str, timeout: float):
    """Cluster metadata (all topics, so no topic is auto-created by asking).

    A connection that fails at once (a broker restarting: librdkafka's ``_TRANSPORT``) is tried
    again until ``timeout`` has passed, so the error's "within N s" is true. ``kafka``: what the
    client was made with (to say where to correct a refusal)."""
    kafka = as_config(kafka)
    since = time.monotonic()
    try:
        return _retrying(lambda left: client.list_topics(timeout=left), RETRIABLE_CONNECT, timeout,
                         stop=lambda: bool(security.refusal(client, since)))
    except KafkaException as exc:
        if refused := security.refusal(client, since):  # the broker answered, but refused this client
            raise BrokerAuthError(kafka.refusal_message(refused)) from None
        remedy = ("check that the cluster runs and that STREAMOPS_BOOTSTRAP_SERVERS (or `platform up --external "
                  "kafka=...`) names its brokers, or go back to the embedded broker with `platform up --external "
                  "kafka=embedded`" if kafka.external else
                  "start one with 'streamops platform up --only kafka', or point streamops at yours with "
                  "STREAMOPS_BOOTSTRAP_SERVERS=HOST:PORT")
        raise BrokerUnavailableError(
            f"no Kafka broker answered at {kafka.bootstrap} within {timeout:g}s ({exc.args[0].str()}); {remedy}"
            + kafka.plaintext_hint()
        ) from None


#: a partition's leader not known yet (a topic just created, a broker just restarted: the client's
#: leader epoch can be ahead of the broker's for a moment, "Leader epoch is newer than broker epoch")
RETRIABLE_LEADER = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_LEADER_EPOCH,
                    KafkaError.FENCED_LEADER_EPOCH, *RETRIABLE_CONNECT)


def watermark_offsets(consumer: Any, tp: TopicPartition, timeout: float) -> tuple[int, int]:
    """(low, high) of a partition; asked again while its leader is not known yet, up to ``timeout``
    (a reprocess's topics are read right after they are created)."""
    return _retrying(lambda left: consumer.get_watermark_offsets(tp, timeout=left), RETRIABLE_LEADER, timeout)


def topic_partitions(metadata: Any, topic: str, bootstrap: str) -> list[int]:
    meta = metadata.topics.get(topic)
    if meta is None or (meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise TopicNotFoundError(f"topic {topic!r} does not exist at {bootstrap}")
    if meta.error is not None:
        raise TopicError(f"topic {topic!r}: {meta.error.str()}")
    return sorted(meta.partitions)


def ensure_topics(
    kafka: KafkaConfig | str,
    specs: Iterable[TopicSpec | Mapping[str, Any]],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    config: Mapping[str, Any] | None = None,
) -> dict[str, EnsuredTopic]:
    """Create the topics that are missing; existing topics are left exactly as they are.

    Returns, per topic name, whether this call created it and its partition count (for an
    existing topic: the actual count, which may differ from the spec; nothing is altered).
    """
    by_name: dict[str, TopicSpec] = {}
    for item in specs:
        spec = item if isinstance(item, TopicSpec) else TopicSpec.model_validate(item)
        if by_name.setdefault(spec.name, spec) != spec:
            raise ValueError(f"conflicting specs for topic {spec.name!r}: {by_name[spec.name]} vs {spec}")
    wanted = list(by_name.values())
    kafka = as_config(kafka)
    admin = AdminClient(client_config(kafka, config))  # must outlive the futures below
    metadata = cluster_metadata(admin, kafka, timeout)
    existing = metadata.topics
    missing = [s for s in wanted if s.name not in existing]
    by_default = [s.name for s in wanted if s.replication_factor == -1]
    created: set[str] = set()
    if by_default:  # the platform's replication: an error before anything is created, drift said aloud
        want = _platform_replication(kafka, metadata)
        for found in replication.drift(metadata, by_default, want):
            log.warning(found.note())
    if missing:
        futures = admin.create_topics(
            [NewTopic(s.name, s.partitions, want.factor, config={**want.topic_config(), **s.config})
             if s.replication_factor == -1 else NewTopic(s.name, s.partitions, s.replication_factor, config=dict(s.config))
             for s in missing],
            request_timeout=timeout,
            operation_timeout=timeout,
        )
        for name, fut in futures.items():
            try:
                fut.result(timeout=timeout + 2)
                created.add(name)
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:  # lost a race: someone else made it
                    raise TopicError(f"could not create topic {name!r}: {err.str()}") from None
    # created topics may take a moment to appear in metadata with all their partitions
    out: dict[str, EnsuredTopic] = {}
    deadline = time.monotonic() + timeout
    for spec in wanted:
        while True:
            meta = cluster_metadata(admin, kafka, timeout).topics.get(spec.name)
            n = len(meta.partitions) if meta is not None and meta.error is None else 0
            if n >= (spec.partitions if spec.name in created else 1) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if n == 0:
            raise TopicError(f"topic {spec.name!r} did not appear in the cluster metadata within {timeout:g}s")
        out[spec.name] = EnsuredTopic(spec.name, spec.name in created, n)
    return out


def replication_drift(kafka: KafkaConfig | str, topics: list[str], *,
                      timeout: float = DEFAULT_TIMEOUT) -> list[replication.ReplicationDrift]:
    """The ``topics`` that exist with another replication factor than the platform gives new ones."""
    kafka = as_config(kafka)
    metadata = cluster_metadata(AdminClient(client_config(kafka)), kafka, timeout)
    return replication.drift(metadata, topics, _platform_replication(kafka, metadata))


def _platform_replication(kafka: KafkaConfig, metadata: Any) -> replication.Replication:
    return replication.wanted(kafka.replication, kafka.min_insync, replication.cluster_size(metadata), kafka.bootstrap)


def partitions(kafka: KafkaConfig | str, topic: str, *, timeout: float = DEFAULT_TIMEOUT) -> list[int]:
    """The topic's partition ids, sorted. Raises ``TopicNotFoundError`` if it does not exist."""
    kafka = as_config(kafka)
    admin = AdminClient(client_config(kafka))
    return topic_partitions(cluster_metadata(admin, kafka, timeout), topic, kafka.bootstrap)


def end_offsets(kafka: KafkaConfig | str, topic: str, *, timeout: float = DEFAULT_TIMEOUT) -> dict[int, tuple[int, int]]:
    """``{partition: (low watermark, high watermark)}``; high is the next offset to be written."""
    kafka = as_config(kafka)
    admin = AdminClient(client_config(kafka))  # must outlive the futures below
    parts = topic_partitions(cluster_metadata(admin, kafka, timeout), topic, kafka.bootstrap)
    if not parts:
        return {}
    try:
        low, high = (_list_offsets(admin, topic, parts, spec, timeout)
                     for spec in (OffsetSpec.earliest(), OffsetSpec.latest()))
    except _OffsetsError as exc:
        raise TopicError(f"could not list offsets of {topic}[{exc.partition}]: {exc.error.str()}") from None
    return {p: (low[p], high[p]) for p in parts}


class _OffsetsError(Exception):
    def __init__(self, partition: int, error: KafkaError) -> None:
        super().__init__(partition, error)
        self.partition, self.error = partition, error


def _list_offsets(admin: Any, topic: str, parts: list[int], spec: Any, timeout: float) -> dict[int, int]:
    """ListOffsets for ``parts`` of ``topic``, asked again while a leader is not known yet (a broker
    just restarted) until ``timeout``; ``_OffsetsError`` names the partition that failed."""
    failed: list[int] = []

    def call(left: float) -> dict[int, int]:
        futures = admin.list_offsets({TopicPartition(topic, p): spec for p in parts}, request_timeout=left)
        out = {}
        for tp, fut in futures.items():
            try:
                out[tp.partition] = fut.result(timeout=left + 2).offset
            except KafkaException:
                failed[:] = [tp.partition]
                raise
        return out

    try:
        return _retrying(call, RETRIABLE_LEADER, timeout)
    except KafkaException as exc:
        raise _OffsetsError(failed[0] if failed else -1, exc.args[0]) from None


def offsets_for_times(kafka: KafkaConfig | str, topic: str, timestamp_ms: int, *,
                      timeout: float = DEFAULT_TIMEOUT) -> dict[int, int | None]:
    """First offset whose record timestamp is >= ``timestamp_ms``, per partition (None: no such record)."""
    kafka = as_config(kafka)
    admin = AdminClient(client_config(kafka))
    parts = topic_partitions(cluster_metadata(admin, kafka, timeout), topic, kafka.bootstrap)
    if not parts:
        return {}
    try:
        found = _list_offsets(admin, topic, parts, OffsetSpec.for_timestamp(timestamp_ms), timeout)
    except _OffsetsError as exc:
        raise TopicError(f"could not look up offsets of {topic}[{exc.partition}] for time {timestamp_ms}: "
                         f"{exc.error.str()}") from None
    return {p: (o if o >= 0 else None) for p, o in found.items()}


def recreate_topic(kafka: KafkaConfig | str, spec: TopicSpec, *, timeout: float = DEFAULT_TIMEOUT,
                   deleted: Callable[[], None] = lambda: None) -> None:
    """Delete ``spec.name`` (if it exists) and create it empty as ``spec`` says.

    How a compacted topic is emptied: brokers refuse DeleteRecords on ``cleanup.policy=compact``.
    ``deleted`` runs between the two (a failpoint: a process killed there leaves no topic)."""
    kafka = as_config(kafka)
    admin = AdminClient(client_config(kafka))
    if spec.name in cluster_metadata(admin, kafka, timeout).topics:
        for name, fut in admin.delete_topics([spec.name], operation_timeout=timeout).items():
            try:
                fut.result(timeout=timeout + 2)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise TopicError(f"could not delete topic {name!r}: {exc.args[0].str()}") from None
        deadline = time.monotonic() + timeout
        while spec.name in cluster_metadata(admin, kafka, timeout).topics:
            if time.monotonic() > deadline:
                raise TopicError(f"topic {spec.name!r} still listed {timeout:g}s after its deletion")
            time.sleep(0.1)
        deleted()
    deadline = time.monotonic() + timeout
    while True:  # a broker may briefly refuse the name while the deletion settles
        try:
            ensure_topics(kafka, [spec], timeout=timeout)
            return
        except TopicError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
