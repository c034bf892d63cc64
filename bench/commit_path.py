"""A batch's records written to Kafka exactly once, two ways, on one broker and one local Spark
(issue 39, item 3): as the driver does today (``df.toArrow()``, then one transactional producer in
the driver's Python writing every record, with a marker) against the transactional writer on the
executors (``spark.kafka_writer.write_transactional``: one transaction per partition, in the
executors' JVMs). The rows are already encoded (topic, key, value, headers), as an update job's
per-group function leaves them, so only the hand-over and the writes differ.

    .venv/bin/python bench/commit_path.py [--records 200000] [--partitions 4] [--runs 5] [--master local[2]]

Prints seconds per batch (min/median/max) and records/s, and the ratio to the driver path;
both paths' output is read back read_committed and counted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import isolated_settings, summary, table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()

    from confluent_kafka import Consumer, Producer, TopicPartition
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from streamops.host import jars
    from streamops.kafka.admin import TopicSpec, ensure_topics
    from streamops.kafka.config import KafkaConfig
    from streamops.kafka.read import read_topic
    from streamops.platform import manager
    from streamops.spark.kafka_writer import write_transactional, writer_jar

    n = args.records
    with tempfile.TemporaryDirectory() as tmp:
        settings = isolated_settings(Path(tmp) / "home")
        manager.up(settings, only=["kafka"])
        try:
            kafka = KafkaConfig.plaintext(settings.kafka_bootstrap)
            ensure_topics(kafka, [TopicSpec(name=t, partitions=args.partitions) for t in ("driver-out", "exec-out")]
                          + [TopicSpec(name="bench-commits", partitions=1, config={"cleanup.policy": "compact"})])
            conf = dict(jars.spark_conf())
            conf["spark.jars"] = ",".join(filter(None, [conf.get("spark.jars"), str(writer_jar())]))
            builder = SparkSession.builder.master(args.master).config("spark.ui.enabled", "false")
            for k, v in conf.items():
                builder = builder.config(k, v)
            spark = builder.getOrCreate()
            base = (spark.range(args.records, numPartitions=args.partitions)
                    .select(F.concat(F.lit("k"), F.col("id").cast("string")).cast("binary").alias("key"),
                            F.concat(F.lit('{"n": '), F.col("id").cast("string"), F.lit('}')).cast("binary")
                            .alias("value"),
                            F.array(F.struct(F.lit("streamops.batch_id").alias("key"),
                                             F.lit(b"1").alias("value"))).alias("headers"))
                    .cache())
            base.count()
            producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "transactional.id": "bench-driver",
                                 "linger.ms": 5, "batch.num.messages": 10000,
                                 "queue.buffering.max.messages": 1_000_000})
            producer.init_transactions(30)
            consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "bench-driver"})
            group = consumer.consumer_group_metadata()
            consumer.close()
            times: dict[str, list[float]] = {"driver": [], "executors": []}
            for run in range(args.runs):
                for side in ("driver", "executors") if run % 2 == 0 else ("executors", "driver"):
                    t0 = time.perf_counter()
                    if side == "driver":  # what BatchSink and BatchCommitter do with a batch
                        table_ = base.withColumn("topic", F.lit("driver-out")).toArrow()
                        producer.begin_transaction()
                        for key, value, headers in zip(table_.column("key").to_pylist(),
                                                       table_.column("value").to_pylist(),
                                                       table_.column("headers").to_pylist()):
                            while True:
                                try:
                                    producer.produce("driver-out", key=key, value=value,
                                                     headers=[(h["key"], h["value"]) for h in headers])
                                    break
                                except BufferError:
                                    producer.poll(0.05)
                        producer.produce("bench-commits", key=b"bench", value=str(run).encode())
                        producer.send_offsets_to_transaction([TopicPartition("bench-commits", 0, run + 1)], group, 30)
                        producer.commit_transaction(60)
                    else:
                        write_transactional(base.withColumn("topic", F.lit("exec-out")), kafka=kafka,
                                            transactional_prefix="bench-exec", marker_topic="bench-commits",
                                            marker_group_prefix="bench-exec", batch_id=run)
                    times[side].append(time.perf_counter() - t0)
                    print(f"run {run + 1} {side}: {times[side][-1]:.2f} s", flush=True)
            producer.flush(30)
            spark.stop()
            # what a read_committed reader sees: every run's records once, on both sides
            written = {t: sum(1 for _ in read_topic(kafka, t)) for t in ("driver-out", "exec-out")}
            assert written == {"driver-out": n * args.runs, "exec-out": n * args.runs}, written
        finally:
            manager.down(settings)
    rows = []
    base_med = summary(times["driver"])[1]
    for side, label in (("driver", "driver: toArrow + one transactional producer in Python"),
                        ("executors", "executors: a transaction per partition, in the JVM")):
        lo, med, hi = summary(times[side])
        rows.append([label, f"{lo:.2f}", f"{med:.2f}", f"{hi:.2f}", f"{n / med:,.0f}", f"{med / base_med:.2f}"])
    print(f"\n{n:,} records in {args.partitions} partitions, master {args.master}, {args.runs} runs per side, "
          f"alternating; records read back read_committed: {written}\n")
    print(table(["path", "s/batch min", "median", "max", "records/s (median)", "ratio to driver"], rows))


if __name__ == "__main__":
    main()
