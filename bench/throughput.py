"""End-to-end throughput of the demo app vs a plain confluent-kafka loop, and batch latency.

    .venv/bin/python bench/throughput.py [--events 1000000] [--partitions 6] [--users 10000] \
        [--runs 3] [--batch 250000] [--master local[2]] [--rate 10000] [--latency-seconds 60] \
        [--baseline-rev 86a6d76]

Each run starts its own broker (temporary state dir, free ports; stopped in ``finally``) and
pre-produces ``--events`` user-events (1% malformed, seed = run number) to ``--partitions``
partitions. On that same data it then times, in alternating order:

- ``spark``: ``python -m streamops.spark.driver --app user_activity --exit-at-end`` (stateful aggregation in RocksDB, one Kafka
  transaction per micro-batch writing profiles, changelog and DLQ; ``--batch`` records per
  trigger). ``all batches`` = events / (end of the last batch - start of the first), from the
  job's progress log; ``steady`` leaves out the first batch (it also starts the Python workers
  and state stores); ``wall`` adds the driver's start (JVM, session).
- ``plain``: one Python process: consume -> ``fold.validate`` + fold -> produce the updated
  profiles (output and changelog) and DLQ records per ``--batch`` records, then commit offsets.

Then, on a fresh broker, the job runs with a 1 s trigger while events arrive at ``--rate``
events/s for ``--latency-seconds``: batch latency (trigger start -> batch committed) p50/p99.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import baseline_tree, driver_module, isolated_settings, summary, table
from jobs.demo import contract as c
from jobs.demo.generator import generate_records
from streamops.app.topics import H_REASON
from streamops.platform import manager
from streamops.settings import Settings


def produce_input(settings: Settings, events: int, users: int, partitions: int, seed: int,
                  rate: float | None = None) -> None:
    from streamops.kafka.admin import TopicSpec, ensure_topics
    from streamops.kafka.produce import produce

    ensure_topics(settings.kafka_bootstrap, [TopicSpec(name=c.INPUT_TOPIC, partitions=partitions)])
    records = ((r.key, r.value) for r in generate_records(events, users, seed=seed, bad_ratio=0.01))
    produce(settings.kafka_bootstrap, c.INPUT_TOPIC, records, partitions=partitions, rate=rate)


def batches(settings: Settings) -> list[dict]:
    path = settings.state_dir / "apps" / c.APP / "batches.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _ms(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp() * 1000


def job_env(settings: Settings) -> dict[str, str]:
    return {**os.environ, **settings.env(), "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": settings.host}


def run_spark(settings: Settings, events: int, batch: int, master: str, checkout: Path | None = None) -> dict:
    """The demo app's driver to the end of its input; ``checkout``: another revision's tree (run with
    this venv: the baseline)."""
    t0 = time.monotonic()
    log = settings.state_dir / "bench-job.log"
    env = job_env(settings)
    if checkout is not None:
        env.update({"PYTHONPATH": str(checkout), "STREAMOPS_REPO": str(checkout)})
    with open(log, "wb") as out:
        rc = subprocess.run(
            [sys.executable, "-m", driver_module(checkout), "--app", "user_activity", "--master", master, "--exit-at-end",
             "--max-offsets-per-trigger", str(batch), "--trigger-interval", "0 seconds"],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=checkout or settings.state_dir, check=False,
        ).returncode
    wall = time.monotonic() - t0
    if rc != 0:
        raise SystemExit(f"job exited {rc}; log: {log}\n" + log.read_text()[-3000:])
    bs = [b for b in batches(settings) if b["input_rows"] > 0]
    start = _ms(bs[0]["timestamp"])
    end = max(_ms(b["timestamp"]) + b["duration_ms"]["triggerExecution"] for b in bs)
    rest = bs[1:]  # after the first batch, which also starts the Python workers and state stores
    steady = (sum(b["input_rows"] for b in rest) / ((end - _ms(rest[0]["timestamp"])) / 1000)) if rest else 0.0
    return {"rate": events / ((end - start) / 1000), "steady_rate": steady, "wall_rate": events / wall,
            "batches": len(bs)}


def run_plain(settings: Settings, events: int, batch: int) -> dict:
    """The single-process baseline: consume -> validate + fold -> produce, offsets committed per batch."""
    from confluent_kafka import Consumer, Producer

    from jobs.demo.fold import fold, profile_json, validate
    from streamops.kafka.admin import TopicSpec, ensure_topics

    out_topic, changelog, dlq = "plain-profiles", "plain-profiles-changelog", "plain-events.dlq"
    ensure_topics(settings.kafka_bootstrap, [TopicSpec(name=t, partitions=6) for t in (out_topic, changelog, dlq)])
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "bench-plain",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "linger.ms": 20,
                         "queue.buffering.max.messages": 1_000_000, "enable.idempotence": True})
    consumer.subscribe([c.INPUT_TOPIC])
    profiles: dict = {}
    seen = 0
    t0 = time.monotonic()
    try:
        while seen < events:
            valid, touched = [], set()
            in_batch = 0
            while in_batch < batch and seen + in_batch < events:
                msgs = consumer.consume(min(10_000, batch - in_batch), timeout=1.0)
                for m in msgs:
                    event, reason = validate(m.value())
                    if reason is None:
                        valid.append(event)
                        touched.add(event["user_id"])
                    else:
                        producer.produce(dlq, key=m.key(), value=m.value(), headers=[(H_REASON, reason)])
                in_batch += len(msgs)
                producer.poll(0)
            profiles = fold(valid, profiles)
            for uid in touched:
                value = profile_json(profiles[uid])
                producer.produce(out_topic, key=uid.encode(), value=value)
                producer.produce(changelog, key=uid.encode(), value=value)
                producer.poll(0)
            producer.flush(60)
            consumer.commit(asynchronous=False)
            seen += in_batch
    finally:
        consumer.close()
    return {"rate": events / (time.monotonic() - t0)}


def latency(settings: Settings, rate: float, seconds: float, users: int, partitions: int, master: str) -> dict:
    produce_input(settings, 1, users, partitions, seed=99)  # topics exist before the job starts
    with open(settings.state_dir / "bench-latency.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamops.spark.driver", "--app", "user_activity", "--master", master,
             "--trigger-interval", "1 second"],
            env=job_env(settings), stdout=log, stderr=subprocess.STDOUT, cwd=settings.state_dir,
        )
    try:
        deadline = time.monotonic() + 300
        while not any(b["input_rows"] > 0 for b in batches(settings)):  # warmed up
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the job did not start; see bench-latency.log")
            time.sleep(0.5)
        warm = len(batches(settings))
        producer = threading.Thread(target=produce_input, args=(settings, int(rate * seconds), users,
                                                                partitions, 100, rate))
        producer.start()
        producer.join()
        time.sleep(5)
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    durations = sorted(b["duration_ms"]["triggerExecution"] for b in batches(settings)[warm:]
                       if b["input_rows"] > 0)
    q = statistics.quantiles(durations, n=100, method="inclusive")
    return {"batches": len(durations), "p50": q[49], "p99": q[98], "max": durations[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=250_000, help="records per micro-batch (both sides)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--rate", type=float, default=10_000)
    ap.add_argument("--latency-seconds", type=float, default=60)
    ap.add_argument("--baseline-rev", default="",
                    help="also run the spark side of this revision (a git worktree, this venv) on its own broker "
                    "with the same records, e.g. 86a6d76 (the Python Kafka source, before issue 23)")
    args = ap.parse_args()

    spark_rates, steady_rates, wall_rates, plain_rates = [], [], [], []
    base: dict[str, list[float]] = {"rate": [], "steady_rate": [], "wall_rate": []}
    with tempfile.TemporaryDirectory(prefix="streamops-bench-throughput-") as tmp, \
            baseline_tree(args.baseline_rev, Path(tmp) / "baseline") as checkout:
        for run in range(args.runs):
            if checkout is not None:
                settings = isolated_settings(Path(tmp) / f"run-{run}-baseline")
                try:
                    manager.up(settings, only=["kafka"])
                    produce_input(settings, args.events, args.users, args.partitions, seed=run)
                    r = run_spark(settings, args.events, args.batch, args.master, checkout)
                    for k, values in base.items():
                        values.append(r[k])
                    print(f"run {run + 1}: {args.baseline_rev} {r['rate']:,.0f} rec/s (steady {r['steady_rate']:,.0f}, "
                          f"wall {r['wall_rate']:,.0f})", flush=True)
                finally:
                    manager.down(settings)
            settings = isolated_settings(Path(tmp) / f"run-{run}")
            try:
                manager.up(settings, only=["kafka"])
                produce_input(settings, args.events, args.users, args.partitions, seed=run)
                order = ("spark", "plain") if run % 2 == 0 else ("plain", "spark")
                for side in order:
                    if side == "spark":
                        r = run_spark(settings, args.events, args.batch, args.master)
                        spark_rates.append(r["rate"])
                        steady_rates.append(r["steady_rate"])
                        wall_rates.append(r["wall_rate"])
                    else:
                        plain_rates.append(run_plain(settings, args.events, args.batch)["rate"])
                print(f"run {run + 1}: spark {spark_rates[-1]:,.0f} rec/s (wall {wall_rates[-1]:,.0f}), "
                      f"plain {plain_rates[-1]:,.0f} rec/s", flush=True)
            finally:
                manager.down(settings)
        lat = None
        if args.latency_seconds > 0:
            settings = isolated_settings(Path(tmp) / "latency")
            try:
                manager.up(settings, only=["kafka"])
                lat = latency(settings, args.rate, args.latency_seconds, args.users, args.partitions, args.master)
            finally:
                manager.down(settings)

    rows = []
    plain = statistics.median(plain_rates)
    for name, values, key in (("spark, steady (batches 2..n)", steady_rates, "steady_rate"),
                              ("spark, all batches", spark_rates, "rate"),
                              ("spark, wall (incl. driver start)", wall_rates, "wall_rate"),
                              ("plain loop", plain_rates, None)):
        lo, med, hi = summary(values)
        vs_base = f"{med / statistics.median(base[key]):.2f}" if key and base[key] else "-"
        rows.append([name, f"{lo:,.0f}", f"{med:,.0f}", f"{hi:,.0f}", f"{med / plain:.2f}", vs_base])
        if key and base[key]:
            lo, med, hi = summary(base[key])
            rows.append([f"{name.replace('spark', f'spark {args.baseline_rev}')}", f"{lo:,.0f}", f"{med:,.0f}",
                         f"{hi:,.0f}", f"{med / plain:.2f}", "1.00"])
    print(f"\n{args.events:,} events, {args.partitions} partitions, {args.users:,} users, "
          f"{args.batch:,} per batch, master {args.master}, {args.runs} runs\n")
    print(table(["records/s", "min", "median", "max", "ratio to plain (median)",
                 f"ratio to {args.baseline_rev or 'baseline'} (median)"], rows))
    if lat:
        print(f"\nbatch latency at {args.rate:,.0f} events/s for {args.latency_seconds:.0f} s "
              f"(1 s trigger, {lat['batches']} batches)\n")
        print(table(["p50 ms", "p99 ms", "max ms"], [[f"{lat['p50']:.0f}", f"{lat['p99']:.0f}", f"{lat['max']:.0f}"]]))


if __name__ == "__main__":
    main()
