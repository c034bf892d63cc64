"""``streamops_kafka``: a PySpark 4 Python data source reading Kafka through confluent-kafka.

A stand-in for Spark's own ``kafka`` format where ``spark-sql-kafka-0-10`` can't be installed:
same option names, same output schema, same offset JSON, same failOnDataLoss rules (see
``streamops.spark.offsets``). Use it through ``streamops.spark.kafka_io.read_kafka``.

Reading: every Spark input partition is one offset range of one Kafka partition, read by a
consumer that is *assigned* exactly that range (no consumer group is joined, nothing is
committed) and closed as soon as the end offset is reached, so no consumer idles at the end of a
topic. Some brokers ignore fetch size limits and answer one fetch with everything up to the high
watermark, so ``receive.message.max.bytes`` defaults to 1e9. Rows are yielded as Arrow record
batches of up to 10k rows.

Streaming: offsets are ``{"topic": {"partition": next_offset}}``; ``latestOffset(start, limit)``
reads the watermarks of every partition of the subscribed topics and applies Spark 4.2's
admission control (``ReadMaxRows`` from ``maxOffsetsPerTrigger`` via ``getDefaultReadLimit``,
``ReadAllAvailable`` when the engine asks for it); ``Trigger.AvailableNow`` is supported.

Differences from Spark's source: only ``subscribe`` (no ``assign`` / ``subscribePattern``), no
``minOffsetsPerTrigger`` / ``maxTriggerDelay`` / ``minPartitions`` / ``endingTimestamp`` /
``*ByTimestamp`` JSON options (rejected with a message, not ignored); ``kafka.*`` options are
librdkafka properties (the common Java ones are translated, see :func:`client_config`); a query
that is restarted before its first batch is committed resolves ``startingOffsets`` again (Spark
keeps the initial offsets in the checkpoint; a Python source can't see the checkpoint).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streamops.exceptions import ConfigError, StreamopsError
from streamops.spark.offsets import (
    TP,
    DataLossError,
    OffsetRange,
    OffsetSpecError,
    cap_to_target,
    format_offsets,
    offsets_from_dict,
    offsets_to_dict,
    parse_ending_offsets,
    parse_json_offsets,
    parse_no_match_strategy,
    parse_starting_offsets,
    parse_timestamp,
    parse_topics,
    plan_batch,
    plan_bounded_read,
    resolve_offsets,
    resolve_timestamp_offsets,
    tp_name,
)

log = logging.getLogger(__name__)

NAME = "streamops_kafka"
#: rows per yielded Arrow record batch
ARROW_BATCH_ROWS = 10_000
#: librdkafka's default (100 MB) is too small for brokers that ignore fetch limits
RECEIVE_MESSAGE_MAX_BYTES = 1_000_000_000
#: seconds for one metadata / watermark / offsets_for_times request
REQUEST_TIMEOUT_S = 30.0

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
_BASE_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]


def kafka_schema(include_headers: bool = True) -> StructType:
    """Spark's Kafka source schema (``headers`` only with includeHeaders, as in Spark)."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class KafkaSourceError(StreamopsError):
    """Reading from Kafka failed (broker unreachable, request timed out, authorization, ...).

    Operator action: check ``kafka.bootstrap.servers`` and the security options, and that the
    broker is up; the message carries the client's error.
    """


# -- options -----------------------------------------------------------------------------------

#: Spark options this source does not implement: refused, not silently ignored
_UNSUPPORTED = {
    "assign": "use 'subscribe' with comma-separated topics",
    "subscribepattern": "use 'subscribe' with comma-separated topics",
    "startingoffsetsbytimestamp": "use 'startingTimestamp' (one timestamp for all partitions)",
    "endingtimestamp": "use 'endingOffsets'",
    "endingoffsetsbytimestamp": "use 'endingOffsets'",
    "minoffsetspertrigger": "only maxOffsetsPerTrigger is implemented",
    "maxtriggerdelay": "only maxOffsetsPerTrigger is implemented",
    "minpartitions": "one Spark partition per Kafka partition range",
    "maxrecordsperpartition": "one Spark partition per Kafka partition range",
}

#: client properties the source owns (Spark refuses the first four too)
_REFUSED_CLIENT = {
    "auto.offset.reset": "set the source option startingOffsets to 'earliest' or 'latest' instead; "
    "offsets are tracked in the Spark checkpoint, not by the consumer",
    "enable.auto.commit": "the source commits nothing to consumer groups",
    "key.deserializer": "keys are returned as bytes; deserialize them with DataFrame operations",
    "value.deserializer": "values are returned as bytes; deserialize them with DataFrame operations",
    "interceptor.classes": "interceptors could change records",
    "enable.partition.eof": "the source uses partition EOF events to find the end of a range",
    "enable.auto.offset.store": "the source stores no offsets",
}

_JAAS_PAIR = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """``kafka.*`` options with the prefix stripped, as librdkafka properties.

    Java-client spellings that librdkafka lacks are translated so the same options work with
    Spark's own connector: ``sasl.jaas.config`` (PLAIN / SCRAM username + password) ->
    ``sasl.username`` / ``sasl.password``; a PEM ``ssl.truststore.location`` -> ``ssl.ca.location``;
    ``ssl.truststore.certificates`` -> ``ssl.ca.pem``; ``ssl.endpoint.identification.algorithm=""``
    -> ``none``. JKS stores can't be read by librdkafka and are refused with a message.
    """
    conf = {k[len("kafka.") :]: str(v) for k, v in options.items() if k.lower().startswith("kafka.")}
    for key, why in _REFUSED_CLIENT.items():
        if key in conf:
            raise ConfigError(f"Kafka option 'kafka.{key}' is not supported: {why}")
    jaas = conf.pop("sasl.jaas.config", None)
    if jaas is not None:
        module = jaas.split()[0] if jaas.split() else ""
        if not module.endswith(("PlainLoginModule", "ScramLoginModule")):
            raise ConfigError(
                f"kafka.sasl.jaas.config with {module or 'no login module'} can't be used by librdkafka: "
                "for PLAIN/SCRAM set kafka.sasl.username and kafka.sasl.password, for OAUTHBEARER the "
                "librdkafka kafka.sasl.oauthbearer.* options"
            )
        pairs = dict(_JAAS_PAIR.findall(jaas))
        for java, native in (("username", "sasl.username"), ("password", "sasl.password")):
            if java in pairs:
                conf.setdefault(native, pairs[java].replace('\\"', '"'))
    store_type = conf.pop("ssl.truststore.type", "").upper()
    if "ssl.truststore.location" in conf:
        if store_type != "PEM":
            raise ConfigError(
                f"kafka.ssl.truststore.location is a {store_type or 'JKS'} store, which librdkafka can't "
                "read: convert it to PEM and set kafka.ssl.ca.location (or kafka.ssl.truststore.type=PEM)"
            )
        conf.setdefault("ssl.ca.location", conf.pop("ssl.truststore.location"))
        conf.pop("ssl.truststore.password", None)
    if "ssl.truststore.certificates" in conf:
        conf.setdefault("ssl.ca.pem", conf.pop("ssl.truststore.certificates"))
    if conf.get("ssl.keystore.type", "PKCS12").upper() == "JKS":
        raise ConfigError("kafka.ssl.keystore.type=JKS can't be read by librdkafka: use a PKCS12 keystore")
    conf.pop("ssl.keystore.type", None)
    if conf.get("ssl.endpoint.identification.algorithm", None) == "":
        conf["ssl.endpoint.identification.algorithm"] = "none"
    return conf


def _bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    low = str(raw).strip().lower()
    if low not in ("true", "false"):
        raise ConfigError(f"option {name} must be 'true' or 'false', got {raw!r}")
    return low == "true"


def _int_option(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = options.get(name.lower())
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"option {name} must be >= {minimum}, got {value}")
    return value


@dataclass(frozen=True)
class KafkaSourceConfig:
    """Validated source options (picklable: travels to the executors with the reader)."""

    topics: tuple[str, ...]
    client: dict[str, str] = field(hash=False)
    starting_offsets: str | None = None
    starting_timestamp: int | None = None
    timestamp_strategy: str = "error"
    ending_offsets: str | None = None
    #: streamops extension for bounded streaming runs (reprocess): never plan past these offsets
    stop_at_offsets: str | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    fetch_retries: int = 3
    retry_interval_ms: int = 1_000
    group_id_prefix: str = "streamops-kafka-source"
    arrow_batches: bool = True

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> KafkaSourceConfig:
        opts = {str(k).lower(): v for k, v in options.items()}
        for key, hint in _UNSUPPORTED.items():
            if key in opts:
                raise ConfigError(f"option {key!r} is not supported by {NAME}: {hint}")
        topics = parse_topics(opts.get("subscribe"))
        client = client_config(opts)
        if not client.get("bootstrap.servers"):
            raise ConfigError("option 'kafka.bootstrap.servers' must be specified for the Kafka source")
        if "group.id" in client:
            log.warning(
                "[%s] kafka.group.id is set: the source joins no group and commits nothing, the id is "
                "only sent to the broker; leave it unset unless ACLs require it",
                NAME,
            )
        cfg = cls(
            topics=topics,
            client=client,
            starting_offsets=opts.get("startingoffsets"),
            starting_timestamp=parse_timestamp(opts.get("startingtimestamp")),
            timestamp_strategy=parse_no_match_strategy(opts.get("startingoffsetsbytimestampstrategy")),
            ending_offsets=opts.get("endingoffsets"),
            stop_at_offsets=opts.get("stopatoffsets"),
            max_offsets_per_trigger=_int_option(opts, "maxOffsetsPerTrigger", None, 1),
            fail_on_data_loss=_bool_option(opts, "failOnDataLoss", True),
            include_headers=_bool_option(opts, "includeHeaders", False),
            poll_timeout_ms=_int_option(opts, "kafkaConsumer.pollTimeoutMs", 120_000, 1) or 120_000,
            fetch_retries=_int_option(opts, "fetchOffset.numRetries", 3, 1) or 3,
            retry_interval_ms=_int_option(opts, "fetchOffset.retryIntervalMs", 1_000, 0) or 0,
            group_id_prefix=str(opts.get("groupidprefix") or "streamops-kafka-source"),
            arrow_batches=_bool_option(opts, "arrowBatches", True),
        )
        # spec syntax errors surface at load(), not at the first batch
        parse_starting_offsets(cfg.starting_offsets, topics, streaming=True)
        if cfg.ending_offsets is not None:
            parse_ending_offsets(cfg.ending_offsets, topics)
        if cfg.stop_at_offsets is not None:
            cfg.stop_offsets()
        return cfg

    def stop_offsets(self) -> dict[TP, int] | None:
        """``stopAtOffsets``: JSON {topic: {partition: offset}}, each a real offset (no -1/-2)."""
        if self.stop_at_offsets is None:
            return None
        spec = parse_json_offsets("stopAtOffsets", self.stop_at_offsets, self.topics)
        negative = sorted(tp_name(tp) for tp, o in spec.items() if o < 0)
        if negative:
            raise OffsetSpecError(f"stopAtOffsets must give real offsets, not latest/earliest: {negative}")
        return spec

    def for_batch(self) -> KafkaSourceConfig:
        parse_starting_offsets(self.starting_offsets, self.topics, streaming=False)
        if self.max_offsets_per_trigger is not None:
            log.warning("[%s] maxOffsetsPerTrigger is ignored in batch queries", NAME)
        if self.stop_at_offsets is not None:
            raise OffsetSpecError("stopAtOffsets is for streaming queries; batch queries use endingOffsets")
        return self

    def for_stream(self) -> KafkaSourceConfig:
        if self.ending_offsets is not None:
            raise OffsetSpecError("endingOffsets is not valid in streaming queries")
        return self

    def consumer_config(self, role: str) -> dict[str, Any]:
        """librdkafka consumer properties: user's ``kafka.*`` plus what the source relies on."""
        conf: dict[str, Any] = {
            "group.id": f"{self.group_id_prefix}-{uuid.uuid4().hex[:12]}-{role}",
            "receive.message.max.bytes": RECEIVE_MESSAGE_MAX_BYTES,
        }
        conf.update(self.client)
        conf.update(
            {
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
            }
        )
        return conf


# -- talking to Kafka from the driver --------------------------------------------------------------

R = TypeVar("R")


class _OffsetClient:
    """Partitions, watermarks and offsets_for_times of the subscribed topics (driver side).

    One idle consumer that is never assigned a partition: it fetches nothing, so it does not spin.
    """

    def __init__(self, cfg: KafkaSourceConfig) -> None:
        self.cfg = cfg
        self._consumer: Consumer | None = None

    def _client(self) -> Consumer:
        if self._consumer is None:
            try:
                self._consumer = Consumer(self.cfg.consumer_config("driver"))
            except (KafkaException, ValueError) as exc:
                raise ConfigError(f"invalid kafka.* option for the Kafka client: {exc}") from None
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            consumer.close()

    def _retry(self, what: str, fn: Callable[[Consumer], R]) -> R:
        last: Exception | None = None
        for attempt in range(1, self.cfg.fetch_retries + 1):
            try:
                return fn(self._client())
            except KafkaException as exc:
                last = exc
                log.warning(
                    "[%s] %s failed (attempt %d/%d): %s", NAME, what, attempt, self.cfg.fetch_retries, exc
                )
                if attempt < self.cfg.fetch_retries:
                    time.sleep(self.cfg.retry_interval_ms / 1000)
        brokers = self.cfg.client.get("bootstrap.servers")
        raise KafkaSourceError(f"{what} failed {self.cfg.fetch_retries} times against {brokers}: {last}")

    def partitions(self) -> list[TP]:
        """Every partition of the subscribed topics that exist now (missing topics have none)."""

        def fetch(c: Consumer) -> list[TP]:
            out: list[TP] = []
            for topic in self.cfg.topics:
                meta = c.list_topics(topic, timeout=REQUEST_TIMEOUT_S).topics.get(topic)
                if meta is None:
                    continue
                if meta.error is not None:
                    if meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        continue
                    raise KafkaException(meta.error)
                out.extend((topic, p) for p in meta.partitions)
            return sorted(out)

        return self._retry("listing partitions of " + ",".join(self.cfg.topics), fetch)

    def watermarks(self, tps: list[TP]) -> tuple[dict[TP, int], dict[TP, int]]:
        """(earliest, latest) next offsets per partition, asked from the broker (never cached)."""

        def fetch(c: Consumer) -> tuple[dict[TP, int], dict[TP, int]]:
            lo: dict[TP, int] = {}
            hi: dict[TP, int] = {}
            for tp in tps:
                lo[tp], hi[tp] = c.get_watermark_offsets(
                    TopicPartition(tp[0], tp[1]), timeout=REQUEST_TIMEOUT_S, cached=False
                )
            return lo, hi

        return self._retry("reading watermark offsets", fetch)

    def offsets_for_times(self, tps: list[TP], timestamp: int) -> dict[TP, int]:
        """First offset with a timestamp >= ``timestamp`` per partition (-1: none)."""

        def fetch(c: Consumer) -> dict[TP, int]:
            if not tps:
                return {}
            found = c.offsets_for_times(
                [TopicPartition(t, p, timestamp) for t, p in tps], timeout=REQUEST_TIMEOUT_S
            )
            for r in found:
                if r.error is not None:
                    raise KafkaException(r.error)
            return {(r.topic, r.partition): r.offset for r in found}

        return self._retry(f"offsets_for_times({timestamp})", fetch)

    def starting_offsets(
        self, *, streaming: bool
    ) -> tuple[list[TP], dict[TP, int], dict[TP, int], dict[TP, int]]:
        """(partitions, earliest, latest, resolved start) for startingTimestamp / startingOffsets."""
        parts = self.partitions()
        lo, hi = self.watermarks(parts)
        cfg = self.cfg
        if cfg.starting_timestamp is not None:  # takes precedence over startingOffsets, as in Spark
            found = self.offsets_for_times(parts, cfg.starting_timestamp)
            start = resolve_timestamp_offsets(
                found,
                hi,
                timestamp=cfg.starting_timestamp,
                strategy=cfg.timestamp_strategy,  # type: ignore[arg-type]
            )
        else:
            spec = parse_starting_offsets(cfg.starting_offsets, cfg.topics, streaming=streaming)
            start = resolve_offsets(spec, parts, lo, hi, option="startingOffsets")
        return parts, lo, hi, start


def _log_warnings(warnings: list[str]) -> None:
    for w in warnings:
        log.warning("[%s] data loss: %s", NAME, w)


# -- reading one offset range (executors) ------------------------------------------------------------


class KafkaInputPartition(InputPartition):
    """One Spark input partition: offsets ``[start, end)`` of one Kafka partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__(f"{topic}-{partition}[{start},{end})")
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    @property
    def range(self) -> OffsetRange:
        return OffsetRange(self.topic, self.partition, self.start, self.end)


@lru_cache(maxsize=2)
def _arrow_schema(include_headers: bool):
    # exactly what Spark checks yielded batches against (plan_data_source_read.records_to_arrow_batches)
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(kafka_schema(include_headers), timezone="UTC")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Columns:
    """Column buffers for one Arrow record batch of one partition."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic, self.partition, self.include_headers = topic, partition, include_headers
        self.reset()

    def reset(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.offsets: list[int] = []
        self.ts_us: list[int] = []
        self.ts_types: list[int] = []
        self.headers: list = []

    def __len__(self) -> int:
        return len(self.offsets)

    def extend(self, msgs: list) -> None:
        """Append a chunk that ``_clean_chunk`` accepted, column by column (no per-record branches)."""
        self.keys.extend([m.key() for m in msgs])
        self.values.extend([m.value() for m in msgs])
        self.offsets.extend([m.offset() for m in msgs])
        stamps = [m.timestamp() for m in msgs]
        self.ts_us.extend([ts * 1000 if kind else -1000 for kind, ts in stamps])
        self.ts_types.extend([kind - 1 for kind, _ts in stamps])
        if self.include_headers:
            self.headers.extend([m.headers() or None for m in msgs])

    def to_batch(self):
        import pyarrow as pa

        n = len(self.offsets)
        schema = _arrow_schema(self.include_headers)
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.ts_us, schema.field("timestamp").type),
            pa.array(self.ts_types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(_headers_array(self.headers, schema.field("headers").type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        self.reset()
        return batch


def _headers_array(headers: list, list_type: Any) -> Any:
    """``array<struct<key, value>>`` from per-record header lists (None: no headers -> null).

    Built from offsets, a numpy validity mask and flat key/value arrays: pyarrow 26's conversion of
    Python lists with nulls for this type (and of Python bool lists) is pathologically slow
    (~0.3 s per 10k rows, measured), more than the whole Kafka read.
    """
    import numpy as np
    import pyarrow as pa

    n = len(headers)
    offsets = np.zeros(n + 1, dtype=np.int32)
    present = np.zeros(n, dtype=bool)
    keys: list = []
    values: list = []
    for i, hdrs in enumerate(headers):
        if hdrs:
            present[i] = True
            for k, v in hdrs:
                keys.append(k)
                values.append(v)
        offsets[i + 1] = len(keys)
    if not present.any():
        return pa.nulls(n, list_type)
    entries = pa.StructArray.from_arrays(
        [pa.array(keys, pa.string()), pa.array(values, pa.binary())], fields=list(list_type.value_type)
    )
    return pa.ListArray.from_arrays(pa.array(offsets), entries, type=list_type, mask=pa.array(~present))


def _clean_chunk(msgs: list, pos: int, end: int) -> bool:
    """True if every message is a record and all lie in ``[pos, end)`` (offsets only increase)."""
    first, last = msgs[0], msgs[-1]
    return (last.error() is None and first.error() is None and first.offset() >= pos
            and last.offset() < end and not any([m.error() for m in msgs]))


def read_range(cfg: KafkaSourceConfig, rng: OffsetRange) -> Iterator[Any]:
    """Records of ``rng`` as Arrow record batches (or tuples with ``arrowBatches=false``).

    Bounded: returns once the end offset is reached (a record at/after it, or partition EOF at/after
    it: ranges can end in transaction markers that are never delivered). Waits at most
    ``kafkaConsumer.pollTimeoutMs`` without progress. Records deleted under the reader are data loss
    (raise, or skip ahead with a warning when failOnDataLoss=false); gaps from compaction or
    transaction markers are not.
    """
    if rng.size <= 0:
        return
    topic, part, end = rng.topic, rng.partition, rng.end
    include_headers = cfg.include_headers
    arrow = cfg.arrow_batches
    cols = _Columns(topic, part, include_headers)
    rows: list[tuple] = []
    try:
        consumer = Consumer(cfg.consumer_config("executor"))
    except (KafkaException, ValueError) as exc:
        raise ConfigError(f"invalid kafka.* option for the Kafka client: {exc}") from None
    try:
        pos = rng.start  # next offset still needed
        consumer.assign([TopicPartition(topic, part, pos)])
        timeout_s = cfg.poll_timeout_ms / 1000
        deadline = time.monotonic() + timeout_s
        while pos < end:
            # never ask for more than the range still holds: consume() waits for num_messages
            # (or the timeout), so asking for a full chunk would stall at the end of every range
            want = min(ARROW_BATCH_ROWS - (len(cols) if arrow else len(rows)), end - pos)
            msgs = consumer.consume(num_messages=max(want, 1), timeout=1.0)
            if not msgs:
                if time.monotonic() > deadline:
                    raise KafkaSourceError(
                        f"no records from {topic}-{part} for {cfg.poll_timeout_ms} ms while reading offsets "
                        f"[{rng.start}, {end}) (stuck at {pos}); raise kafkaConsumer.pollTimeoutMs or check "
                        f"the broker"
                    )
                continue
            deadline = time.monotonic() + timeout_s
            if arrow and _clean_chunk(msgs, pos, end):
                cols.extend(msgs)
                pos = msgs[-1].offset() + 1
                msgs = ()  # all taken: skip the record-by-record loop below
            for m in msgs:
                err = m.error()
                if err is not None:
                    code = err.code()
                    if code == KafkaError._PARTITION_EOF:
                        if m.offset() >= end:
                            pos = end
                            break
                        continue
                    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        pos = _skip_deleted(cfg, consumer, rng, pos)
                        break
                    raise KafkaSourceError(f"reading {topic}-{part} at offset {pos} failed: {err}")
                off = m.offset()
                if off < pos:
                    continue  # re-delivered after a seek
                if off >= end:
                    pos = end
                    break
                ts_type, ts = m.timestamp()
                if ts_type == 0:  # TIMESTAMP_NOT_AVAILABLE: Spark shows -1 ms, type -1
                    ts = -1
                hdrs = m.headers() if include_headers else None
                if arrow:
                    cols.keys.append(m.key())
                    cols.values.append(m.value())
                    cols.offsets.append(off)
                    cols.ts_us.append(ts * 1000)
                    cols.ts_types.append(ts_type - 1)
                    cols.headers.append(hdrs or None)
                else:
                    row = (
                        m.key(),
                        m.value(),
                        topic,
                        part,
                        off,
                        _EPOCH + timedelta(milliseconds=ts),
                        ts_type - 1,
                    )
                    rows.append(row + (hdrs or None,) if include_headers else row)
                pos = off + 1
            if arrow:
                if len(cols) >= ARROW_BATCH_ROWS:
                    yield cols.to_batch()
            elif rows:
                yield from rows
                rows = []
        if arrow and len(cols):
            yield cols.to_batch()
        yield from rows
    finally:
        consumer.close()


def _skip_deleted(cfg: KafkaSourceConfig, consumer: Consumer, rng: OffsetRange, pos: int) -> int:
    """Offset ``pos`` was deleted while reading: fail, or continue from the earliest offset left."""
    tp = (rng.topic, rng.partition)
    lo, _hi = consumer.get_watermark_offsets(TopicPartition(*tp), timeout=REQUEST_TIMEOUT_S, cached=False)
    message = (
        f"records deleted in {tp_name(tp)} while reading [{rng.start}, {rng.end}): offset {pos} is out of "
        f"range, the earliest available offset is now {lo}"
    )
    if cfg.fail_on_data_loss:
        from streamops.spark.offsets import INSTRUCTION_FAIL

        raise DataLossError(f"{message}. {INSTRUCTION_FAIL}")
    _log_warnings([f"{message}; skipping to {min(max(lo, pos), rng.end)}"])
    nxt = min(max(lo, pos), rng.end)
    if nxt < rng.end:
        consumer.assign([TopicPartition(tp[0], tp[1], nxt)])
    return nxt


def _read_partition(cfg: KafkaSourceConfig, partition: InputPartition) -> Iterator[Any]:
    if not isinstance(partition, KafkaInputPartition):  # Spark's placeholder when nothing to read
        return iter(())
    return read_range(cfg, partition.range)


# -- Spark reader classes ----------------------------------------------------------------------------


class KafkaBatchReader(DataSourceReader):
    """``spark.read``: ranges fixed at planning from startingOffsets/startingTimestamp to endingOffsets."""

    def __init__(self, cfg: KafkaSourceConfig) -> None:
        self.cfg = cfg

    def partitions(self) -> list[InputPartition]:
        client = _OffsetClient(self.cfg)
        try:
            parts, lo, hi, start = client.starting_offsets(streaming=False)
            end_spec = parse_ending_offsets(self.cfg.ending_offsets, self.cfg.topics)
            end = resolve_offsets(end_spec, parts, lo, hi, option="endingOffsets")
        finally:
            client.close()
        plan = plan_bounded_read(start, end, lo, hi, self.cfg.fail_on_data_loss)
        _log_warnings(plan.warnings)
        return [KafkaInputPartition(r.topic, r.partition, r.start, r.end) for r in plan.ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_partition(self.cfg, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream``: micro-batches planned from watermarks, with admission control."""

    def __init__(self, cfg: KafkaSourceConfig) -> None:
        self.cfg = cfg
        self._client: _OffsetClient | None = None
        self._planned: tuple[str, str, list[OffsetRange]] | None = None
        self._latest: dict[TP, int] | None = None
        self._target: dict[TP, int] | None = cfg.stop_offsets()  # a bounded run never plans past it

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_client"] = None  # a live consumer never travels to the executors
        return state

    @property
    def client(self) -> _OffsetClient:
        if self._client is None:
            self._client = _OffsetClient(self.cfg)
        return self._client

    def initialOffset(self) -> dict:
        _parts, _lo, _hi, start = self.client.starting_offsets(streaming=True)
        log.info("[%s] initial offsets %s", NAME, format_offsets(start))
        return offsets_to_dict(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.cfg.max_offsets_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        _lo, now = self.client.watermarks(self.client.partitions())
        stop = self.cfg.stop_offsets()
        self._target = now if stop is None else cap_to_target(now, stop)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_dict(start)
        parts = self.client.partitions()
        lo, hi = self.client.watermarks(parts)
        self._latest = dict(hi)
        if self._target is not None:
            hi = cap_to_target(hi, self._target)
            lo = {tp: lo[tp] for tp in hi}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        plan = plan_batch(begin, hi, lo, max_rows, self.cfg.fail_on_data_loss)
        _log_warnings(plan.warnings)
        self._planned = (format_offsets(begin), format_offsets(plan.end), plan.ranges)
        return offsets_to_dict(plan.end)

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_dict(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, stop = offsets_from_dict(start), offsets_from_dict(end)
        if self._planned is not None and self._planned[:2] == (format_offsets(begin), format_offsets(stop)):
            ranges = self._planned[2]
        else:
            # a batch planned before a restart: check its offsets against what exists now
            existing = set(self.client.partitions())
            known = sorted(tp for tp in stop if tp in existing)
            lo, _hi = self.client.watermarks(known)
            plan = plan_batch(begin, {tp: stop[tp] for tp in known}, lo, None, self.cfg.fail_on_data_loss)
            _log_warnings(plan.warnings)
            ranges = plan.ranges
        return [KafkaInputPartition(r.topic, r.partition, r.start, r.end) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_partition(self.cfg, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in the Spark checkpoint, no consumer group is committed."""

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class KafkaDataSource(DataSource):
    """The ``streamops_kafka`` format: Spark's Kafka source options and schema over confluent-kafka."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def _config(self) -> KafkaSourceConfig:
        return KafkaSourceConfig.from_options(self.options.copy())

    def schema(self) -> StructType:
        return kafka_schema(self._config().include_headers)

    def _check_schema(self, schema: StructType, cfg: KafkaSourceConfig) -> None:
        expected = kafka_schema(cfg.include_headers)
        if schema != expected:
            raise ConfigError(
                f"{NAME} does not support a user-specified schema; its schema is {expected.simpleString()}"
            )

    def reader(self, schema: StructType) -> DataSourceReader:
        cfg = self._config().for_batch()
        self._check_schema(schema, cfg)
        return KafkaBatchReader(cfg)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        cfg = self._config().for_stream()
        self._check_schema(schema, cfg)
        return KafkaStreamReader(cfg)
