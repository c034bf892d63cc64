"""read_kafka / write_kafka_batch (streamops.spark.kafka_io) against Apache Kafka with a local
SparkSession that has Spark's own connector (``spark-sql-kafka-0-10``) on ``spark.jars``.

Exact records (keys, values, partitions, offsets, headers), offset specs and their errors,
maxOffsetsPerTrigger micro-batches, checkpoint restarts, new partitions, deleted records, client
options, read_committed, bounded streams (``stop_at_offsets`` + ``layout.clamp_batch_offsets``) and
Spark's Kafka sink. Ported from tests/integration/test_kafka_source.py (the removed Python source).
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from streamops.checkpoints import layout
from streamops.exceptions import UsageError
from streamops.kafka.config import KafkaConfig
from streamops.spark import kafka_io
from streamops.spark.kafka_io import (
    KAFKA_PROVIDER_CLASS,
    MAX_POLL_RECORDS,
    KafkaConnectorMissing,
    clamp_to_bound,
    jvm_class_exists,
    read_kafka,
    require_connector,
    write_kafka_batch,
)

#: the test broker's clients: PLAINTEXT, no client properties
plain = KafkaConfig.plaintext


class Rec(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple | None


# -- helpers -------------------------------------------------------------------------------------


def new_topic(bootstrap: str, partitions: int = 3, prefix: str = "src", config: dict | None = None) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
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


def _send(producer: Producer, topic: str, records: list[dict[str, Any]], acked: list[Rec],
          errors: list[str]) -> None:
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


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> list[Rec]:
    """Produce ``records`` (value, key, partition, headers, timestamp); what the broker acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    acked: list[Rec] = []
    errors: list[str] = []
    _send(producer, topic, records, acked, errors)
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

    @property
    def sizes(self) -> list[int]:
        return [len(rows) for _, rows in sorted(self.batches)]


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
    time.sleep(0.5)  # the JVM's console appender may still be writing
    return spark_log.text()


def client_config_dumps(text: str, kind: str) -> list[dict[str, str]]:
    """The configurations Kafka's Java clients logged (at INFO) when they were made."""
    return [
        {k: v for k, _, v in (line.strip("\t").partition(" = ") for line in m.group(1).splitlines())}
        for m in re.finditer(rf"INFO {kind}: {kind} values: *\n((?:\t[^\n]*\n)+)", text)
    ]


def batch(spark, kafka: str, topic: str | list[str], **kwargs):
    return read_kafka(spark, kafka=plain(kafka), subscribe=topic, streaming=False, **kwargs)


# -- batch reads ----------------------------------------------------------------------------------


def test_batch_read_earliest_to_latest_returns_exactly_the_produced_records(spark, kafka) -> None:
    topic = new_topic(kafka, 3)
    base = int(time.time() * 1000) - 60_000
    recs = records(90, 3)
    for i, r in enumerate(recs):
        r["timestamp"] = base + i
    produced = produce(kafka, topic, recs)
    assert {p for p, *_ in produced} == {0, 1, 2}

    df = batch(spark, kafka, topic, starting_offsets="earliest", ending_offsets="latest")
    # Spark's Kafka schema, headers included (read_kafka's default; Spark's own is without)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows = df.selectExpr("*", "unix_millis(timestamp) AS ts_ms").collect()
    assert to_recs(rows) == produced
    assert {r["topic"] for r in rows} == {topic}
    assert {r["timestampType"] for r in rows} == {0}  # CreateTime
    by_value = {bytes(r["value"]).decode(): r for r in rows}
    assert {v: by_value[v]["ts_ms"] for v in ("v0", "v44", "v89")} == {
        "v0": base, "v44": base + 44, "v89": base + 89}
    # defaults are earliest/latest too
    assert to_recs(batch(spark, kafka, topic).collect()) == produced


def test_batch_read_with_per_partition_json_offsets(spark, kafka) -> None:
    topic = new_topic(kafka, 3)
    produced = produce(kafka, topic, records(60, 3))  # 20 per partition: offsets 0..19
    df = batch(
        spark, kafka, topic,
        starting_offsets={topic: {0: 5, 1: -2, 2: 19}},  # -2: earliest
        ending_offsets=f'{{"{topic}": {{"0": 8, "1": 3, "2": -1}}}}',  # -1: latest
    )
    want = [
        r
        for r in produced
        if (r.partition == 0 and 5 <= r.offset < 8)
        or (r.partition == 1 and r.offset < 3)
        or (r.partition == 2 and r.offset == 19)
    ]
    assert len(want) == 3 + 3 + 1
    assert to_recs(df.collect()) == want
    # the (topic, partition) form is the same spec
    tuples = batch(spark, kafka, topic, starting_offsets={(topic, 0): 5, (topic, 1): -2, (topic, 2): 19},
                   ending_offsets={(topic, 0): 8, (topic, 1): 3, (topic, 2): -1})
    assert to_recs(tuples.collect()) == want


@pytest.mark.parametrize(
    "kwargs, message",
    [
        # Spark needs every partition of the subscribed topics, and no other
        (
            {"starting_offsets": '{"%(t)s": {"0": 1, "1": 1}}'},
            re.compile(r"Partitions specified for Kafka start offsets don't match what are assigned\. .*\n.*"
                       r"Use -1 for latest, -2 for earliest\.\nSpecified: Set\(%(t)s-0, %(t)s-1\) Assigned: Set\("),
        ),
        (
            {"starting_offsets": '{"other-topic": {"0": 1}}'},
            re.compile(r"Partitions specified for Kafka start offsets don't match what are assigned\. .*\n.*"
                       r"Use -1 for latest, -2 for earliest\.\nSpecified: Set\(other-topic-0\) Assigned: Set\("),
        ),
        # refused by read_kafka (Spark would fail in a task: "assertion failed: earliest offset -5 ...")
        (
            {"starting_offsets": '{"%(t)s": {"0": -5, "1": 0, "2": 0}}'},
            ("starting_offsets: offset -5 for %(t)s-0 is not valid: use an offset >= 0, -1 (latest) "
             "or -2 (earliest)"),
        ),
        (
            {"ending_offsets": {"%(t)s": {0: 1, 1: 1, 2: -3}}},
            "ending_offsets: offset -3 for %(t)s-2 is not valid",
        ),
        ({"starting_offsets": '{"%(t)s": {"0": 3'}, 'Expected e.g. {"topicA":{"0":23,"1":-1},'),
        ({"starting_offsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
        ({"ending_offsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
        (
            {"starting_offsets": '{"%(t)s": {"0": 1, "1": -1, "2": 0}}'},
            "startingOffsets for %(t)s-1 can't be latest for batch queries on Kafka",
        ),
        (
            {"starting_offsets": '{"%(t)s": {"0": 2, "1": 0, "2": 0}}',
             "ending_offsets": '{"%(t)s": {"0": 1, "1": 2, "2": 2}}'},
            "The specified start offset 2 is greater than the end offset 1 for topic %(t)s partition 0",
        ),
        # read_kafka's own checks
        ({"starting_offsets": {"%(t)s": 3}}, "starting_offsets: expected {topic: {partition: offset}}"),
        ({"ending_offsets": 7}, "ending_offsets must be 'earliest', 'latest', JSON text or a dict, got int"),
    ],
    ids=["missing-partition", "unsubscribed-topic", "below-minus-2-json", "below-minus-2-dict", "bad-json",
         "latest-start", "earliest-end", "latest-partition-start", "start-after-end", "bad-dict-shape",
         "bad-type"],
)
def test_batch_read_rejects_bad_offset_specs_with_clear_errors(spark, kafka, kwargs, message) -> None:
    topic = new_topic(kafka, 3)
    produce(kafka, topic, records(6, 3))  # offsets 0..1 in each partition

    def fill(v):
        if isinstance(v, str):
            return v % {"t": topic}
        if isinstance(v, dict):
            return {fill(k): v2 for k, v2 in v.items()}
        return v

    kwargs = {k: fill(v) for k, v in kwargs.items()}
    with pytest.raises(Exception) as info:
        batch(spark, kafka, topic, **kwargs).collect()
    text = str(info.value)
    if isinstance(message, re.Pattern):
        assert re.search(message.pattern % {"t": topic}, text), text[:1000]
    else:
        assert message % {"t": topic} in text


def test_batch_read_ending_past_the_latest_offset_fails_as_missing_records(spark, kafka) -> None:
    """Spark does not check an ending offset against the log end: the task polls for the missing
    records (kafkaConsumer.pollTimeoutMs, 120 s by default) and then reports them lost."""
    topic = new_topic(kafka, 3)
    produce(kafka, topic, records(6, 3))  # offsets 0..1 in each partition
    df = batch(spark, kafka, topic, ending_offsets={topic: {0: 99, 1: 0, 2: 0}},
               options={"kafkaConsumer.pollTimeoutMs": "3000"})
    with pytest.raises(Exception) as info:
        df.collect()
    assert f"Could not read records in offset [2, 99) for topic partition {topic}-0" in str(info.value)


# -- streaming ------------------------------------------------------------------------------------


def test_streaming_max_offsets_per_trigger_and_restart_from_checkpoint(spark, kafka, tmp_path) -> None:
    topic = new_topic(kafka, 3)
    first = records(120, 3) + [{"value": f"extra{i}", "partition": 0} for i in range(60)]  # 100/40/40
    produced = produce(kafka, topic, first)
    ckpt = tmp_path / "ckpt"
    stream = partial(
        read_kafka,
        spark,
        kafka=plain(kafka),
        subscribe=topic,
        starting_offsets="earliest",
        max_offsets_per_trigger=70,
    )

    sink = BatchCollector()
    run_stream(stream(), ckpt, sink)
    # Spark splits the limit in proportion to each partition's backlog, rounded down:
    # 70 * 100/180 -> 38, 70 * 40/180 -> 15 (68), then 70 * 62/112 -> 38, 70 * 25/112 -> 15 (68), then 44
    assert sink.sizes == [68, 68, 44]
    assert [b for b, _ in sorted(sink.batches)] == [0, 1, 2]
    assert sink.all == produced  # exactly once: no loss, no duplicates
    first_batch = min(sink.batches)[1]
    per_part = {p: [r.offset for r in first_batch if r.partition == p] for p in range(3)}
    assert per_part == {0: list(range(38)), 1: list(range(15)), 2: list(range(15))}
    assert layout.batch_end_offsets(ckpt, 2) == {topic: {"0": 100, "1": 40, "2": 40}}

    # restart from the checkpoint: only the new records, once
    more = produce(kafka, topic, records(30, 3, tag="late"))
    sink2 = BatchCollector()
    run_stream(stream(), ckpt, sink2)
    assert sink2.all == more
    assert [b for b, _ in sink2.batches] == [3]
    assert layout.batch_end_offsets(ckpt, 3) == {topic: {"0": 110, "1": 50, "2": 50}}


def test_streaming_available_now_honours_max_offsets_per_trigger(spark, kafka, tmp_path) -> None:
    topic = new_topic(kafka, 2)
    produced = produce(kafka, topic, records(50, 2))
    sink = BatchCollector()
    df = read_kafka(
        spark,
        kafka=plain(kafka),
        subscribe=topic,
        starting_offsets="earliest",
        max_offsets_per_trigger=20,
    )
    run_stream(df, tmp_path / "ckpt", sink, availableNow=True)
    assert sink.sizes == [20, 20, 10]
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

    assert to_recs(batch(spark, kafka, topic, starting_timestamp=cutoff).collect()) == want

    sink = BatchCollector()
    run_stream(
        read_kafka(spark, kafka=plain(kafka), subscribe=topic, starting_timestamp=cutoff),
        tmp_path / "c",
        sink,
    )
    assert sink.all == want

    future = base + 3_600_000 * 2
    with pytest.raises(Exception) as info:
        batch(spark, kafka, topic, starting_timestamp=future).collect()
    assert re.search(rf"No offset matched from request of topic-partition {topic}-\d and timestamp {future}",
                     str(info.value))
    latest = batch(spark, kafka, topic, starting_timestamp=future,
                   options={"startingOffsetsByTimestampStrategy": "latest"})
    assert latest.collect() == []


def test_new_partition_added_mid_stream_is_read_from_its_earliest(spark, kafka, tmp_path) -> None:
    topic = new_topic(kafka, 2)
    before = produce(kafka, topic, records(20, 2))
    sink = BatchCollector()
    df = read_kafka(spark, kafka=plain(kafka), subscribe=topic, starting_offsets="earliest")
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
        kafka=plain(kafka),
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


def test_deleted_records_are_skipped_with_a_warning_when_fail_on_data_loss_is_false(
    spark, kafka, spark_log, tmp_path
) -> None:
    topic, stream, ckpt, rest = _loss_setup(kafka, spark, tmp_path, fail_on_data_loss=False)
    sink = BatchCollector()
    run_stream(stream(), ckpt, sink)
    assert sink.all == [r for r in rest if r.offset >= 30]
    text = log_text(spark_log)
    lost = re.search(rf"WARN KafkaDataConsumer: Cannot fetch offset 10\(GroupId: [^,]+, TopicPartition: {topic}-0\)",
                     text)
    assert lost, text[-3000:]
    assert "WARN KafkaDataConsumer: Some data may be lost. Recovering from the earliest offset: 30" in \
        text[lost.end():]

    # batch reads follow the same rule
    spec = {topic: {0: 5}}
    df = batch(spark, kafka, topic, starting_offsets=spec, fail_on_data_loss=False)
    assert [r.offset for r in to_recs(df.collect())] == list(range(30, 50))
    with pytest.raises(Exception) as info:
        batch(spark, kafka, topic, starting_offsets=spec).collect()
    assert f"Could not read records in offset [5, 50) for topic partition {topic}-0" in str(info.value)


def test_deleted_records_fail_the_query_when_fail_on_data_loss_is_true(spark, kafka, tmp_path) -> None:
    from pyspark.errors import StreamingQueryException

    topic, stream, ckpt, _rest = _loss_setup(kafka, spark, tmp_path, fail_on_data_loss=True)
    sink = BatchCollector()
    with pytest.raises(StreamingQueryException) as info:
        run_stream(stream(), ckpt, sink)
    message = str(info.value)
    assert f"Could not read records in offset [10, 50) for topic partition {topic}-0" in message
    assert "set the source option failOnDataLoss to false" in message
    assert sink.all == []
    assert layout.last_committed_batch(ckpt) == 0  # the failed batch is not committed


def test_kafka_prefixed_options_reach_the_client(spark, kafka, spark_log, tmp_path) -> None:
    topic = new_topic(kafka, 2)
    produced = produce(kafka, topic, records(10, 2))
    client_id = f"streamops-it-{uuid.uuid4().hex[:8]}"
    opts = {"kafka.client.id": client_id}
    jvm = spark._jvm
    log4j = jvm.org.apache.logging.log4j
    configurator = log4j.core.config.Configurator
    was = log4j.LogManager.getLogger("org.apache.kafka").getLevel()
    configurator.setLevel("org.apache.kafka", log4j.Level.INFO)  # the clients log their client id
    try:
        assert to_recs(batch(spark, kafka, topic, options=opts).collect()) == produced
        sink = BatchCollector()
        run_stream(
            read_kafka(spark, kafka=plain(kafka), subscribe=topic, starting_offsets="earliest",
                       options=opts),
            tmp_path / "ckpt",
            sink,
        )
        assert sink.all == produced
    finally:
        configurator.setLevel("org.apache.kafka", was)
    text = log_text(spark_log)
    # the driver's admin client and the executors' consumers were made with it: the batch read's and
    # the stream's, each consumer with read_kafka's default isolation level
    admins = [c for c in client_config_dumps(text, "AdminClientConfig") if c["client.id"] == client_id]
    consumers = [c for c in client_config_dumps(text, "ConsumerConfig") if c["client.id"] == client_id]
    assert len(admins) >= 2, text[-3000:]
    assert {c["group.id"].split("-")[2] for c in consumers} == {"relation", "source"}
    assert {c["isolation.level"] for c in consumers} == {"read_committed"}
    assert {c["max.poll.records"] for c in consumers} == {str(MAX_POLL_RECORDS)}  # not the client's 500
    assert re.search(rf"\[Consumer clientId={client_id}, groupId=spark-kafka-source-[^]]+\] Seeking to offset 0 "
                     rf"for partition {topic}-1", text)

    # the Java client validates what it is given
    with pytest.raises(Exception, match="Invalid value bogus for configuration client.dns.lookup"):
        batch(spark, kafka, topic, options={"kafka.client.dns.lookup": "bogus"}).collect()
    # Spark refuses what would break its offset tracking
    with pytest.raises(Exception, match="Kafka option 'auto.offset.reset' is not supported"):
        batch(spark, kafka, topic, options={"kafka.auto.offset.reset": "earliest"}).collect()


# -- read_committed -------------------------------------------------------------------------------


def test_reads_are_read_committed_by_default(spark, kafka) -> None:
    """Records of an open transaction and of an aborted one are not read; a committed one's are."""
    topic = new_topic(kafka, 2, prefix="txn")
    txn = Producer({"bootstrap.servers": kafka, "transactional.id": f"it-{uuid.uuid4().hex[:8]}",
                    "linger.ms": 5})
    txn.init_transactions(30)
    acked: dict[str, list[Rec]] = {}

    def transaction(tag: str, end: str | None) -> None:
        got: list[Rec] = []
        errors: list[str] = []
        txn.begin_transaction()
        _send(txn, topic, records(6, 2, tag=tag), got, errors)
        assert txn.flush(30) == 0  # in the log before the transaction ends
        assert not errors, errors
        acked[tag] = sorted(got)
        if end == "commit":
            txn.commit_transaction(30)
        elif end == "abort":
            txn.abort_transaction(30)

    try:
        transaction("a", "commit")
        transaction("b", "abort")
        transaction("c", "commit")
        transaction("d", None)  # left open
        # each transaction: 3 records and a marker per partition
        assert [r.offset for r in acked["c"] if r.partition == 0] == [8, 9, 10]
        assert [r.offset for r in acked["d"] if r.partition == 1] == [12, 13, 14]

        assert to_recs(batch(spark, kafka, topic).collect()) == sorted(acked["a"] + acked["c"])
        # a consumer that asks for read_uncommitted sees everything, the open and the aborted too
        uncommitted = batch(spark, kafka, topic, options={"kafka.isolation.level": "read_uncommitted"})
        assert to_recs(uncommitted.collect()) == sorted(r for recs in acked.values() for r in recs)

        txn.commit_transaction(30)
        assert to_recs(batch(spark, kafka, topic).collect()) == sorted(acked["a"] + acked["c"] + acked["d"])
    finally:
        with contextlib.suppress(KafkaException):  # a failure above may leave one open
            txn.abort_transaction(10)


# -- bounded streams ------------------------------------------------------------------------------


def test_stop_at_offsets_bounds_a_stream_and_a_clamped_checkpoint_continues_at_the_bound(
    spark, kafka, tmp_path
) -> None:
    topic = new_topic(kafka, 2, prefix="bound")
    produced = produce(kafka, topic, records(40, 2))  # offsets 0..19 in each partition
    ckpt = tmp_path / "ckpt"
    stream = partial(read_kafka, spark, kafka=plain(kafka), subscribe=topic, starting_offsets="earliest",
                     max_offsets_per_trigger=16)

    first = {topic: {"0": 18, "1": 12}}
    sink = BatchCollector()
    run_stream(stream(stop_at_offsets=first), ckpt, sink)
    # batches plan 0..8, 8..16 and 16..20 in each partition: the second passes partition 1's bound,
    # the third partition 0's; nothing at or past the bound reaches the query
    assert sink.sizes == [16, 12, 2]
    below_first = [r for r in produced if r.offset < int(first[topic][str(r.partition)])]
    assert sink.all == below_first
    last = layout.last_committed_batch(ckpt)
    assert last == 2
    planned = layout.batch_end_offsets(ckpt, last)
    assert planned == {topic: {"0": 20, "1": 20}}  # planned past the bound
    assert clamp_to_bound(planned, first) == first

    assert layout.clamp_batch_offsets(ckpt, last, first) is True
    assert layout.batch_end_offsets(ckpt, last) == first
    assert not (ckpt / "offsets" / f".{last}.crc").exists()  # a stale checksum would fail Spark's read
    assert layout.next_offsets(ckpt) == {(topic, 0): 18, (topic, 1): 12}
    assert layout.clamp_batch_offsets(ckpt, last, first) is False  # already there

    # the next range, on the same checkpoint: from the first bound to the second, no gap, no duplicate
    more = produce(kafka, topic, records(20, 2, tag="more", start=40))  # offsets 20..29
    second = {(topic, 0): 26, (topic, 1): 25}
    sink2 = BatchCollector()
    run_stream(stream(stop_at_offsets=second), ckpt, sink2)
    everything = sorted(produced + more)
    assert sink2.all == [r for r in everything
                         if int(first[topic][str(r.partition)]) <= r.offset < second[(topic, r.partition)]]
    assert len(sink2.all) == 8 + 13
    assert min(b for b, _ in sink2.batches) == 3
    assert sorted(sink.all + sink2.all) == [r for r in everything if r.offset < second[(topic, r.partition)]]


# -- writing --------------------------------------------------------------------------------------


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
    write_kafka_batch(spark.createDataFrame(data, schema).repartition(3), kafka=plain(kafka))

    back = batch(spark, kafka, [a, b]).collect()
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
    parts: dict[tuple, set[int]] = {}
    for r in back:
        parts.setdefault((r["topic"], _bytes(r["key"])), set()).add(r["partition"])
    assert all(len(p) == 1 for k, p in parts.items() if k[1] is not None)


def test_write_kafka_batch_inside_foreach_batch_pipes_a_stream(spark, kafka, tmp_path) -> None:
    src, dst = new_topic(kafka, 3), new_topic(kafka, 2, prefix="out")
    produced = produce(kafka, src, records(45, 3))

    def sink(df, batch_id: int) -> None:
        write_kafka_batch(
            df.selectExpr("key", "upper(cast(value as string)) as value", "headers"),
            kafka=plain(kafka),
            topic=dst,
        )

    q = (
        read_kafka(
            spark,
            kafka=plain(kafka),
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
    back = batch(spark, kafka, dst).collect()
    got = sorted(((_bytes(r["key"]), bytes(r["value"]), to_recs([r])[0].headers) for r in back), key=repr)
    want = sorted(((r.key, r.value.upper(), r.headers) for r in produced), key=repr)
    assert got == want


def test_write_kafka_batch_raises_on_delivery_errors(spark, kafka) -> None:
    # the broker refuses a record larger than the topic allows: a delivery error, after the send
    topic = new_topic(kafka, 1, prefix="out", config={"max.message.bytes": "2000"})
    big = spark.createDataFrame([("k", "x" * 10_000)], "key string, value string")
    with pytest.raises(Exception, match="RecordTooLargeException"):
        write_kafka_batch(big, kafka=plain(kafka), topic=topic)
    # a partition the topic does not have (producer_config reaches the producer: no 60 s wait)
    df = spark.createDataFrame([("k", "v", 7)], "key string, value string, partition int")
    with pytest.raises(Exception, match=f"Partition 7 of topic {topic} with partition count 1 is not present "
                                        f"in metadata after 3000 ms"):
        write_kafka_batch(df, kafka=plain(kafka), topic=topic, producer_config={"max.block.ms": 3000})
    assert batch(spark, kafka, topic).collect() == []  # nothing was written
    with pytest.raises(UsageError, match="needs a 'value' column"):
        write_kafka_batch(df.drop("value"), kafka=plain(kafka), topic=topic)
    with pytest.raises(UsageError, match="topic=... or a 'topic' column"):
        write_kafka_batch(df, kafka=plain(kafka))


# -- argument checks (no broker, no query) --------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"ending_offsets": "latest"}, "ending_offsets is only valid for batch reads (streaming=False)"),
        ({"streaming": False, "stop_at_offsets": {"t": {0: 1}}},
         "stop_at_offsets is only valid for streaming reads; batch reads use ending_offsets"),
        ({"streaming": False, "max_offsets_per_trigger": 5},
         "max_offsets_per_trigger is only valid for streaming reads (streaming=True)"),
        ({"max_offsets_per_trigger": 0}, "max_offsets_per_trigger must be >= 1, got 0"),
        ({"options": {"kafka.bootstrap.servers": "b:9092"}},
         "options ['kafka.bootstrap.servers'] repeat keyword arguments of read_kafka"),
        ({"max_offsets_per_trigger": 5, "options": {"maxoffsetspertrigger": "9"}},
         "options ['maxoffsetspertrigger'] repeat keyword arguments of read_kafka"),
        ({"kafka": plain("")}, "a bootstrap address is required"),
    ],
    ids=["streaming-ending", "batch-stop-at", "batch-max-offsets", "max-offsets-0", "option-clash",
         "option-clash-case", "no-bootstrap"],
)
def test_read_kafka_refuses_bad_arguments_before_touching_spark(kwargs, message) -> None:
    args = {"kafka": plain("b:9092"), "subscribe": "t", **kwargs}
    with pytest.raises(UsageError) as info:
        read_kafka(None, **args)  # never reaches the session
    assert message in str(info.value)
    assert info.value.exit_code == 2


def test_streaming_rejects_ending_offsets_given_as_a_spark_option(spark, kafka) -> None:
    with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
        read_kafka(spark, kafka=plain(kafka), subscribe="t", options={"endingOffsets": "latest"})


def test_write_kafka_batch_refuses_bad_options(spark) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(UsageError, match=re.escape("options ['acks']: sink options must be 'kafka.'-prefixed")):
        write_kafka_batch(df, kafka=plain("b:9092"), topic="t", options={"acks": "all"})
    with pytest.raises(UsageError, match="pass the brokers once"):
        write_kafka_batch(df, kafka=plain("b:9092"), topic="t", producer_config={"bootstrap.servers": "c"})
    with pytest.raises(UsageError, match=re.escape("unexpected columns ['extra']")):
        write_kafka_batch(df.selectExpr("value", "1 AS extra"), kafka=plain("b:9092"), topic="t")


# -- the connector on the classpath ---------------------------------------------------------------

MISSING = ("Spark's Kafka connector (spark-sql-kafka-0-10) is not on this session's classpath: build the "
           "session with streamops.host.jars.spark_conf() (spark.jars)")


def test_the_connector_probe(spark) -> None:
    assert jvm_class_exists(spark, KAFKA_PROVIDER_CLASS)
    assert jvm_class_exists(spark, "org.apache.spark.sql.SparkSession")
    assert not jvm_class_exists(spark, "org.apache.spark.sql.kafka010.NoSuchProvider")
    require_connector(spark)  # this session has it


def test_a_session_without_the_connector_gives_kafka_connector_missing(spark, monkeypatch) -> None:
    from py4j.protocol import Py4JError

    # no JVM at all (Spark Connect), and a JVM whose loader lacks the class
    def no_class(*_a):
        raise Py4JError("java.lang.ClassNotFoundException: " + KAFKA_PROVIDER_CLASS)

    lang = SimpleNamespace(Thread=SimpleNamespace(currentThread=lambda: SimpleNamespace(
        getContextClassLoader=lambda: None)), Class=SimpleNamespace(forName=no_class))
    for session in (SimpleNamespace(), SimpleNamespace(_jvm=SimpleNamespace(java=SimpleNamespace(lang=lang)))):
        assert jvm_class_exists(session, KAFKA_PROVIDER_CLASS) is False
        with pytest.raises(KafkaConnectorMissing) as info:
            require_connector(session)
        assert str(info.value) == MISSING
        assert info.value.exit_code == 1 and isinstance(info.value, UsageError)

    # read_kafka and write_kafka_batch check before they build anything
    monkeypatch.setattr(kafka_io, "jvm_class_exists", lambda s, name: name != KAFKA_PROVIDER_CLASS)
    for streaming in (True, False):
        with pytest.raises(KafkaConnectorMissing, match=re.escape(MISSING)):
            read_kafka(spark, kafka=plain("b:9092"), subscribe="t", streaming=streaming)
    with pytest.raises(KafkaConnectorMissing, match=re.escape(MISSING)):
        write_kafka_batch(spark.createDataFrame([("v",)], "value string"), kafka=plain("b:9092"),
                          topic="t")
