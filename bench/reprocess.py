"""Reprocess rate against the live app's rate, in the same run.

    .venv/bin/python bench/reprocess.py [--events 1000000] [--users 100000] [--runs 3] [--master local[2]]

One broker in a temporary state dir on free ports (stopped in ``finally``). ``--events`` demo
events are produced once. Then, ``--runs`` times each, alternating:

* live (the baseline): the demo app from a fresh checkpoint over all of it (``--exit-at-end``),
  records / wall time from start to exit, as the app catches up on a backlog;
* reprocess: ``streamops reprocess --from earliest --to latest --output-version v2`` (a rerun starts
  from a fresh checkpoint), records / the command's own time.

Both run on the same Spark master with the spec's batch size; the table gives min / median / max
records/s and the median ratio to the live rate (target: at least 1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import isolated_settings, summary, table
from jobs.demo import contract as c
from streamops.platform import manager


def _fmt(values: list[float]) -> str:
    lo, med, hi = summary(values)
    return f"{lo:,.0f} / {med:,.0f} / {hi:,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--users", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)

    from jobs.demo.generator import generate_records
    from streamops.app.checkpoint import checkpoint_dir
    from streamops.app.topics import ensure_app_topics
    from streamops.kafka.produce import produce
    from streamops.kafka.security import kafka_config
    from streamops.spec import default_spec_path, get_app, load_specs

    home = Path(tempfile.mkdtemp(prefix="bench-reprocess-"))
    settings = isolated_settings(home)
    spec = get_app(load_specs(default_spec_path(REPO)), c.APP)
    env = {**os.environ, **settings.env(), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": settings.host}
    live, reproc = [], []
    try:
        print(f"starting a broker in {home} ...", flush=True)
        manager.up(settings, only=["kafka"])
        ensure_app_topics(kafka_config(settings, spec), spec)
        t0 = time.time()
        produce(settings.kafka_bootstrap, c.INPUT_TOPIC,
                ((r.key, r.value) for r in generate_records(args.events, args.users, seed=7, bad_ratio=0.01)),
                partitions=spec.input_partitions)
        print(f"produced {args.events:,} events in {time.time() - t0:.0f} s", flush=True)
        for run in range(1, args.runs + 1):
            shutil.rmtree(checkpoint_dir(settings, spec), ignore_errors=True)
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-m", "streamops.spark.driver", "--app", "user_activity", "--master", args.master,
                            "--exit-at-end"], env=env, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            live.append(args.events / (time.monotonic() - t0))
            r = subprocess.run([sys.executable, "-m", "streamops.cli", "reprocess", c.APP, "--from", "earliest",
                                "--to", "latest", "--output-version", "v2", "--master", args.master, "--json"],
                               env=env, capture_output=True, text=True, check=False)
            if r.returncode != 0:
                raise SystemExit(f"reprocess failed:\n{r.stderr[-3000:]}")
            out = json.loads(r.stdout)
            reproc.append(out["records"] / out["seconds"])
            print(f"  run {run}: live {live[-1]:,.0f} records/s, reprocess {reproc[-1]:,.0f} records/s "
                  f"({out['records']:,} records, {out['seconds']} s, last batch {out['batches']})", flush=True)
    finally:
        manager.down(settings)
    base = summary(live)[1]
    print()
    print(f"Reprocess vs live over {args.events:,} events ({args.runs} runs each, master {args.master}):")
    print(table(["run", "records/s min / median / max", "ratio to live (median)"],
                [["live app, catching up (baseline)", _fmt(live), "1.00"],
                 ["reprocess earliest..latest into v2", _fmt(reproc), f"{summary(reproc)[1] / base:.2f}"]]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
