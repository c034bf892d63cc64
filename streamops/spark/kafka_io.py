"""The single entry point for Spark <-> Kafka: ``read_kafka`` and ``write_kafka_batch``.

Both use Spark's own ``kafka`` format when its connector (``spark-sql-kafka-0-10``) is on the
classpath and fall back to confluent-kafka otherwise (the ``streamops_kafka`` Python data source
for reads, ``foreachPartition`` producers for writes), with the same option names either way, so
jobs do not care which one runs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from streamops.exceptions import UsageError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

KAFKA_PROVIDER_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
FALLBACK_FORMAT = "streamops_kafka"
#: seconds a partition's producer may take to deliver what it queued
FLUSH_TIMEOUT_S = 60.0

_available: dict[str, bool] = {}
_registered: set[str] = set()


def _session_key(spark: SparkSession) -> str:
    from pyspark.errors import PySparkException

    try:
        return spark.sparkContext.applicationId
    except (AttributeError, PySparkException):  # Spark Connect sessions have no SparkContext
        return f"connect:{id(spark)}"


def jvm_class_exists(spark: SparkSession, class_name: str) -> bool:
    """Whether the driver JVM can load ``class_name`` (False for Spark Connect: no JVM access)."""
    from py4j.protocol import Py4JError

    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    try:
        # the context loader also sees jars added with --jars / --packages
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(class_name, False, loader)
    except Py4JError:  # ClassNotFoundException arrives as Py4JJavaError
        return False
    return True


def kafka_format_available(spark: SparkSession) -> bool:
    """True if Spark's own Kafka connector classes are on the JVM classpath (cached per application)."""
    key = _session_key(spark)
    if key not in _available:
        _available[key] = jvm_class_exists(spark, KAFKA_PROVIDER_CLASS)
        log.info(
            "Spark's kafka format %s",
            "is available" if _available[key] else f"is missing: using {FALLBACK_FORMAT}",
        )
    return _available[key]


def register_kafka_source(spark: SparkSession) -> None:
    """Register the ``streamops_kafka`` Python data source with this session (idempotent)."""
    key = _session_key(spark)
    if key in _registered:
        return
    from streamops.spark.kafka_source import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
    _registered.add(key)


def _json_offsets(name: str, value: Any) -> str:
    """``"earliest"`` / ``"latest"`` / JSON text / ``{"t": {0: 5}}`` / ``{("t", 0): 5}`` -> option text."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        out: dict[str, dict[str, int]] = {}
        for k, v in value.items():
            if isinstance(k, tuple) and len(k) == 2:
                out.setdefault(str(k[0]), {})[str(int(k[1]))] = int(v)
            elif isinstance(k, str) and isinstance(v, Mapping):
                out.setdefault(k, {}).update({str(int(p)): int(o) for p, o in v.items()})
            else:
                raise UsageError(
                    f"{name}: expected {{topic: {{partition: offset}}}} or {{(topic, partition): offset}}"
                )
        return json.dumps(out, separators=(",", ":"))
    raise UsageError(f"{name} must be 'earliest', 'latest', JSON text or a dict, got {type(value).__name__}")


def read_kafka(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    subscribe: str | Iterable[str],
    streaming: bool = True,
    starting_offsets: str | Mapping | None = None,
    ending_offsets: str | Mapping | None = None,
    stop_at_offsets: str | Mapping | None = None,
    starting_timestamp: int | None = None,
    max_offsets_per_trigger: int | None = None,
    fail_on_data_loss: bool = True,
    options: Mapping[str, Any] | None = None,
) -> DataFrame:
    """A Kafka DataFrame with Spark's Kafka schema including ``headers``.

    ``options`` are further source options with Spark's names (``kafka.security.protocol``,
    ``kafka.sasl.*``, ``startingOffsetsByTimestampStrategy``, ...); they may not repeat an option set
    by a keyword argument. ``includeHeaders`` defaults to true here (Spark's default is false).
    ``stop_at_offsets`` (streaming only) bounds the stream: no batch reads past those offsets
    (reprocessing a range); it always uses the streamops source, Spark's has no such option.
    """
    if not bootstrap_servers:
        raise UsageError("bootstrap_servers is required")
    topics = [subscribe] if isinstance(subscribe, str) else list(subscribe)
    if streaming and ending_offsets is not None:
        raise UsageError("ending_offsets is only valid for batch reads (streaming=False)")
    if not streaming and stop_at_offsets is not None:
        raise UsageError("stop_at_offsets is only valid for streaming reads; batch reads use ending_offsets")
    if not streaming and max_offsets_per_trigger is not None:
        raise UsageError("max_offsets_per_trigger is only valid for streaming reads (streaming=True)")
    if max_offsets_per_trigger is not None and max_offsets_per_trigger < 1:
        raise UsageError(f"max_offsets_per_trigger must be >= 1, got {max_offsets_per_trigger}")
    opts: dict[str, str] = {
        "kafka.bootstrap.servers": bootstrap_servers,
        "subscribe": ",".join(t.strip() for t in topics),
        "failOnDataLoss": "true" if fail_on_data_loss else "false",
    }
    if starting_offsets is not None:
        opts["startingOffsets"] = _json_offsets("starting_offsets", starting_offsets)
    if ending_offsets is not None:
        opts["endingOffsets"] = _json_offsets("ending_offsets", ending_offsets)
    if stop_at_offsets is not None:
        opts["stopAtOffsets"] = _json_offsets("stop_at_offsets", stop_at_offsets)
    if starting_timestamp is not None:
        opts["startingTimestamp"] = str(int(starting_timestamp))
    if max_offsets_per_trigger is not None:
        opts["maxOffsetsPerTrigger"] = str(int(max_offsets_per_trigger))
    taken = {k.lower(): k for k in opts}
    extra = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in (options or {}).items()}
    clashes = sorted(k for k in extra if k.lower() in taken)
    if clashes:
        raise UsageError(
            f"options {clashes} repeat keyword arguments of read_kafka: pass each setting once "
            f"(e.g. bootstrap_servers=..., not options={{'kafka.bootstrap.servers': ...}})"
        )
    if not any(k.lower() == "includeheaders" for k in extra):
        opts["includeHeaders"] = "true"
    opts.update(extra)

    if kafka_format_available(spark) and stop_at_offsets is None:
        fmt = "kafka"
    else:
        register_kafka_source(spark)
        fmt = FALLBACK_FORMAT
    reader = spark.readStream if streaming else spark.read
    return reader.format(fmt).options(**opts).load()


# -- writing ----------------------------------------------------------------------------------------


def _as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


#: producers of this Python worker, one per config (Spark reuses workers across tasks and batches,
#: so a foreachBatch sink does not pay the producer start, e.g. InitProducerId, on every batch)
_producers: dict[str, Any] = {}


def _cached_producer(config: dict[str, Any]) -> tuple[str, Any]:
    from confluent_kafka import Producer

    key = json.dumps(config, sort_keys=True, default=str)
    if key not in _producers:
        _producers[key] = Producer(config)
    return key, _producers[key]


def _produce_partition(
    rows: Iterator[Any],
    *,
    config: dict[str, Any],
    topic: str | None,
    flush_timeout_s: float,
) -> None:
    """Executor side of :func:`write_kafka_batch`: produce one partition, flush, raise on any error."""
    from confluent_kafka import KafkaException

    errors: list[str] = []
    failed = 0

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
            if len(errors) < 5:
                errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    key, producer = _cached_producer(config)
    sent = 0
    try:
        for row in rows:
            d = row.asDict(recursive=False)
            target = topic or d.get("topic")
            if not target:
                raise ValueError(
                    "a row has no topic: set write_kafka_batch(topic=...) or a non-null 'topic' column"
                )
            kwargs: dict[str, Any] = {"value": _as_bytes(d.get("value")), "key": _as_bytes(d.get("key"))}
            headers = d.get("headers")
            if headers:
                kwargs["headers"] = [(h["key"], _as_bytes(h["value"])) for h in headers]
            if d.get("partition") is not None:
                kwargs["partition"] = int(d["partition"])
            while True:
                try:
                    producer.produce(target, on_delivery=on_delivery, **kwargs)
                    break
                except BufferError:  # local queue full: serve delivery reports, then retry
                    producer.poll(0.1)
                except KafkaException as exc:
                    raise RuntimeError(f"producing to {target} failed: {exc}") from None
            sent += 1
            if failed:
                break
            producer.poll(0)
        remaining = producer.flush(flush_timeout_s)
        if failed:
            raise RuntimeError(f"{failed} Kafka delivery error(s), first: {'; '.join(errors)}")
        if remaining:
            raise RuntimeError(
                f"{remaining} of {sent} records not delivered within {flush_timeout_s} s (flush timed out)"
            )
    except BaseException:
        _producers.pop(key, None)  # never hand a producer in an unknown state to the next batch
        raise


def write_kafka_batch(
    df: DataFrame,
    *,
    bootstrap_servers: str,
    topic: str | None = None,
    options: Mapping[str, Any] | None = None,
    producer_config: Mapping[str, Any] | None = None,
) -> None:
    """Write a batch DataFrame (e.g. inside ``foreachBatch``) to Kafka; raise if any record fails.

    Columns as for Spark's Kafka sink: ``value`` (binary or string, required), optional ``key``
    (binary or string), ``headers`` (array<struct<key: string, value: binary>>), ``topic`` (used when
    ``topic`` is not given; the argument wins, as Spark's ``topic`` option does) and ``partition``.
    ``options``: Spark-style sink options (``kafka.``-prefixed client properties);
    ``producer_config``: client properties without prefix (librdkafka names). Not transactional and
    not idempotent across retries of the same batch: a re-run batch is written again.
    """
    if not bootstrap_servers:
        raise UsageError("bootstrap_servers is required")
    cols = set(df.columns)
    if "value" not in cols:
        raise UsageError(f"write_kafka_batch needs a 'value' column; columns are {sorted(cols)}")
    if topic is None and "topic" not in cols:
        raise UsageError("write_kafka_batch needs topic=... or a 'topic' column")
    unknown = cols - {"key", "value", "headers", "topic", "partition"}
    if unknown:
        raise UsageError(
            f"write_kafka_batch: unexpected columns {sorted(unknown)}; select key, value and optionally "
            f"headers, topic, partition"
        )
    spark_opts = {str(k): str(v) for k, v in (options or {}).items()}
    bad = sorted(k for k in spark_opts if not k.lower().startswith("kafka.") and k.lower() != "topic")
    if bad:
        raise UsageError(f"options {bad}: sink options must be 'kafka.'-prefixed client properties")
    if any(k.lower() == "kafka.bootstrap.servers" for k in spark_opts) or (
        producer_config and "bootstrap.servers" in producer_config
    ):
        raise UsageError("pass the brokers once, as bootstrap_servers=...")

    spark = df.sparkSession
    if kafka_format_available(spark):
        writer = df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap_servers)
        for k, v in spark_opts.items():
            writer = writer.option(k, v)
        for k, v in (producer_config or {}).items():
            writer = writer.option(f"kafka.{k}", str(v))
        if topic is not None:
            writer = writer.option("topic", topic)
        writer.save()
        return

    from streamops.spark.kafka_source import client_config

    config: dict[str, Any] = {"enable.idempotence": True, "linger.ms": 5}
    config.update(client_config({k: v for k, v in spark_opts.items() if k.lower() != "topic"}))
    config.update(dict(producer_config or {}))
    config["bootstrap.servers"] = bootstrap_servers
    topic = topic or next((v for k, v in spark_opts.items() if k.lower() == "topic"), None)
    df.foreachPartition(
        partial(_produce_partition, config=config, topic=topic, flush_timeout_s=FLUSH_TIMEOUT_S)
    )
