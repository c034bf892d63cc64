"""The single entry point for Spark <-> Kafka: ``read_kafka`` and ``write_kafka_batch``, both on
Spark's own ``kafka`` format (``spark-sql-kafka-0-10``, on every session's classpath through
``spark.jars``: ``host.jars``).

Reads are ``read_committed`` (only committed transactions' records, as every reader of an app's
output must) unless the caller's options say otherwise. A bounded stream (``stop_at_offsets``, which
Spark's source lacks) is the source filtered to the offsets below the bound; the runtime stops the
query once the bound is committed and clamps the checkpoint's last batch to it (``clamp_to_bound``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from streamops.exceptions import UsageError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamops.kafka.config import KafkaConfig

log = logging.getLogger(__name__)

KAFKA_PROVIDER_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
#: records per ``poll`` of the executors' consumers (the Java client's default is 500). Spark's
#: connector seeks before every poll and asks the broker for the partition's offset range after
#: it (``InternalKafkaConsumer.fetch``), so the default made a task of 8,000 records make 16 such
#: rounds: a streaming read of 50,000-record batches
#: drained 52,500 records/s at 500 and 64,800-65,500 at 5,000-20,000 (docs/benchmarks.md, "The
#: Kafka read's poll size"). A fetch still returns at most ``max.partition.fetch.bytes`` per partition.
MAX_POLL_RECORDS = 10_000
#: Spark's Kafka source schema without headers
KAFKA_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
             "timestampType int")


def jvm_class_exists(spark: SparkSession, class_name: str) -> bool:
    """Whether the driver JVM can load ``class_name`` (False for Spark Connect: no JVM access)."""
    from py4j.protocol import Py4JError

    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    try:
        # the context loader also sees jars added with --jars / spark.jars
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(class_name, False, loader)
    except Py4JError:  # ClassNotFoundException arrives as Py4JJavaError
        return False
    return True


class KafkaConnectorMissing(UsageError):
    """The Spark session has no ``spark-sql-kafka-0-10`` on its classpath.

    Operator action: build the session with ``host.jars.spark_conf()`` (``spark.jars``), or
    run ``scripts/bootstrap.sh`` if the jars themselves are missing.
    """

    exit_code = 1


def require_connector(spark: SparkSession) -> None:
    if not jvm_class_exists(spark, KAFKA_PROVIDER_CLASS):
        raise KafkaConnectorMissing(
            "Spark's Kafka connector (spark-sql-kafka-0-10) is not on this session's classpath: build the "
            "session with streamops.host.jars.spark_conf() (spark.jars)")


def _json_offsets(name: str, value: Any) -> str:
    """``"earliest"`` / ``"latest"`` / JSON text / ``{"t": {0: 5}}`` / ``{("t", 0): 5}`` -> option text.

    Offsets below -2 are refused here: Spark takes them and fails only in a task, with an assertion
    that does not name the option."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value  # Spark's own message names the expected form
        if isinstance(parsed, dict):
            _check_offsets(name, parsed)
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
        _check_offsets(name, out)
        return json.dumps(out, separators=(",", ":"))
    raise UsageError(f"{name} must be 'earliest', 'latest', JSON text or a dict, got {type(value).__name__}")


def _check_offsets(name: str, spec: Mapping[str, Any]) -> None:
    for topic, parts in spec.items():
        for p, o in (parts.items() if isinstance(parts, Mapping) else ()):
            if isinstance(o, int) and o < -2:
                raise UsageError(
                    f"{name}: offset {o} for {topic}-{p} is not valid: use an offset >= 0, -1 (latest) or "
                    f"-2 (earliest)"
                )


def read_kafka(
    spark: SparkSession,
    *,
    kafka: KafkaConfig,
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
    """A Kafka DataFrame with Spark's Kafka schema including ``headers``, read as a client made with
    ``kafka`` (its address and client security).

    ``options`` are further source options with Spark's names (``kafka.security.protocol``,
    ``kafka.sasl.*``, ``startingOffsetsByTimestampStrategy``, ...); they may not repeat an option set
    by a keyword argument. ``includeHeaders`` defaults to true here (Spark's default is false).
    ``stop_at_offsets`` (streaming only) bounds the stream: no row at or past those offsets
    (reprocessing a range) reaches the query; a batch may plan past them (Spark's source has no
    such bound), which ``clamp_to_bound`` takes back from the checkpoint once the run ends.
    ``kafka.isolation.level`` defaults to ``read_committed``, ``kafka.max.poll.records`` to
    ``MAX_POLL_RECORDS``.
    """
    _check_arguments(kafka.bootstrap, streaming, ending_offsets, stop_at_offsets, max_offsets_per_trigger)
    topics = [subscribe] if isinstance(subscribe, str) else list(subscribe)
    opts: dict[str, str] = {
        "kafka.bootstrap.servers": kafka.bootstrap,
        "subscribe": ",".join(t.strip() for t in topics),
        "failOnDataLoss": "true" if fail_on_data_loss else "false",
    }
    if starting_offsets is not None:
        opts["startingOffsets"] = _json_offsets("starting_offsets", starting_offsets)
    if ending_offsets is not None:
        opts["endingOffsets"] = _json_offsets("ending_offsets", ending_offsets)
    bound = None if stop_at_offsets is None else json.loads(_json_offsets("stop_at_offsets", stop_at_offsets))
    if starting_timestamp is not None:
        opts["startingTimestamp"] = str(int(starting_timestamp))
    if max_offsets_per_trigger is not None:
        opts["maxOffsetsPerTrigger"] = str(int(max_offsets_per_trigger))
    opts = _with_options(opts, options, kafka)
    require_connector(spark)
    reader = spark.readStream if streaming else spark.read
    df = reader.format("kafka").options(**opts).load()
    return df if bound is None else df.where(below_bound(bound))


def _check_arguments(bootstrap_servers: str, streaming: bool, ending_offsets: object, stop_at_offsets: object,
                     max_offsets_per_trigger: int | None) -> None:
    """``UsageError`` for a combination of ``read_kafka``'s arguments Spark would refuse or ignore."""
    if not bootstrap_servers:
        raise UsageError("a bootstrap address is required (kafka=...)")
    if streaming and ending_offsets is not None:
        raise UsageError("ending_offsets is only valid for batch reads (streaming=False)")
    if not streaming and stop_at_offsets is not None:
        raise UsageError("stop_at_offsets is only valid for streaming reads; batch reads use ending_offsets")
    if not streaming and max_offsets_per_trigger is not None:
        raise UsageError("max_offsets_per_trigger is only valid for streaming reads (streaming=True)")
    if max_offsets_per_trigger is not None and max_offsets_per_trigger < 1:
        raise UsageError(f"max_offsets_per_trigger must be >= 1, got {max_offsets_per_trigger}")


def _with_options(opts: dict[str, str], options: Mapping[str, Any] | None, kafka: KafkaConfig) -> dict[str, str]:
    """``opts`` with the caller's further ``options`` and ``kafka``'s client security over them;
    an option may not repeat a keyword argument's; headers, read_committed and ``MAX_POLL_RECORDS``
    by default."""
    taken = {k.lower(): k for k in opts}
    extra = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in (options or {}).items()}
    extra = {**kafka.spark_options(), **extra}  # the client security
    clashes = sorted(k for k in extra if k.lower() in taken)
    if clashes:
        raise UsageError(
            f"options {clashes} repeat keyword arguments of read_kafka: pass each setting once "
            f"(e.g. kafka=..., not options={{'kafka.bootstrap.servers': ...}})"
        )
    out = dict(opts)
    if not any(k.lower() == "includeheaders" for k in extra):
        out["includeHeaders"] = "true"
    if not any(k.lower() == "kafka.isolation.level" for k in extra):
        out["kafka.isolation.level"] = "read_committed"
    if not any(k.lower() == "kafka.max.poll.records" for k in extra):
        out["kafka.max.poll.records"] = str(MAX_POLL_RECORDS)
    out.update(extra)
    return out


def below_bound(bound: Mapping[str, Mapping[str, int]]):
    """Rows before ``bound`` ({topic: {partition: offset}}); partitions it does not name: none."""
    from functools import reduce

    from pyspark.sql import functions as F

    conds = [(F.col("topic") == t) & (F.col("partition") == int(p)) & (F.col("offset") < int(o))
             for t, parts in bound.items() for p, o in parts.items()]
    if not conds:
        return F.lit(False)
    return reduce(lambda a, b: a | b, conds)


def clamp_to_bound(end: Mapping[str, Mapping[str, int]], bound: Mapping[str, Mapping[str, int]]
                   ) -> dict[str, dict[str, int]]:
    """A batch's end offsets, none past ``bound``: what the batch really consumed of a bounded read."""
    return {t: {str(p): min(int(o), int(bound[t][str(p)])) if t in bound and str(p) in bound[t] else int(o)
                for p, o in parts.items()} for t, parts in end.items()}


# -- writing ----------------------------------------------------------------------------------------


def write_kafka_batch(
    df: DataFrame,
    *,
    kafka: KafkaConfig,
    topic: str | None = None,
    options: Mapping[str, Any] | None = None,
    producer_config: Mapping[str, Any] | None = None,
) -> None:
    """Write a batch DataFrame (e.g. inside ``foreachBatch``) with Spark's Kafka sink, as a client
    made with ``kafka``; raise if any record fails.

    Columns as for Spark's Kafka sink: ``value`` (binary or string, required), optional ``key``
    (binary or string), ``headers`` (array<struct<key: string, value: binary>>), ``topic`` (used when
    ``topic`` is not given; the argument wins, as Spark's ``topic`` option does) and ``partition``.
    ``options``: Spark-style sink options (``kafka.``-prefixed client properties);
    ``producer_config``: client properties without prefix (Java client names). Not transactional:
    a re-run batch is written again (the app runtime's committer is what writes exactly once).
    """
    if not kafka.bootstrap:
        raise UsageError("a bootstrap address is required (kafka=...)")
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
    spark_opts = {**kafka.spark_options(), **{str(k): str(v) for k, v in (options or {}).items()}}
    bad = sorted(k for k in spark_opts if not k.lower().startswith("kafka.") and k.lower() != "topic")
    if bad:
        raise UsageError(f"options {bad}: sink options must be 'kafka.'-prefixed client properties")
    if any(k.lower() == "kafka.bootstrap.servers" for k in spark_opts) or (
        producer_config and "bootstrap.servers" in producer_config
    ):
        raise UsageError("pass the brokers once, as kafka=...")
    require_connector(df.sparkSession)
    writer = df.write.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
    for k, v in spark_opts.items():
        writer = writer.option(k, v)
    for k, v in (producer_config or {}).items():
        writer = writer.option(f"kafka.{k}", str(v))
    if topic is not None:
        writer = writer.option("topic", topic)
    writer.save()
