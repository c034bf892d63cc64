"""Produce and bounded-read throughput on the embedded broker.

Starts its own broker (free ports, temporary state dir), then per run: `streamops produce` of
--events events / --users users into `user-events` (the demo app's input), emptied and made again
with --partitions partitions before each run (the CLI, so the generator and JSON encoding are
included), then `read_topic` (count every record),
`latest_per_key` (bytes, no JSON decode) and the oracle (`read_topic` + `validate` + `fold`) over
that topic. The broker is stopped at the end, also on failure.

    .venv/bin/python bench/produce_read.py [--events 1000000] [--users 10000] [--partitions 6] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import platform as pyplatform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import isolated_settings, summary, table
from jobs.demo.fold import fold, validate
from streamops.kafka import end_offsets, latest_per_key, read_topic
from streamops.kafka.admin import TopicSpec, recreate_topic
from streamops.platform import manager


def produce(bootstrap: str, topic: str, args: argparse.Namespace) -> tuple[float, dict]:
    recreate_topic(bootstrap, TopicSpec(name=topic, partitions=args.partitions))
    cmd = [sys.executable, "-m", "streamops.cli", "produce", topic, "--events", str(args.events),
           "--users", str(args.users), "--bad-ratio", str(args.bad_ratio),
           "--seed", "1", "--bootstrap", bootstrap, "--json"]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"produce failed ({r.returncode}): {r.stderr}")
    return wall, json.loads(r.stdout)


def timed(fn) -> tuple[float, object]:
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out


def oracle(bootstrap: str, topic: str) -> tuple[int, int]:
    bad = 0

    def events():
        nonlocal bad
        for m in read_topic(bootstrap, topic):
            ev, reason = validate(m.value())
            if reason is None:
                yield ev
            else:
                bad += 1

    return len(fold(events())), bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--bad-ratio", type=float, default=0.01)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()

    rows: dict[str, list[float]] = {k: [] for k in
                                    ("produce (CLI summary)", "produce (wall, incl. start-up)", "read_topic",
                                     "latest_per_key", "read_topic + validate + fold")}
    broker_rss = []
    with tempfile.TemporaryDirectory(prefix="streamops-bench-") as tmp:
        settings = isolated_settings(Path(tmp) / "home")
        try:
            manager.up(settings, only=["kafka"])
            bootstrap = settings.kafka_bootstrap
            for i in range(args.runs):
                topic = "user-events"  # `produce TOPIC` feeds a topic an app reads
                wall, s = produce(bootstrap, topic, args)
                total = sum(hi - lo for lo, hi in end_offsets(bootstrap, topic).values())
                if total != args.events:
                    raise SystemExit(f"topic holds {total} records, expected {args.events}")
                rows["produce (CLI summary)"].append(s["events_per_s"])
                rows["produce (wall, incl. start-up)"].append(args.events / wall)
                print(f"run {i + 1}: produce {s['events_per_s']:,.0f} ev/s ({s['seconds']:.1f}s; wall "
                      f"{wall:.1f}s), {s['bytes'] / 2**20:.0f} MiB", file=sys.stderr, flush=True)

                t, n = timed(lambda topic=topic: sum(1 for _ in read_topic(bootstrap, topic)))
                assert n == args.events, n
                rows["read_topic"].append(n / t)
                print(f"run {i + 1}: read_topic {n / t:,.0f} rec/s ({t:.1f}s)", file=sys.stderr, flush=True)

                t, latest = timed(lambda topic=topic: latest_per_key(bootstrap, topic, decode=bytes))
                rows["latest_per_key"].append(args.events / t)
                print(f"run {i + 1}: latest_per_key {args.events / t:,.0f} rec/s ({t:.1f}s, {len(latest):,} keys)",
                      file=sys.stderr, flush=True)

                t, (users, bad) = timed(lambda topic=topic: oracle(bootstrap, topic))
                assert (bad > 0) == (args.bad_ratio > 0), bad
                rows["read_topic + validate + fold"].append(args.events / t)
                print(f"run {i + 1}: oracle {args.events / t:,.0f} rec/s ({t:.1f}s, {users:,} profiles)",
                      file=sys.stderr, flush=True)
                for comp in manager.status(settings, only=["kafka"]):
                    if comp.pid:
                        broker_rss.append(psutil.Process(comp.pid).memory_info().rss / 2**20)
        finally:
            manager.down(settings)

    print(f"# bench/produce_read.py — {args.events:,} events, {args.users:,} users, {args.partitions} "
          f"partitions, bad ratio {args.bad_ratio}, {args.runs} run(s); {psutil.cpu_count()} cores, "
          f"Python {pyplatform.python_version()}\n")
    out = []
    for name, vals in rows.items():
        lo, med, hi = summary(vals)
        out.append([name, f"{lo:,.0f}", f"{med:,.0f}", f"{hi:,.0f}"])
    print(table(["records/s", "min", "median", "max"], out))
    if broker_rss:
        print(f"\nbroker RSS after the runs: {max(broker_rss):,.0f} MiB")


if __name__ == "__main__":
    main()
