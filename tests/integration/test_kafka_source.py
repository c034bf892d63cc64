"""read_kafka / write_kafka_batch against a real broker with a local SparkSession.

Spark's own kafka format is not installable here, so these exercise the ``streamops_kafka``
Python data source: exact records (keys, values, partitions, offsets, headers), offset specs,
maxOffsetsPerTrigger micro-batches, checkpoint restarts, new partitions, deleted records, client
options, and the confluent-kafka writer.
"""

from __future__ import annotations

import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from streamops.exceptions import ConfigError
from streamops.spark.kafka_io import (
    FALLBACK_FORMAT,
    jvm_class_exists,
    kafka_format_available,
    read_kafka,
    write_kafka_batch,
)
from streamops.spark.kafka_source import KafkaSourceConfig, client_config, kafka_schema


class Rec(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple | None


# -- helpers -------------------------------------------------------------------------------------


def new_topic(bootstrap: str, partitions: int = 3, prefix: str = "src") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(timeout=15)
    wait_partitions(bootstrap, name, partitions)
    return name


def wait_partitions(bootstrap: str, topic: str, n: int, timeout: float = 20.0) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            meta = c.list_topics(topic, timeout=5).topics.get(topic)
            if meta is not None and meta.error is None and len(meta.partitions) == n:
                return
            time.sleep(0.2)
    finally:
        c.close()
    raise AssertionError(f"{topic} never showed {n} partitions")


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> list[Rec]:
    """Produce ``records`` (value, key, partition, headers, timestamp); what the broker acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    acked: list[Rec] = []
    errors: list[str] = []

    def on_delivery(rec: dict, err, msg) -> None:
        if err is not None:
            errors.append(str(err))
            return
        hdrs = tuple((k, v) for k, v in rec.get("headers") or ()) or None
        acked.append(Rec(msg.partition(), msg.offset(), _b(rec.get("key")), _b(rec.get("value")), hdrs))

    for rec in records:
        kwargs = {
            k: rec[k] for k in ("key", "value", "partition", "headers", "timestamp") if rec.get(k) is not None
        }
        producer.produce(topic, on_delivery=partial(on_delivery, rec), **kwargs)
    assert producer.flush(30) == 0
    assert not errors, errors
    assert len(acked) == len(records)
    return sorted(acked)


def _b(v: Any) -> bytes | None:
    return v.encode() if isinstance(v, str) else v


def records(n: int, partitions: int, *, tag: str = "v", start: int = 0) -> list[dict[str, Any]]:
    """Keys (some null), values, headers on every third record, spread round-robin."""
    out = []
    for i in range(start, start + n):
        out.append(
            {
                "key": None if i % 5 == 4 else f"k{i}",
                "value": f"{tag}{i}",
                "partition": i % partitions,
                "headers": [("h", f"x{i}".encode()), ("n", None)] if i % 3 == 0 else None,
            }
        )
    return out


def to_recs(rows) -> list[Rec]:
    out = []
    for r in rows:
        hdrs = (
            tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"])
            if r["headers"]
            else None
        )
        out.append(Rec(r["partition"], r["offset"], _bytes(r["key"]), _bytes(r["value"]), hdrs))
    return sorted(out)


def _bytes(v: Any) -> bytes | None:
    return None if v is None else bytes(v)


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_records([TopicPartition(topic, partition, before)]).values():
        f.result(timeout=15)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        assert (
            c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)[0] == before
        )
    finally:
        c.close()


class BatchCollector:
    """foreachBatch sink keeping every micro-batch's rows (the callback runs in this process)."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[Rec]]] = []

    def __call__(self, df, batch_id: int) -> None:
        self.batches.append((batch_id, to_recs(df.collect())))

    @property
    def all(self) -> list[Rec]:
        return sorted(r for _, rows in self.batches for r in rows)


def run_stream(df, checkpoint: Path, sink: BatchCollector, **trigger) -> None:
    """Start, process everything available, stop."""
    writer = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    if trigger:
        writer = writer.trigger(**trigger)
    q = writer.start()
    try:
        if trigger.get("availableNow"):
            assert q.awaitTermination(120), "availableNow query did not finish"
            if q.exception():
                raise q.exception()
        else:
            q.processAllAvailable()
    finally:
        q.stop()


def log_text(spark_log) -> str:
    time.sleep(0.5)  # stderr of Python workers is copied to the JVM log by a thread
    return spark_log.text()


# -- tests ----------------------------------------------------------------------------------------


def test_fallback_format_is_used_and_schema_is_sparks(spark, kafka) -> None:
    assert kafka_format_available(spark) is False  # no spark-sql-kafka jar here
    assert jvm_class_exists(spark, "org.apache.spark.sql.SparkSession")  # the probe itself works
    topic = new_topic(kafka, 1)
    df = read_kafka(spark, bootstrap_servers=kafka, subscribe=topic, streaming=False)
    assert df.schema == kafka_schema(include_headers=True)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    # the raw format follows Spark's includeHeaders default (false)
    raw = (
        spark.read.format(FALLBACK_FORMAT)
        .option("kafka.bootstrap.servers", kafka)
        .option("subscribe", topic)
        .load()
    )
    assert raw.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert raw.count() == 0


def test_batch_read_earliest_to_latest_returns_exactly_the_produced_records(spark, kafka) -> None:
    topic = new_topic(kafka, 3)
    base = int(time.time() * 1000) - 60_000
    recs = records(90, 3)
    for i, r in enumerate(recs):
        r["timestamp"] = base + i
    produced = produce(kafka, topic, recs)
    assert {p for p, *_ in produced} == {0, 1, 2}

    df = read_kafka(
        spark,
        bootstrap_servers=kafka,
        subscribe=topic,
        streaming=False,
        starting_offsets="earliest",
        ending_offsets="latest",
    )
    rows = df.collect()
    assert to_recs(rows) == produced
    assert {r["topic"] for r in rows} == {topic}
    assert {r["timestampType"] for r in rows} == {0}  # CreateTime
    by_value = {bytes(r["value"]).decode(): r for r in rows}
    for i in (0, 44, 89):
        ts = by_value[f"v{i}"]["timestamp"]
        assert int(ts.timestamp() * 1000) == base + i
    # defaults are earliest/latest too
    assert (
        to_recs(read_kafka(spark, bootstrap_servers=kafka, subscribe=topic, streaming=False).collect())
        == produced
    )


def test_batch_read_with_per_partition_json_offsets(spark, kafka) -> None:
    topic = new_topic(kafka, 3)
    produced = produce(kafka, topic, records(60, 3))  # 20 per partition: offsets 0..19
    df = read_kafka(
        spark,
        bootstrap_servers=kafka,
        subscribe=topic,
        streaming=False,
        starting_offsets={topic: {0: 5, 1: -2, 2: 19}},
        ending_offsets=f'{{"{topic}": {{"0": 8, "1": 3, "2": -1}}}}',
    )
    want = [
        r
        for r in produced
        if (r.partition == 0 and 5 <= r.offset < 8)
        or (r.partition == 1 and r.offset < 3)
        or (r.partition == 2 and r.offset == 19)
    ]
    assert to_recs(df.collect()) == want
    assert len(want) == 3 + 3 + 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"starting_offsets": '{"%(t)s": {"0": 1, "1": 1}}'}, "missing: %(t)s-2"),
        (
            {"starting_offsets": '{"other-topic": {"0": 1}}'},
            "names topic 'other-topic', which is not subscribed",
        ),
        ({"starting_offsets": '{"%(t)s": {"0": -5, "1": 0, "2": 0}}'}, "only negative values allowed are -1"),
        ({"starting_offsets": '{"%(t)s": {"0": 3'}, "startingOffsets is not valid JSON"),
        ({"ending_offsets": '{"%(t)s": {"0": 99, "1": 0, "2": 0}}'}, "latest offset is 2"),
        ({"starting_offsets": "latest"}, "can't be 'latest' for batch"),
    ],
)
def test_batch_read_rejects_bad_offset_specs_with_clear_errors(spark, kafka, kwargs, message) -> None:
    topic = new_topic(kafka, 3)
    produce(kafka, topic, records(6, 3))
    kwargs = {k: v % {"t": topic} for k, v in kwargs.items()}
    with pytest.raises(Exception) as info:
        read_kafka(spark, bootstrap_servers=kafka, subscribe=topic, streaming=False, **kwargs).collect()
    assert message % {"t": topic} in str(info.value)


def test_streaming_max_offsets_per_trigger_and_restart_from_checkpoint(spark, kafka, tmp_path) -> None:
    topic = new_topic(kafka, 3)
    first = records(120, 3) + [{"value": f"extra{i}", "partition": 0} for i in range(60)]  # 100/40/40
    produced = produce(kafka, topic, first)
    ckpt = tmp_path / "ckpt"
    stream = partial(
        read_kafka,
        spark,
        bootstrap_servers=kafka,
        subscribe=topic,
        starting_offsets="earliest",
        max_offsets_per_trigger=70,
    )

    sink = BatchCollector()
    run_stream(stream(), ckpt, sink)
    sizes = [len(rows) for _, rows in sink.batches if rows]
    assert all(n <= 70 for n in sizes), sizes
    assert sum(sizes) == 180 and len(sizes) == 3, sizes  # 70 + 70 + 40
    assert sink.all == produced  # exactly once: no loss, no duplicates
    # proportional split: the 100-record partition gets the biggest share of the first batch
    first_batch = next(rows for _, rows in sink.batches if rows)
    per_part = {p: sum(1 for r in first_batch if r.partition == p) for p in range(3)}
    assert per_part == {0: 39, 1: 16, 2: 15}, per_part

    # restart from the checkpoint: only the new records, once
    more = produce(kafka, topic, records(30, 3, tag="late"))
    sink2 = BatchCollector()
    run_stream(stream(), ckpt, sink2)
    assert sink2.all == more
    assert not set(sink2.all) & set(sink.all)
    assert min(b for b, _ in sink2.batches) > max(b for b, _ in sink.batches)


def test_streaming_available_now_honours_max_offsets_per_trigger(spark, kafka, tmp_path) -> None:
    topic = new_topic(kafka, 2)
    produced = produce(kafka, topic, records(50, 2))
    sink = BatchCollector()
    df = read_kafka(
        spark,
        bootstrap_servers=kafka,
        subscribe=topic,
        starting_offsets="earliest",
        max_offsets_per_trigger=20,
    )
    run_stream(df, tmp_path / "ckpt", sink, availableNow=True)
    assert [len(rows) for _, rows in sink.batches] == [20, 20, 10]
    assert sink.all == produced


def test_starting_timestamp(spark, kafka, tmp_path) -> None:
    topic = new_topic(kafka, 3)
    base = int(time.time() * 1000) - 3_600_000
    recs = records(60, 3)
    for i, r in enumerate(recs):
        r["timestamp"] = base + i * 1000
    produced = produce(kafka, topic, recs)
    cutoff = base + 30_500  # records 31..59 (29 of them, in every partition)
    want = sorted(r for r in produced if int(r.value.decode()[1:]) >= 31)
    assert len(want) == 29

    batch = read_kafka(
        spark, bootstrap_servers=kafka, subscribe=topic, streaming=False, starting_timestamp=cutoff
    )
    assert to_recs(batch.collect()) == want

    sink = BatchCollector()
    run_stream(
        read_kafka(spark, bootstrap_servers=kafka, subscribe=topic, starting_timestamp=cutoff),
        tmp_path / "c",
        sink,
    )
    assert sink.all == want

    future = base + 3_600_000 * 2
    with pytest.raises(Exception, match=f"no offset matched startingTimestamp {future}"):
        read_kafka(
            spark, bootstrap_servers=kafka, subscribe=topic, streaming=False, starting_timestamp=future
        ).collect()
    latest = read_kafka(
        spark,
        bootstrap_servers=kafka,
        subscribe=topic,
        streaming=False,
        starting_timestamp=future,
        options={"startingOffsetsByTimestampStrategy": "latest"},
    )
    assert latest.count() == 0


def test_new_partition_added_mid_stream_is_read_from_its_earliest(spark, kafka, tmp_path) -> None:
    topic = new_topic(kafka, 2)
    before = produce(kafka, topic, records(20, 2))
    sink = BatchCollector()
    df = read_kafka(spark, bootstrap_servers=kafka, subscribe=topic, starting_offsets="earliest")
    q = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ckpt")).start()
    try:
        q.processAllAvailable()
        assert sink.all == before

        admin = AdminClient({"bootstrap.servers": kafka})
        for f in admin.create_partitions([NewPartitions(topic, 3)]).values():
            f.result(timeout=15)
        wait_partitions(kafka, topic, 3)
        after = produce(kafka, topic, records(30, 3, tag="new"))
        assert {r.offset for r in after if r.partition == 2} == set(range(10))
        deadline = time.monotonic() + 60
        while len(sink.all) < 50 and time.monotonic() < deadline:
            q.processAllAvailable()
            time.sleep(0.5)
    finally:
        q.stop()
    assert sink.all == sorted(before + after)


def _loss_setup(kafka: str, spark, tmp_path: Path, fail_on_data_loss: bool):
    """A stream reads offsets 0..9, stops; 40 more arrive and 0..29 are deleted; then restart."""
    topic = new_topic(kafka, 1, prefix="loss")
    first = produce(kafka, topic, records(10, 1))
    ckpt = tmp_path / "ckpt"
    stream = partial(
        read_kafka,
        spark,
        bootstrap_servers=kafka,
        subscribe=topic,
        starting_offsets="earliest",
        fail_on_data_loss=fail_on_data_loss,
    )
    sink = BatchCollector()
    run_stream(stream(), ckpt, sink)
    assert sink.all == first
    rest = produce(kafka, topic, records(40, 1, start=10))
    delete_records(kafka, topic, 0, 30)
    return topic, stream, ckpt, rest


def test_deleted_records_skip_with_a_warning_when_fail_on_data_loss_is_false(
    spark, kafka, spark_log, tmp_path
) -> None:
    topic, stream, ckpt, rest = _loss_setup(kafka, spark, tmp_path, fail_on_data_loss=False)
    sink = BatchCollector()
    run_stream(stream(), ckpt, sink)
    assert sink.all == [r for r in rest if r.offset >= 30]
    text = log_text(spark_log)
    assert (
        f"[streamops_kafka] data loss: records deleted in {topic}-0: the next offset to read is 10 but the "
        f"earliest available offset is 30, so offsets 10..29 (20 records) are gone"
    ) in text

    # batch reads follow the same rule
    spec = {topic: {0: 5}}
    df = read_kafka(
        spark,
        bootstrap_servers=kafka,
        subscribe=topic,
        streaming=False,
        starting_offsets=spec,
        fail_on_data_loss=False,
    )
    assert [r.offset for r in to_recs(df.collect())] == list(range(30, 50))
    with pytest.raises(Exception, match=f"records deleted in {topic}-0: the next offset to read is 5"):
        read_kafka(
            spark, bootstrap_servers=kafka, subscribe=topic, streaming=False, starting_offsets=spec
        ).collect()


def test_deleted_records_fail_the_query_when_fail_on_data_loss_is_true(spark, kafka, tmp_path) -> None:
    from pyspark.errors import StreamingQueryException

    topic, stream, ckpt, _rest = _loss_setup(kafka, spark, tmp_path, fail_on_data_loss=True)
    sink = BatchCollector()
    with pytest.raises(StreamingQueryException) as info:
        run_stream(stream(), ckpt, sink)
    message = str(info.value)
    assert (
        f"records deleted in {topic}-0: the next offset to read is 10 but the earliest available offset is 30"
        in message
    )
    assert "failOnDataLoss=false" in message
    assert sink.all == []


def test_kafka_prefixed_options_reach_the_client(spark, kafka, spark_log, tmp_path) -> None:
    topic = new_topic(kafka, 2)
    produced = produce(kafka, topic, records(10, 2))
    client_id = f"streamops-it-{uuid.uuid4().hex[:8]}"
    opts = {"kafka.client.id": client_id, "kafka.debug": "metadata"}
    df = read_kafka(spark, bootstrap_servers=kafka, subscribe=topic, streaming=False, options=opts)
    assert to_recs(df.collect()) == produced
    sink = BatchCollector()
    run_stream(
        read_kafka(
            spark, bootstrap_servers=kafka, subscribe=topic, starting_offsets="earliest", options=opts
        ),
        tmp_path / "ckpt",
        sink,
    )
    assert sink.all == produced
    # librdkafka names its instances "<client.id>#consumer-N" in its debug lines
    assert f"|{client_id}#consumer-" in log_text(spark_log)

    with pytest.raises(Exception, match="no.such.property"):
        read_kafka(
            spark,
            bootstrap_servers=kafka,
            subscribe=topic,
            streaming=False,
            options={"kafka.no.such.property": "1"},
        ).collect()
    with pytest.raises(Exception, match="'kafka.auto.offset.reset' is not supported"):
        read_kafka(
            spark,
            bootstrap_servers=kafka,
            subscribe=topic,
            streaming=False,
            options={"kafka.auto.offset.reset": "earliest"},
        ).collect()


def test_write_kafka_batch_round_trips_key_value_headers_and_topic_column(spark, kafka) -> None:
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

    a, b = new_topic(kafka, 2, prefix="out"), new_topic(kafka, 1, prefix="out")
    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("key", StringType()),
            StructField("value", BinaryType()),
            StructField(
                "headers",
                ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
            ),
        ]
    )
    data = [
        (
            a if i % 2 else b,
            None if i == 3 else f"k{i}",
            f"value-{i}".encode(),
            [("trace", f"t{i}".encode()), ("empty", None)] if i % 4 == 0 else None,
        )
        for i in range(40)
    ]
    write_kafka_batch(spark.createDataFrame(data, schema).repartition(3), bootstrap_servers=kafka)

    back = read_kafka(spark, bootstrap_servers=kafka, subscribe=[a, b], streaming=False).collect()
    got = sorted(
        (
            (
                r["topic"],
                _bytes(r["key"]),
                bytes(r["value"]),
                tuple((h["key"], _bytes(h["value"])) for h in r["headers"]) if r["headers"] else None,
            )
            for r in back
        ),
        key=repr,
    )
    want = sorted(
        ((t, k.encode() if k else None, v, tuple(h) if h else None) for t, k, v, h in data), key=repr
    )
    assert got == want
    # per-key partitioning was the producer's: one key never spans two partitions
    parts = {}
    for r in back:
        parts.setdefault((r["topic"], _bytes(r["key"])), set()).add(r["partition"])
    assert all(len(p) == 1 for k, p in parts.items() if k[1] is not None)


def test_write_kafka_batch_inside_foreach_batch_pipes_a_stream(spark, kafka, tmp_path) -> None:
    src, dst = new_topic(kafka, 3), new_topic(kafka, 2, prefix="out")
    produced = produce(kafka, src, records(45, 3))

    def sink(df, batch_id: int) -> None:
        write_kafka_batch(
            df.selectExpr("key", "upper(cast(value as string)) as value", "headers"),
            bootstrap_servers=kafka,
            topic=dst,
        )

    q = (
        read_kafka(
            spark,
            bootstrap_servers=kafka,
            subscribe=src,
            starting_offsets="earliest",
            max_offsets_per_trigger=20,
        )
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    back = read_kafka(spark, bootstrap_servers=kafka, subscribe=dst, streaming=False).collect()
    got = sorted(((_bytes(r["key"]), bytes(r["value"]), to_recs([r])[0].headers) for r in back), key=repr)
    want = sorted(((r.key, r.value.upper(), r.headers) for r in produced), key=repr)
    assert got == want


def test_write_kafka_batch_raises_on_delivery_errors(spark, kafka) -> None:
    topic = new_topic(kafka, 1, prefix="out")
    df = spark.createDataFrame([("k", "v", 7)], "key string, value string, partition int")
    with pytest.raises(Exception, match="Unknown partition|UNKNOWN_PARTITION|unknown partition"):
        write_kafka_batch(df, bootstrap_servers=kafka, topic=topic)
    with pytest.raises(Exception, match="needs a 'value' column"):
        write_kafka_batch(df.drop("value"), bootstrap_servers=kafka, topic=topic)
    with pytest.raises(Exception, match="topic=... or a 'topic' column"):
        write_kafka_batch(df, bootstrap_servers=kafka)


# -- option handling (no broker needed) -------------------------------------------------------------


def test_client_config_strips_prefix_and_translates_java_spellings() -> None:
    conf = client_config(
        {
            "kafka.bootstrap.servers": "b:9092",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="svc" password="p\\"w";',
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": "/etc/ca.pem",
            "kafka.ssl.endpoint.identification.algorithm": "",
            "subscribe": "t",
        }
    )
    assert conf == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "svc",
        "sasl.password": 'p"w',
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }


@pytest.mark.parametrize(
    "options, message",
    [
        ({"kafka.ssl.truststore.location": "/x.jks"}, "JKS store, which librdkafka can't read"),
        (
            {"kafka.sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"},
            "can't be used by librdkafka",
        ),
        ({"kafka.enable.auto.commit": "true"}, "'kafka.enable.auto.commit' is not supported"),
        ({"kafka.value.deserializer": "x"}, "values are returned as bytes"),
    ],
)
def test_client_config_refuses_what_librdkafka_or_the_source_cannot_honour(options, message) -> None:
    with pytest.raises(ConfigError, match=message):
        client_config(options)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"subscribe": "t"}, "'kafka.bootstrap.servers' must be specified"),
        ({"kafka.bootstrap.servers": "b"}, "no topics to subscribe to"),
        ({"kafka.bootstrap.servers": "b", "subscribe": "t", "assign": "{}"}, "'assign' is not supported"),
        (
            {"kafka.bootstrap.servers": "b", "subscribe": "t", "failondataloss": "maybe"},
            "failOnDataLoss must be",
        ),
        (
            {"kafka.bootstrap.servers": "b", "subscribe": "t", "maxoffsetspertrigger": "0"},
            "maxOffsetsPerTrigger must be >= 1",
        ),
        (
            {"kafka.bootstrap.servers": "b", "subscribe": "t", "startingoffsets": '{"u": {"0": 1}}'},
            "not subscribed",
        ),
    ],
)
def test_source_options_are_validated(options, message) -> None:
    with pytest.raises(ConfigError, match=message):
        KafkaSourceConfig.from_options(options)


def test_streaming_rejects_ending_offsets() -> None:
    cfg = KafkaSourceConfig.from_options(
        {"kafka.bootstrap.servers": "b", "subscribe": "t", "endingoffsets": "latest"}
    )
    with pytest.raises(ConfigError, match="endingOffsets is not valid in streaming queries"):
        cfg.for_stream()
