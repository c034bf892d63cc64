"""End-to-end latency of the demo app: probe events timed from produce until their result is
visible to a read_committed consumer of the output, under a steady background load.

    .venv/bin/python bench/latency.py [--rates 1000,5000] [--seconds 60] [--warmup 20] \
        [--baseline-rev 86a6d76] [--master local[2]] [--triggers "2 seconds,500 ms"]

For each side (this revision; ``--baseline-rev`` in a git worktree, run with this venv) and each
rate: a fresh broker, the ``user_activity`` driver with the spec's defaults (its trigger interval
included) on ``--master``, a background feeder at RATE events/s (the demo generator, 1% invalid),
and every 0.25 s one probe: a valid login of a user of its own (``probe-N``). A read_committed
consumer of the output topic notes when each probe user's profile appears. Latency = that time -
the time just before the probe was produced. The clock starts once the driver has committed its
first batch (its start is not measured); probes of the first ``--warmup`` seconds are left out (the first batches also start the Python workers and the state stores); probes never seen
within 30 s of the end count as lost (there should be none). ``--triggers``: this revision once per
trigger interval given (the driver's ``--trigger-interval``), each on its own broker, instead of
once with the spec's (and the baseline once per trigger too, each right after this revision's). The default baseline, 86a6d76, read
Kafka with the streamops Python data source; this revision reads with Spark's own connector.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import baseline_tree, driver_module, isolated_settings, table
from streamops.platform import manager
from streamops.settings import Settings

APP = "user_activity"
PROBE_EVERY_S = 0.25


def start_driver(settings: Settings, master: str, checkout: Path | None, trigger: str | None = None) -> subprocess.Popen:
    env = {**os.environ, **settings.env(), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": settings.host}
    if checkout is not None:
        env.update({"PYTHONPATH": str(checkout), "STREAMOPS_REPO": str(checkout)})
    log = open(settings.state_dir / "bench-driver.log", "wb")  # noqa: SIM115 - the driver's, closed by the OS
    more = ["--trigger-interval", trigger] if trigger else []
    return subprocess.Popen([sys.executable, "-m", driver_module(checkout), "--app", APP, "--master", master, *more],
                            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=checkout or settings.state_dir)


class Feeder(threading.Thread):
    """RATE events/s, in 20 slices a second, until stopped."""

    def __init__(self, bootstrap: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.rate, self.halt = bootstrap, rate, threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer

        from jobs.demo.generator import generate_records

        out = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "log_level": 0})
        seed, per_slice = 0, max(1, self.rate // 20)
        t_next = time.monotonic()
        while not self.halt.is_set():
            for r in generate_records(per_slice, 2000, seed=seed, bad_ratio=0.01):
                while True:
                    try:
                        out.produce("user-events", key=r.key, value=r.value)
                        break
                    except BufferError:
                        out.poll(0.05)
            seed += 1
            out.poll(0)
            t_next += 0.05
            self.halt.wait(max(0.0, t_next - time.monotonic()))
        out.flush(30)


class Watcher(threading.Thread):
    """Notes when each probe user first appears in the output (read_committed)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.halt = bootstrap, topic, threading.Event()
        self.seen: dict[str, float] = {}

    def run(self) -> None:
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"bench-latency-{time.time()}",
                      "isolation.level": "read_committed", "auto.offset.reset": "latest",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 10, "log_level": 0})
        c.subscribe([self.topic])
        try:
            while not self.halt.is_set():
                for m in c.consume(10_000, timeout=0.1):
                    if m.error() is None and m.key() and m.key().startswith(b"probe-"):
                        self.seen.setdefault(m.key().decode(), time.time())
        finally:
            c.close()


def probe_value(user: str) -> bytes:
    return json.dumps({"user_id": user, "event_type": "login", "amount": 0,
                       "ts": int(time.time() * 1000)}).encode()


def measure(settings: Settings, rate: int, seconds: float, warmup: float, master: str,
            checkout: Path | None, trigger: str | None = None) -> dict:
    from streamops.app.dir import AppDir
    from streamops.app.topics import app_topic_specs
    from streamops.kafka.admin import TopicSpec, ensure_topics
    from streamops.spec import default_spec_path, get_app, load_specs

    spec = get_app(load_specs(default_spec_path(REPO)), APP)
    ensure_topics(settings.kafka_bootstrap, [t for t in app_topic_specs(spec).values()] +
                  [TopicSpec(name=spec.input_topics[0], partitions=spec.input_partitions)])
    beat = AppDir.of(settings, APP).heartbeat

    def committed(_proc: subprocess.Popen) -> bool:  # the driver's start is not measured
        return beat.exists() and json.loads(beat.read_text() or "{}").get("batch_id") is not None

    return probe_latency(settings.kafka_bootstrap, spec.live_output_topic, rate, seconds, warmup,
                         start=lambda: start_driver(settings, master, checkout, trigger), ready=committed,
                         log=settings.state_dir / "bench-driver.log", what="the driver")


def probe_latency(bootstrap: str, output_topic: str, rate: int, seconds: float, warmup: float, *,
                  start: Callable[[], subprocess.Popen], ready: Callable[[subprocess.Popen], bool], log: Path,
                  what: str) -> dict:
    """The probes against the process ``start`` gives (writing ``output_topic``, logging to ``log``),
    under the feeder's load, once ``ready`` says it has started; the process is stopped at the end."""
    from confluent_kafka import Producer

    watcher = Watcher(bootstrap, output_topic)
    watcher.start()
    driver = start()
    feeder = Feeder(bootstrap, rate)
    feeder.start()
    probes: dict[str, float] = {}
    out = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 0})
    try:
        deadline = time.monotonic() + 300
        while not ready(driver):
            if driver.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{what} did not start: {log}")
            time.sleep(0.5)
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < warmup + seconds:
            if driver.poll() is not None:
                raise SystemExit(f"{what} exited {driver.returncode}: {log}")
            user = f"probe-{n:06d}"
            sent = time.time()
            out.produce("user-events", key=user.encode(), value=probe_value(user))
            out.poll(0)
            if time.monotonic() - t0 >= warmup:
                probes[user] = sent
            n += 1
            time.sleep(PROBE_EVERY_S)
        out.flush(30)
        deadline = time.time() + 30
        while time.time() < deadline and not all(u in watcher.seen for u in probes):
            time.sleep(0.2)
    finally:
        feeder.halt.set()
        watcher.halt.set()
        driver.terminate()
        try:
            driver.wait(60)
        except subprocess.TimeoutExpired:
            driver.kill()
        feeder.join(30)
        watcher.join(10)
    lat = sorted(watcher.seen[u] - t for u, t in probes.items() if u in watcher.seen)
    lost = sum(1 for u in probes if u not in watcher.seen)
    if not lat:
        raise SystemExit(f"no probe was seen ({len(probes)} sent); the end of {log}:\n"
                         f"{log.read_text(errors='replace')[-3000:]}")
    return {"p50": lat[len(lat) // 2], "p90": lat[min(len(lat) - 1, int(len(lat) * 0.9))],
            "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))], "max": lat[-1], "probes": len(probes), "lost": lost}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="1000,5000")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--baseline-rev", default="86a6d76", help="'' to skip")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--triggers", default="", help="comma-separated trigger intervals to run this revision "
                    "with, e.g. '2 seconds,500 ms' (default: the spec's)")
    args = ap.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="streamops-bench-latency-") as tmp, \
            baseline_tree(args.baseline_rev, Path(tmp) / "baseline", jars=True) as checkout:
        triggers = [t.strip() for t in args.triggers.split(",") if t.strip()]
        # each trigger for this revision, and for the baseline right after it (the ratio's reference)
        sides: list[tuple[str, Path | None, str | None]] = []
        for t in triggers or [None]:
            when = f", trigger {t}" if t else ""
            sides.append((f"this revision{when}", None, t))
            if checkout:
                sides.append((f"{args.baseline_rev}{when}", checkout, t))
        results: dict[tuple[int, str], dict] = {}
        for rate in rates:
            for name, tree, trigger in sides:
                settings = isolated_settings(Path(tmp) / f"{rate}-{re.sub(r'[^A-Za-z0-9]+', '-', name)}")  # no comma: log.dirs
                try:
                    manager.up(settings, only=["kafka"])
                    r = measure(settings, rate, args.seconds, args.warmup, args.master, tree, trigger)
                finally:
                    manager.down(settings)
                    shutil.rmtree(settings.state_dir, ignore_errors=True)
                results[(rate, name)] = r
                print(f"{rate}/s {name}: p50 {r['p50']:.2f}s p99 {r['p99']:.2f}s max {r['max']:.2f}s "
                      f"({r['probes']} probes, {r['lost']} lost)", file=sys.stderr, flush=True)
    for rate in rates:
        for name, _tree, trigger in sides:
            ref = next((n for n, tree, t in sides if tree is not None and t == trigger), sides[-1][0])
            base = results.get((rate, ref))
            r = results[(rate, name)]
            ratio = f"{r['p50'] / base['p50']:.2f}" if base else "-"
            rows.append([f"{rate:,}/s", name, f"{r['p50']:.2f}", f"{r['p99']:.2f}", f"{r['max']:.2f}",
                         str(r["probes"]), str(r["lost"]), ratio])
    which = "the trigger intervals named" if triggers else "the spec's trigger interval"
    print(f"# bench/latency.py — {args.seconds:.0f} s per point after {args.warmup:.0f} s warm-up, "
          f"master {args.master}, {which}\n")
    print(table(["load", "side", "p50 s", "p99 s", "max s", "probes", "lost",
                 "p50 ratio to the baseline at its trigger" if checkout else "p50 ratio to the last side"], rows))


if __name__ == "__main__":
    main()
