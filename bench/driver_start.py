"""What one driver start costs: a bounded run of user_activity on local[2], start to exit.

Every deploy, restart resize, restore, reset and test run pays it. Two variants side by side:

- ``bytecode``: as installed (bootstrap compiles the venv's bytecode);
- ``source`` (baseline): the same run with an empty ``PYTHONPYCACHEPREFIX``, so that, as on a
  venv without .pyc files and with PYTHONDONTWRITEBYTECODE set, every process (driver, Spark's
  Python workers) compiles its imports from source.

Each run starts from a new checkpoint (the marker is rewound to -1 first, as a reset does) over the
same input. Printed: total seconds and batch 0's triggerExecution, min / median / max, and the
ratio of the medians to the baseline.

    .venv/bin/python bench/driver_start.py [--runs 3] [--events 6000]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import isolated_settings, summary, table
from jobs.demo.generator import generate
from streamops.app.checkpoint import checkpoint_dir
from streamops.kafka.admin import TopicSpec, ensure_topics
from streamops.kafka.produce import produce
from streamops.kafka.security import kafka_config
from streamops.lifecycle.replace import rewind_marker
from streamops.platform import manager
from streamops.spec import default_spec_path, get_app, load_specs

APP = "user_activity"


def one_run(settings, spec, env: dict[str, str]) -> tuple[float, float]:
    """(seconds from start to exit, batch 0's triggerExecution seconds)."""
    shutil.rmtree(checkpoint_dir(settings, spec), ignore_errors=True)
    progress = settings.state_dir / "apps" / APP / "batches.jsonl"
    progress.unlink(missing_ok=True)
    rewind_marker(settings, spec, kafka_config(settings, spec), -1)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "streamops.spark.driver", "--app", APP, "--master", "local[2]",
                        "--exit-at-end", "--max-offsets-per-trigger", "2500"], check=False, env=env,
                       cwd=settings.state_dir, capture_output=True, text=True, timeout=600)
    total = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"driver exited {r.returncode}:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    first = json.loads(progress.read_text().splitlines()[0])
    return total, first["duration_ms"]["triggerExecution"] / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--events", type=int, default=6000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="streamops-bench-") as tmp:
        settings = isolated_settings(Path(tmp) / "home")
        spec = get_app(load_specs(default_spec_path(settings.repo)), APP)
        manager.up(settings, only=["kafka"])
        try:
            b = settings.kafka_bootstrap
            topic = ensure_topics(b, [TopicSpec(name="user-events", partitions=6)])["user-events"]
            produce(b, "user-events", generate(args.events, 1000, seed=1, bad_ratio=0.01), partitions=topic.partitions)
            base_env = {**os.environ, **settings.env(), "PYSPARK_PYTHON": sys.executable,
                        "SPARK_LOCAL_IP": settings.host, "PYTHONDONTWRITEBYTECODE": "1"}
            empty = Path(tmp) / "no-bytecode"
            variants = {"source (baseline)": {**base_env, "PYTHONPYCACHEPREFIX": str(empty)},
                        "bytecode": base_env}
            results: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
            for i in range(args.runs):  # alternate, so drift hits both alike
                for name, env in variants.items():
                    empty.mkdir(exist_ok=True)
                    results[name].append(one_run(settings, spec, env))
                    print(f"run {i + 1} {name}: {results[name][-1][0]:.1f} s", file=sys.stderr)
        finally:
            manager.down(settings)
    base_total = summary([t for t, _ in results["source (baseline)"]])[1]
    base_b0 = summary([b for _, b in results["source (baseline)"]])[1]
    rows = []
    for name, runs in results.items():
        tot, b0 = summary([t for t, _ in runs]), summary([b for _, b in runs])
        rows.append([name, " / ".join(f"{x:.1f}" for x in tot), f"{tot[1] / base_total:.2f}",
                     " / ".join(f"{x:.1f}" for x in b0), f"{b0[1] / base_b0:.2f}"])
    print(f"driver start, {args.events} events, local[2], {args.runs} runs each (min / median / max s)")
    print(table(["variant", "start to exit", "ratio", "batch 0", "ratio"], rows))


if __name__ == "__main__":
    main()
