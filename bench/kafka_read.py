"""A streaming read of Spark's Kafka connector alone, by source option: how fast a query drains a
backlog when each batch only counts its rows (issue 39: is the read what holds a batch?).

    .venv/bin/python bench/kafka_read.py [--events 300000] [--batch 50000] [--runs 2] \
        [--variants default,poll=500,poll=5000,poll=20000] [--stage read,parse,sql-regexp,sql-json]

One broker (temporary state dir, free ports; stopped in ``finally``) with ``--events``
``user_activity`` records in 6 partitions (``streamops produce``). Per run and variant, in
alternating order, a fresh JVM (``local[2]``, the app's RocksDB settings) runs a streaming query
from the earliest offsets, ``maxOffsetsPerTrigger`` = ``--batch``, trigger as fast as possible, to
the end of the input: ``read`` counts the rows of ``read_kafka``'s DataFrame; ``parse`` counts those
of ``user_activity``'s parse stage over it (Python: ``parse_arrow``'s regex in Arrow, the rest per
record); ``sql-regexp`` and ``sql-json`` count the canonical events parsed in the JVM instead, by
the same pattern in Java's regex engine (one ``rlike``, then a ``regexp_extract`` per field) or by
that ``rlike`` and ``from_json`` with the fields' schema (issue 39, item 2: a parse in the JVM for
declared fields; the other records are dropped, so these are upper bounds). A variant is
``default`` (``read_kafka``'s own options) or ``poll=N`` (``kafka.max.poll.records``=N); each stage
runs with each variant. Steady = records of batches 2..n / their triggerExecution. The table gives
min/median/max over runs and the ratio to the first stage and variant.
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

STAGES = {"read", "parse", "sql-regexp", "sql-json", "sql-regexp+udf"}


def java_pattern() -> str:
    """``user_activity.CANONICAL_EVENT`` for Java's regex engine: named groups as ``(?<n>``, the
    braces escaped, and the end of input as ``\\z`` (Java's ``$`` also matches before a final
    line terminator such as U+2028, which RE2's does not)."""
    from jobs.user_activity import CANONICAL_EVENT

    ws = "[ \\t\\n\\r]*"
    p = CANONICAL_EVENT.replace("(?P<", "(?<")
    if not (p.startswith("^{") and p.endswith("}" + ws + "$")):
        raise SystemExit(f"CANONICAL_EVENT changed shape: {CANONICAL_EVENT!r}")
    return "^\\{" + p[2:-len("}" + ws + "$")] + "\\}" + ws + "\\z"


def sql_parse(cols, stage: str):
    """The canonical events' contributed fields in Spark SQL (see the module docstring)."""
    from pyspark.sql import functions as F

    text, pattern = F.col("value").cast("string"), java_pattern()
    if stage == "sql-json":
        event = F.from_json(text, "user_id string, event_type string, amount decimal(15,3), ts long")
        uid, kind, amount, ts = event["user_id"], event["event_type"], event["amount"], event["ts"]
    else:
        group = {name: i + 1 for i, name in enumerate(("uid", "et", "ai", "af", "ts"))}
        g = lambda name: F.regexp_extract(text, pattern, group[name])
        uid, kind, ts = g("uid"), g("et"), g("ts").cast("long")
        amount = F.concat(g("ai"), F.lit("."), F.rpad(g("af"), 3, "0")).cast("decimal(15,3)")
    fields = contributed(uid, kind, ts, amount)
    if stage == "sql-regexp+udf":
        return with_python_rest(cols, text.rlike(pattern), fields)
    return cols.where(text.rlike(pattern)).select(*(c.alias(n) for n, c in fields.items()),
                                                 "topic", "partition", "offset")


def contributed(uid, kind, ts, amount) -> dict:
    """``user_activity``'s contributed fields (``contribute``) as Spark SQL columns, by name."""
    from pyspark.sql import functions as F

    purchase = kind == "purchase"
    return {"user_id": uid, "last_login_ts": F.when(kind == "login", ts),
            "purchases": F.when(purchase, F.lit(1)).otherwise(0).cast("long"),
            "total_cents": F.when(purchase, F.round(amount * 100, 0).cast("long")).otherwise(0),
            "events": F.lit(1).cast("long")}


def python_rest(values, keys, topics, parts, offsets):
    """An Arrow UDF: the records the JVM's pattern left (non-null values) parsed by the job's own
    ``parse`` + ``contribute``, in their rows; the others null."""
    import pyarrow as pa

    from jobs.user_activity import UserActivity
    from streamops.job import Record, Reject, key_or_reject

    job = UserActivity()
    rows = []
    for v, k, t, p, o in zip(values.to_pylist(), keys.to_pylist(), topics.to_pylist(), parts.to_pylist(),
                             offsets.to_pylist()):
        if v is None:
            rows.append(None)
            continue
        parsed = job.parse(Record(t, p, o, k, v, None))
        key = parsed if isinstance(parsed, Reject) else key_or_reject(job, parsed)
        if isinstance(key, Reject):
            rows.append({"user_id": None, "last_login_ts": None, "purchases": None, "total_cents": None,
                         "events": None, "reason": key.reason})
        else:
            c = job.contribute(parsed)
            rows.append({"user_id": key, **{f: c.get(f) for f in ("last_login_ts", "purchases", "total_cents",
                                                                    "events")}, "reason": None})
    return pa.array(rows, pa.struct([("user_id", pa.string()), ("last_login_ts", pa.int64()),
                                     ("purchases", pa.int64()), ("total_cents", pa.int64()),
                                     ("events", pa.int64()), ("reason", pa.string())]))


def with_python_rest(cols, ok, fast: dict):
    """Every record's parsed row: the JVM's for those matching the pattern, an Arrow UDF's (the job's
    Python parse) for the rest, which alone reach Python (the UDF's inputs are null elsewhere)."""
    from pyspark.sql import functions as F

    udf = F.arrow_udf(python_rest, "user_id string, last_login_ts long, purchases long, total_cents long, "
                                   "events long, reason string")
    rest = udf(*(F.when(~ok, F.col(c)) for c in ("value", "key", "topic", "partition", "offset")))
    step = cols.select("*", ok.alias("ok"), rest.alias("rest"))
    reason = F.col("rest.reason")
    return step.select(*(F.when(F.col("ok"), c).otherwise(F.col(f"rest.{n}")).alias(n) for n, c in fast.items()),
                       reason.alias("reason"), F.when(reason.isNotNull(), F.col("key")).alias("raw_key"),
                       F.when(reason.isNotNull(), F.col("value")).alias("raw_value"), "topic", "partition", "offset")


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
    elif args.stage.startswith("sql-"):
        cols = sql_parse(cols, args.stage)
    query = (cols.writeStream.foreachBatch(lambda df, _bid: df.count())
             .option("checkpointLocation", tempfile.mkdtemp(prefix="kafka-read-")).trigger(processingTime="0 seconds")
             .start())
    while sum(p["numInputRows"] for p in query.recentProgress) < args.events:
        if query.exception() is not None:
            raise SystemExit(f"the query failed: {str(query.exception())[:2000]}")
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
    ap.add_argument("--stage", default="read", help="read, parse, sql-regexp, sql-json (a list: each runs)")
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.variant:
        return child(args)

    from streamops.kafka.admin import TopicSpec, recreate_topic
    from streamops.platform import manager

    variants = args.variants.split(",")
    stages = args.stage.split(",")
    if set(stages) - STAGES:
        raise SystemExit(f"--stage: one of {sorted(STAGES)}, got {args.stage}")
    sides = [(st, v) for st in stages for v in variants]
    got: dict[tuple[str, str], list[dict]] = {side: [] for side in sides}
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
                for st, v in sides if run % 2 == 0 else sides[::-1]:
                    r = subprocess.run([sys.executable, __file__, "--variant", v, "--bootstrap", boot, "--events",
                                        str(args.events), "--batch", str(args.batch), "--stage", st],
                                       env=env, capture_output=True, text=True, check=False)
                    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
                    if r.returncode != 0 or not lines:
                        raise SystemExit(f"{st} {v} failed ({r.returncode}): {r.stderr[-3000:]}")
                    got[(st, v)].append(json.loads(lines[-1]))
                    print(f"run {run + 1} {st} {v}: {got[(st, v)][-1]}", file=sys.stderr, flush=True)
        finally:
            manager.down(settings)

    base = statistics.median(d["steady"] for d in got[sides[0]])
    rows = []
    for st, v in sides:
        lo, med, hi = summary([d["steady"] for d in got[(st, v)]])
        add = statistics.median(d["add_batch_ms"] for d in got[(st, v)])
        rows.append([st, v, f"{lo:,.0f}", f"{med:,.0f}", f"{hi:,.0f}", f"{add:,.0f}", f"{med / base:.2f}"])
    print(f"# bench/kafka_read.py — {args.events:,} records, {args.batch:,} per batch, {args.runs} run(s), local[2]\n")
    print(table(["stage", "variant", "steady records/s min", "median", "max", "addBatch ms (median)",
                 f"ratio to {sides[0][0]} {sides[0][1]}"], rows))


if __name__ == "__main__":
    main()
