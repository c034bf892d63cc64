"""A streaming read of Spark's Kafka connector alone, by source option: how fast a query drains a
backlog when each batch only counts its rows (issue 39: is the read what holds a batch?).

    .venv/bin/python bench/kafka_read.py [--events 300000] [--batch 50000] [--runs 2] \
        [--variants default,poll=500,poll=5000,poll=20000] [--stage read|parse]

One broker (temporary state dir, free ports; stopped in ``finally``) with ``--events``
``user_activity`` records in 6 partitions (``streamops produce``). Per run and variant, in
alternating order, a fresh JVM (``local[2]``, the app's RocksDB settings) runs a streaming query
from the earliest offsets, ``maxOffsetsPerTrigger`` = ``--batch``, trigger as fast as possible, to
the end of the input: ``read`` counts the rows of ``read_kafka``'s DataFrame; ``parse`` counts those
of ``user_activity``'s parse stage over it. A variant is ``default`` (``read_kafka``'s own options)
or ``poll=N`` (``kafka.max.poll.records``=N). Steady = records of batches 2..n / their
triggerExecution. The table gives min/median/max over runs and the ratio to the first variant.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import isolated_settings, summary, table


def child(args: argparse.Namespace) -> None:
    """One variant's query in this process (its own JVM)."""
    from pyspark.sql import SparkSession

    from jobs.user_activity import UserActivity
    from streamops.arrow import parsed_arrow_schema
    from streamops.host import jars
    from streamops.kafka.config import KafkaConfig
    from streamops.spark.kafka_io import read_kafka
    from streamops.spark.query.plan import _ddl
    from streamops.spark.query.worker import parse_aggregate
    from streamops.spark.session import ROCKSDB_PROVIDER

    builder = (SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "4")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER))
    for k, v in jars.spark_conf().items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    options = {} if args.variant == "default" else {"kafka.max.poll.records": args.variant.split("=", 1)[1]}
    raw = read_kafka(spark, kafka=KafkaConfig.plaintext(args.bootstrap), subscribe="user-events",
                     starting_offsets="earliest", max_offsets_per_trigger=args.batch, options=options)
    cols = raw.select("key", "value", "topic", "partition", "offset", "timestamp")
    if args.stage == "parse":  # the app's own parse stage (``JobQuery._build_aggregate``'s mapInArrow)
        schema = parsed_arrow_schema(UserActivity)
        cols = cols.mapInArrow(parse_aggregate(UserActivity, schema), _ddl(schema))
    query = (cols.writeStream.foreachBatch(lambda df, _bid: df.count())
             .option("checkpointLocation", tempfile.mkdtemp(prefix="kafka-read-")).trigger(processingTime="0 seconds")
             .start())
    while sum(p["numInputRows"] for p in query.recentProgress) < args.events:
        time.sleep(0.05)
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    query.stop()
    steady = batches[1:]
    rate = sum(p["numInputRows"] for p in steady) / sum(p["durationMs"]["triggerExecution"] / 1000 for p in steady)
    add = statistics.median(p["durationMs"]["addBatch"] for p in steady)
    print(json.dumps({"steady": rate, "add_batch_ms": add, "batches": len(batches)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--batch", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--variants", default="default,poll=500,poll=5000,poll=20000")
    ap.add_argument("--stage", choices=("read", "parse"), default="read")
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.variant:
        return child(args)

    from streamops.kafka.admin import TopicSpec, recreate_topic
    from streamops.platform import manager

    variants = args.variants.split(",")
    got: dict[str, list[dict]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="streamops-bench-") as tmp:
        settings = isolated_settings(Path(tmp) / "home")
        try:
            manager.up(settings, only=["kafka"])
            boot = settings.kafka_bootstrap
            recreate_topic(boot, TopicSpec(name="user-events", partitions=6))
            subprocess.run([sys.executable, "-m", "streamops.cli", "produce", "user-events", "--events",
                            str(args.events), "--users", "10000", "--seed", "1", "--bootstrap", boot, "--json"],
                           check=True, capture_output=True)
            env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)}
            for run in range(args.runs):
                for v in variants if run % 2 == 0 else variants[::-1]:
                    r = subprocess.run([sys.executable, __file__, "--variant", v, "--bootstrap", boot, "--events",
                                        str(args.events), "--batch", str(args.batch), "--stage", args.stage],
                                       env=env, capture_output=True, text=True, check=False)
                    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
                    if r.returncode != 0 or not lines:
                        raise SystemExit(f"{v} failed ({r.returncode}): {r.stderr[-3000:]}")
                    got[v].append(json.loads(lines[-1]))
                    print(f"run {run + 1} {v}: {got[v][-1]}", file=sys.stderr, flush=True)
        finally:
            manager.down(settings)

    base = statistics.median(d["steady"] for d in got[variants[0]])
    rows = []
    for v in variants:
        lo, med, hi = summary([d["steady"] for d in got[v]])
        add = statistics.median(d["add_batch_ms"] for d in got[v])
        rows.append([v, f"{lo:,.0f}", f"{med:,.0f}", f"{hi:,.0f}", f"{add:,.0f}", f"{med / base:.2f}"])
    print(f"# bench/kafka_read.py — {args.stage}, {args.events:,} records, {args.batch:,} per batch, "
          f"{args.runs} run(s), local[2]\n")
    print(table(["variant", "steady records/s min", "median", "max", "addBatch ms (median)",
                 f"ratio to {variants[0]}"], rows))


if __name__ == "__main__":
    main()
