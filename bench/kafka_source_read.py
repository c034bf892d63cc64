"""Read throughput of the ``streamops_kafka`` source: Arrow record batches vs tuples.

    .venv/bin/python bench/kafka_source_read.py [--records 1000000] [--partitions 6] [--runs 3]

Starts its own broker (temporary state dir, free ports; stopped in ``finally``), produces
``--records`` small JSON events to a topic with ``--partitions`` partitions, then on a
``local[2]`` SparkSession times two batch queries per mode (``arrowBatches=true`` / ``false``):

- ``count``: ``read_kafka(...).count()``,
- ``parse``: ``cast(value as string)`` + ``from_json`` + an aggregate over a parsed field (so the
  parse can't be optimized away).

Modes are interleaved per run; one untimed warm-up per mode starts the Python workers first.
Reports records/s (min / median / max over the runs) and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import isolated_settings, summary, table
from streamops.platform import manager

EVENT_SCHEMA = "user_id string, event_type string, amount double, ts long"


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> float:
    """Create the topic and produce ``n`` JSON events; returns the sum of ``amount`` (to check)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(timeout=30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "none",
        }
    )
    base_ts = int(time.time() * 1000)
    total = 0.0
    types = ("login", "purchase", "view")
    for i in range(n):
        amount = (i % 1000) / 4
        total += amount
        event = {"user_id": f"u{i % 50_000:05d}", "event_type": types[i % 3], "amount": amount, "ts": base_ts + i}
        value = json.dumps(event, separators=(",", ":"))
        while True:
            try:
                producer.produce(topic, key=event["user_id"], value=value)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise SystemExit("records left undelivered after 120 s")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe"})
    try:
        have = sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    finally:
        c.close()
    if have != n:
        raise SystemExit(f"topic holds {have} records, expected {n}")
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="streamops-bench-kafka-") as tmp:
        settings = isolated_settings(Path(tmp) / "home")
        spark = None
        try:
            manager.up(settings, only=["kafka"])
            bootstrap = settings.kafka_bootstrap
            topic = "bench-read"
            t0 = time.monotonic()
            expected_sum = produce(bootstrap, topic, args.records, args.partitions)
            produce_s = time.monotonic() - t0
            print(f"produced {args.records} records to {args.partitions} partitions in {produce_s:.1f} s", flush=True)

            from pyspark.sql import SparkSession
            from pyspark.sql import functions as F

            from streamops.spark.kafka_io import read_kafka

            spark = (
                SparkSession.builder.master("local[2]")
                .appName("bench-kafka-source-read")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.driver.memory", "2g")
                .config("spark.ui.showConsoleProgress", "false")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")

            def frame(arrow: bool):
                return read_kafka(
                    spark,
                    bootstrap_servers=bootstrap,
                    subscribe=topic,
                    streaming=False,
                    options={"arrowBatches": arrow},
                )

            def run_count(arrow: bool) -> float:
                t = time.monotonic()
                n = frame(arrow).count()
                elapsed = time.monotonic() - t
                assert n == args.records, n
                return elapsed

            def run_parse(arrow: bool) -> float:
                t = time.monotonic()
                row = (
                    frame(arrow)
                    .selectExpr("cast(value as string) as v")
                    .select(F.from_json("v", EVENT_SCHEMA).alias("e"))
                    .agg(F.count("e.user_id").alias("n"), F.sum("e.amount").alias("amount"))
                    .collect()[0]
                )
                elapsed = time.monotonic() - t
                assert row["n"] == args.records and abs(row["amount"] - expected_sum) < 1e-6 * expected_sum, row
                return elapsed

            modes = {"arrow": True, "tuples": False}
            for arrow in modes.values():  # warm-up: Python worker start-up is not measured
                run_count(arrow)
            times: dict[tuple[str, str], list[float]] = {(m, q): [] for m in modes for q in ("count", "parse")}
            for run in range(args.runs):
                for mode, arrow in modes.items():
                    times[(mode, "count")].append(run_count(arrow))
                    times[(mode, "parse")].append(run_parse(arrow))
                    print(
                        f"run {run + 1} {mode}: count {times[(mode, 'count')][-1]:.1f} s, "
                        f"parse {times[(mode, 'parse')][-1]:.1f} s",
                        flush=True,
                    )

            rows = []
            medians: dict[tuple[str, str], float] = {}
            for (mode, query), secs in times.items():
                rates = sorted(args.records / s for s in secs)
                lo, med, hi = summary(rates)
                medians[(mode, query)] = med
                rows.append([query, mode, f"{lo:,.0f}", f"{med:,.0f}", f"{hi:,.0f}"])
            rows.sort()
            print()
            print(
                f"{args.records:,} records, {args.partitions} partitions, local[2], {os.cpu_count()} CPUs, "
                f"load average at end {os.getloadavg()[0]:.1f}"
            )
            print(table(["query", "mode", "records/s min", "median", "max"], rows))
            for query in ("count", "parse"):
                ratio = medians[("arrow", query)] / medians[("tuples", query)]
                print(f"{query}: arrow / tuples (medians) = {ratio:.2f}x")
        finally:
            if spark is not None:
                spark.stop()
            manager.down(settings)


if __name__ == "__main__":
    main()
