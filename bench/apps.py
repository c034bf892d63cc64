"""Throughput of each declared app, beside the plain-Python fold of the same app, and against the
driver of another revision (``--baseline-rev``), all measured in the same run.

    .venv/bin/python bench/apps.py [--runs 3] [--events user_activity=1000000,page_stats=200000,...] \
        [--baseline-rev 86a6d76] [--batch 250000] [--master local[2]] [--commit-on driver,executors]

The default baseline, 86a6d76, is the last revision before issue 23: the same job API on the
streamops Python Kafka data source (confluent-kafka in Spark's Python workers), where this
revision reads with Spark's own connector. Both run against the same Apache Kafka broker.

For each run and app: a fresh broker (temporary state dir, free ports; stopped in ``finally``),
``--events`` records from the app's own generator (``Job.generate``, seed = run number), then

- ``spark``: ``python -m streamops.spark.driver --app APP --exit-at-end`` (``--batch`` records per
  trigger). ``steady`` = records of batches 2..n / their time, from the driver's progress log
  (batch 1 also starts the Python workers and state stores);
- ``python fold``: the same job folded in plain Python over the same records
  (``state.oracle.fold_input``: parse, key, update/aggregate, emit, expire), records/s of the
  fold alone (the records are read from the broker first, not timed);
- ``baseline``: the driver of ``--baseline-rev`` (a git worktree of that commit, run with this
  venv; ``python -m streamops.spark.driver`` there, ``streamops.spark.app`` before the driver
  package, or its own ``jobs/APP.py`` before the job API) on a fresh broker with the same records.
With ``--commit-on driver,executors`` this revision runs once per value (the spec's ``commit_on``),
and with ``--baseline-rev ''`` the last column is the ratio to the first of them.
The order of the sides alternates between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import baseline_tree, driver_module, isolated_settings, summary, table
from streamops.platform import manager
from streamops.settings import Settings

DEFAULT_EVENTS = "user_activity=1000000,page_stats=200000,orders=200000,sessions=200000,enriched_orders=200000"


def _spec(settings: Settings, app: str):
    from streamops.spec import default_spec_path, get_app, load_specs

    return get_app(load_specs(default_spec_path(REPO)), app)


def produce_input(settings: Settings, app: str, events: int, seed: int) -> None:
    from streamops.job import topic_records
    from streamops.kafka.admin import TopicSpec, ensure_topics
    from streamops.kafka.produce import produce_to_topics
    from streamops.spec import load_job

    spec = _spec(settings, app)
    topics = list(spec.input_topics)
    ensure_topics(settings.kafka_bootstrap, [TopicSpec(name=t, partitions=spec.input_partitions) for t in topics])
    job = load_job(spec, REPO)()
    produce_to_topics(settings.kafka_bootstrap, topic_records(job.generate(events, seed), topics),
                      partitions=dict.fromkeys(topics, spec.input_partitions))


def _ms(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp() * 1000


def run_driver(settings: Settings, app: str, events: int, batch: int, master: str,
               checkout: Path | None = None, commit_on: str | None = None) -> dict:
    """The app's driver to the end of its input; ``checkout``: another revision's tree (the baseline);
    ``commit_on``: where this revision's driver commits (the spec's ``commit_on``)."""
    env = {**os.environ, **settings.env(), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": settings.host}
    if checkout is None:
        argv = [sys.executable, "-m", "streamops.spark.driver", "--app", app,
                *(["--commit-on", commit_on] if commit_on else [])]
    else:
        # a revision on Spark's connector (issue 23 on) finds its jars in this checkout's .jars/
        env.update({"PYTHONPATH": str(checkout), "STREAMOPS_REPO": str(checkout),
                    "STREAMOPS_JARS_DIR": os.environ.get("STREAMOPS_JARS_DIR", str(REPO / ".jars"))})
        if (checkout / "streamops" / "spark").joinpath("driver", "__main__.py").exists() or \
                (checkout / "streamops" / "spark" / "app.py").exists():
            argv = [sys.executable, "-m", driver_module(checkout), "--app", app]
        else:
            argv = [sys.executable, str(checkout / "jobs" / f"{app}.py"), "--app", app]
    log = settings.state_dir / "bench-job.log"
    t0 = time.monotonic()
    with open(log, "wb") as out:
        rc = subprocess.run([*argv, "--master", master, "--exit-at-end", "--max-offsets-per-trigger", str(batch),
                             "--trigger-interval", "0 seconds"], env=env, stdout=out, stderr=subprocess.STDOUT,
                            cwd=checkout or settings.state_dir, check=False).returncode
    wall = time.monotonic() - t0
    if rc != 0:
        raise SystemExit(f"{app} exited {rc}; log: {log}\n" + log.read_text()[-3000:])
    path = settings.state_dir / "apps" / app / "batches.jsonl"
    bs = [b for b in (json.loads(line) for line in path.read_text().splitlines()) if b["input_rows"] > 0]
    end = max(_ms(b["timestamp"]) + b["duration_ms"]["triggerExecution"] for b in bs)
    rest = bs[1:]
    steady = sum(b["input_rows"] for b in rest) / ((end - _ms(rest[0]["timestamp"])) / 1000) if rest else float("nan")
    return {"steady": steady, "all": events / ((end - _ms(bs[0]["timestamp"])) / 1000), "wall": events / wall,
            "batches": len(bs)}


def run_fold(settings: Settings, app: str) -> dict:
    from streamops.kafka.read import read_topic
    from streamops.spec import load_job
    from streamops.state.oracle import fold_input, record_of

    spec = _spec(settings, app)
    records = [record_of(m) for t in spec.input_topics for m in read_topic(settings.kafka_bootstrap, t)]
    t0 = time.monotonic()
    folded = fold_input(load_job(spec, REPO), records)
    return {"rate": len(records) / (time.monotonic() - t0), "keys": len(folded.states)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--events", default=DEFAULT_EVENTS, help="APP=N,... (also chooses the apps)")
    ap.add_argument("--baseline-rev", default="86a6d76",
                    help="the revision the apps are compared with (default: before issue 23, the Python Kafka "
                    "source); '' to skip")
    ap.add_argument("--batch", type=int, default=250_000,
                    help="records per micro-batch (at most a fifth of an app's records: several batches)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--commit-on", default="",
                    help="this revision once per value, e.g. driver,executors (the spec's commit_on; default: the spec's)")
    args = ap.parse_args()
    modes = [m for m in args.commit_on.split(",") if m] or [""]
    events = {k: int(v) for k, v in (kv.split("=") for kv in args.events.split(","))}

    results: dict[str, dict[str, list[float]]] = {a: {} for a in events}
    with tempfile.TemporaryDirectory(prefix="streamops-bench-apps-") as tmp, \
            baseline_tree(args.baseline_rev, Path(tmp) / "baseline") as checkout:
        for run in range(args.runs):
            for app, n in events.items():
                # an app the baseline revision does not have is measured without it
                known = checkout is not None and (checkout / "jobs" / f"{app}.py").exists()
                sides = [f"api:{m}" for m in modes] + ["fold"] + (["baseline"] if known else [])
                if run % 2:
                    sides.reverse()
                for side in sides:
                    settings = isolated_settings(Path(tmp) / f"run-{run}-{app}-{side}")
                    try:
                        manager.up(settings, only=["kafka"])
                        produce_input(settings, app, n, seed=run)
                        if side == "fold":
                            r = run_fold(settings, app)
                            results[app].setdefault("python fold", []).append(r["rate"])
                            print(f"run {run + 1} {app} python fold: {r['rate']:,.0f} rec/s ({r['keys']} keys)",
                                  flush=True)
                        else:
                            mode = side.partition(":")[2] or None
                            r = run_driver(settings, app, n, min(args.batch, n // 5), args.master,
                                           checkout if side == "baseline" else None, commit_on=mode)
                            name = f"spark, {args.baseline_rev}" if side == "baseline" else \
                                "spark, this revision" + (f", commit on {mode}" if mode else "")
                            results[app].setdefault(name, []).append(r["steady"])
                            print(f"run {run + 1} {app} {name}: steady {r['steady']:,.0f} rec/s, all {r['all']:,.0f}, "
                                  f"wall {r['wall']:,.0f} ({r['batches']} batches)", flush=True)
                    finally:
                        manager.down(settings)
                        shutil.rmtree(settings.state_dir, ignore_errors=True)

    ref = args.baseline_rev or (f"commit on {modes[0]}" if modes[0] else "baseline")
    print(f"\nsteady records/s (batches 2..n), {args.runs} runs, {args.batch:,} per batch, master {args.master}\n")
    rows = []
    for app, sides in results.items():
        fold = sides.get("python fold")
        base = sides.get(f"spark, {args.baseline_rev}") if args.baseline_rev else \
            sides.get(f"spark, this revision, commit on {modes[0]}")
        for name, values in sides.items():
            lo, med, hi = summary(values)
            rows.append([app, f"{events[app]:,}", name, f"{lo:,.0f}", f"{med:,.0f}", f"{hi:,.0f}",
                         f"{med / statistics.median(fold):.2f}" if fold else "-",
                         f"{med / statistics.median(base):.2f}" if base else "-"])
    print(table(["app", "records", "side", "min", "median", "max", "ratio to the plain fold (median)",
                 f"ratio to {ref} (median)"], rows))


if __name__ == "__main__":
    main()
