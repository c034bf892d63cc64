"""The transactional writer on the executors (``spark.kafka_writer``, issue 39 item 3) on Apache
Kafka and a local Spark of its own (its jar must be on ``spark.jars`` beside the Kafka client, so
the run is a process of its own): each partition's records commit in their own transaction with
the batch as its group offset; a batch written again writes nothing; a zombie holding a partition's
transactional id is fenced by the retried task, and its open records never show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(600)

SCRIPT = textwrap.dedent('''
    import json, sys
    from confluent_kafka import Consumer, Producer, TopicPartition
    from pyspark.sql import SparkSession
    from streamops.host import jars
    from streamops.kafka.admin import TopicSpec, ensure_topics
    from streamops.kafka.config import KafkaConfig
    from streamops.kafka.read import read_topic
    from streamops.spark.kafka_writer import write_transactional, writer_jar

    bootstrap = sys.argv[1]
    kafka = KafkaConfig.plaintext(bootstrap)
    ensure_topics(kafka, [TopicSpec(name="w-out", partitions=3),
                          TopicSpec(name="w-commits", partitions=1, config={"cleanup.policy": "compact"})])
    conf = dict(jars.spark_conf())
    conf["spark.jars"] = ",".join([conf["spark.jars"], str(writer_jar())]) if "spark.jars" in conf else str(writer_jar())
    builder = SparkSession.builder.master("local[2,4]").config("spark.ui.enabled", "false")
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    out = {}

    def batch(b, n=300):
        rows = [("w-out", f"k{i}".encode(), f"b{b}-{i}".encode(), [("batch", str(b).encode())]) for i in range(n)]
        df = spark.createDataFrame(rows, "topic string, key binary, value binary, headers array<struct<key:string,value:binary>>")
        write_transactional(df.repartition(3), kafka=kafka, transactional_prefix="w-tx", marker_topic="w-commits",
                            marker_group_prefix="w-marker", batch_id=b)

    def values():
        return sorted(m.value().decode() for m in read_topic(kafka, "w-out"))

    def markers():
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": bootstrap})
        got = {}
        for p in range(3):
            fut = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(f"w-marker-p{p}", [TopicPartition("w-commits", 0)])])[f"w-marker-p{p}"]
            tp = fut.result(30).topic_partitions[0]
            got[p] = tp.offset
        return got

    batch(0); out["after_0"] = values(); out["markers_0"] = markers()
    batch(0); out["again_0"] = values()
    batch(1); out["after_1"] = values()
    # a zombie takes partition 0's transactional id and leaves a transaction open with one record
    zombie = Producer({"bootstrap.servers": bootstrap, "transactional.id": "w-tx-p0"})
    zombie.init_transactions(30); zombie.begin_transaction()
    zombie.produce("w-out", key=b"zombie", value=b"zombie", partition=0); zombie.flush(30)
    def failed_tasks(group):
        tracker = spark.sparkContext.statusTracker()
        return sum(tracker.getStageInfo(st).numFailedTasks for j in tracker.getJobIdsForGroup(group)
                   for st in tracker.getJobInfo(j).stageIds)

    spark.sparkContext.setJobGroup("b2", "batch 2")
    batch(2); out["after_2"] = values(); out["markers_2"] = markers(); out["failed_2"] = failed_tasks("b2")
    try:
        zombie.commit_transaction(30); out["zombie"] = "committed"
    except Exception as exc:
        out["zombie"] = type(exc).__name__ + ": " + str(exc)[:200]
    out["final"] = values()
    # partition 1 runs elsewhere meanwhile (another executor): its producer there fences this
    # executor's and commits batch 3; here, batch 3's task of partition 1 finds its cached producer
    # fenced before it reads a row, and a new one reads the marker: it writes nothing, and no task fails
    other = Producer({"bootstrap.servers": bootstrap, "transactional.id": "w-tx-p1"})
    other.init_transactions(30); other.begin_transaction()
    other.produce("w-out", key=b"moved", value=b"moved-3", partition=1)
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "w-marker-p1"}).consumer_group_metadata()
    other.send_offsets_to_transaction([TopicPartition("w-commits", 0, 3)], group, 30)
    other.commit_transaction(30)
    spark.sparkContext.setJobGroup("b3", "batch 3")
    batch(3); out["after_3"] = values(); out["markers_3"] = markers(); out["failed_3"] = failed_tasks("b3")
    print(json.dumps(out))
    spark.stop()
''')


def test_each_partition_commits_once_per_batch_and_a_zombie_is_fenced(kafka: str, tmp_path) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    run = subprocess.run([sys.executable, "-c", SCRIPT, kafka], env=env, capture_output=True, text=True,
                         timeout=540, cwd=tmp_path, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    batch = {b: sorted(f"b{b}-{i}" for i in range(300)) for b in range(3)}
    assert out["after_0"] == batch[0]
    assert out["markers_0"] == {str(p): 0 for p in range(3)}
    assert out["again_0"] == batch[0]  # written again: every partition skipped it
    assert out["after_1"] == sorted(batch[0] + batch[1])
    assert out["after_2"] == sorted(batch[0] + batch[1] + batch[2])  # the retried task fenced the zombie
    assert out["markers_2"] == {str(p): 2 for p in range(3)}
    assert out["zombie"] != "committed" and out["final"] == out["after_2"]  # its record never shows
    # the fenced producer was found before the commit: a new one, not a failed (and recomputed) task
    assert out["failed_2"] == 0
    new = [v for v in out["after_3"] if v not in out["after_2"]]
    assert "moved-3" in new and len([v for v in new if v.startswith("b3-")]) == 200  # partition 1's 100 skipped
    assert out["markers_3"] == {str(p): 3 for p in range(3)} and out["failed_3"] == 0
