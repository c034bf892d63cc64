"""What one driver start costs: a bounded run of an app on local[2], start to exit.

Every deploy, restart resize, restore, reset and test run pays it. Two sides side by side:

- by default, ``bytecode`` (as installed: bootstrap compiles the venv's bytecode) against
  ``source`` (baseline): the same run with an empty ``PYTHONPYCACHEPREFIX``, so that, as on a
  venv without .pyc files and with PYTHONDONTWRITEBYTECODE set, every process (driver, Spark's
  Python workers) compiles its imports from source;
- with ``--baseline-rev REV``, this tree against the driver of REV (a git worktree of it, run
  with this venv and this checkout's jars); ``--this-env KEY=VALUE`` sets a variable for this
  tree's drivers only (``STREAMOPS_STARTUP_WARMUP=0``: no startup warm-up).

Each run starts from a new checkpoint (the marker is rewound to -1 first, as a reset does) over the
same input (``--events`` of the app's own generated records, ``--batch`` per micro-batch, so a
large ``--batch`` makes batch 0 a backlog's first batch). Printed: total seconds and batch 0's
triggerExecution, min / median / max, and the ratio of the medians to the baseline.

``--busy N`` runs N CPU-bound processes beside the drivers for the whole bench (the contention of
the suite's three workers on two cores, where the startup warm-up was first seen to hold the first
batch back).

    .venv/bin/python bench/driver_start.py [--runs 3] [--app user_activity] [--events 6000] \
        [--batch 2500] [--baseline-rev REV [--this-env KEY=VALUE]] [--busy N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import baseline_tree, driver_module, isolated_settings, summary, table
from streamops.app.checkpoint import checkpoint_dir
from streamops.kafka.security import kafka_config
from streamops.lifecycle.replace import rewind_marker
from streamops.platform import manager
from streamops.spec import default_spec_path, get_app, load_specs

REPO = Path(__file__).resolve().parent.parent


def one_run(settings, spec, env: dict[str, str], batch: int, checkout: Path | None = None) -> tuple[float, float]:
    """(seconds from start to exit, batch 0's triggerExecution seconds)."""
    shutil.rmtree(checkpoint_dir(settings, spec), ignore_errors=True)
    progress = settings.state_dir / "apps" / spec.name / "batches.jsonl"
    progress.unlink(missing_ok=True)
    rewind_marker(settings, spec, kafka_config(settings, spec), -1)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", driver_module(checkout), "--app", spec.name, "--master", "local[2]",
                        "--exit-at-end", "--max-offsets-per-trigger", str(batch)], check=False, env=env,
                       cwd=checkout or settings.state_dir, capture_output=True, text=True, timeout=600)
    total = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"driver exited {r.returncode}:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    first = json.loads(progress.read_text().splitlines()[0])
    return total, first["duration_ms"]["triggerExecution"] / 1000


@contextlib.contextmanager
def busy(processes: int) -> Iterator[None]:
    """``processes`` Python processes spinning on a core each for the block (killed after it)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--app", default="user_activity")
    ap.add_argument("--events", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=2500, help="records per micro-batch (maxOffsetsPerTrigger)")
    ap.add_argument("--baseline-rev", default="", help="compare this tree with the driver of this revision")
    ap.add_argument("--this-env", action="append", default=[], metavar="KEY=VALUE",
                    help="set for this tree's drivers only (with --baseline-rev), e.g. STREAMOPS_STARTUP_WARMUP=0")
    ap.add_argument("--busy", type=int, default=0, help="CPU-bound processes running beside the drivers")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="streamops-bench-") as tmp, \
            baseline_tree(args.baseline_rev, Path(tmp) / "baseline") as checkout:
        settings = isolated_settings(Path(tmp) / "home")
        spec = get_app(load_specs(default_spec_path(settings.repo)), args.app)
        manager.up(settings, only=["kafka"])
        try:
            subprocess.run([sys.executable, "-m", "streamops.cli", "produce", args.app, "--events", str(args.events),
                            "--seed", "1", "--bootstrap", settings.kafka_bootstrap, "--json"], check=True, capture_output=True, env={**os.environ, **settings.env()})
            base_env = {**os.environ, **settings.env(), "PYSPARK_PYTHON": sys.executable,
                        "SPARK_LOCAL_IP": settings.host, "PYTHONDONTWRITEBYTECODE": "1"}
            empty = Path(tmp) / "no-bytecode"
            sides: dict[str, tuple[dict[str, str], Path | None]]
            if checkout is not None:
                baseline = f"{args.baseline_rev} (baseline)"
                sides = {baseline: ({**base_env, "PYTHONPATH": str(checkout), "STREAMOPS_REPO": str(checkout),
                                     "STREAMOPS_JARS_DIR": os.environ.get("STREAMOPS_JARS_DIR", str(REPO / ".jars"))},
                                    checkout),
                         "this tree": ({**base_env, **dict(kv.split("=", 1) for kv in args.this_env)}, None)}
            else:
                baseline = "source (baseline)"
                sides = {baseline: ({**base_env, "PYTHONPYCACHEPREFIX": str(empty)}, None), "bytecode": (base_env, None)}
            results: dict[str, list[tuple[float, float]]] = {v: [] for v in sides}
            with busy(args.busy):
                for i in range(args.runs):  # alternate, so drift hits both alike
                    for name, (env, tree) in (sides.items() if i % 2 == 0 else reversed(sides.items())):
                        empty.mkdir(exist_ok=True)
                        results[name].append(one_run(settings, spec, env, args.batch, tree))
                        print(f"run {i + 1} {name}: {results[name][-1][0]:.1f} s, batch 0 {results[name][-1][1]:.1f} s",
                              file=sys.stderr)
        finally:
            manager.down(settings)
    base_total = summary([t for t, _ in results[baseline]])[1]
    base_b0 = summary([b for _, b in results[baseline]])[1]
    rows = []
    for name, runs in results.items():
        tot, b0 = summary([t for t, _ in runs]), summary([b for _, b in runs])
        rows.append([name, " / ".join(f"{x:.1f}" for x in tot), f"{tot[1] / base_total:.2f}",
                     " / ".join(f"{x:.1f}" for x in b0), f"{b0[1] / base_b0:.2f}"])
    print(f"driver start, {args.app}, {args.events:,} events, {args.batch:,} per batch, local[2], {args.runs} runs "
          f"each{f', {args.busy} busy processes beside them' if args.busy else ''} (min / median / max s)")
    print(table(["variant", "start to exit", "ratio", "batch 0", "ratio"], rows))


if __name__ == "__main__":
    main()
