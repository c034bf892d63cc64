"""Platform start-up time (cold and warm) and idle memory (PSS) per component.

cold = a fresh state dir (includes the one-time Airflow DB migration);
warm = the same state dir again after `down`. Ports are picked free, the state dir is temporary.

    .venv/bin/python bench/startup.py [--runs 3] [--idle 20]
    .venv/bin/python bench/startup.py --broker [--runs 5]   # the broker alone: Apache Kafka vs a baseline

``--broker`` starts only the Kafka component, cold and warm, and measures its idle PSS. The
Kafka-protocol stand-in the platform ran before issue 23 was measured beside it in the same run
while it was still installed (docs/benchmarks.md has that table).
"""

from __future__ import annotations

import argparse
import platform as pyplatform
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import isolated_settings, summary, table
from streamops.platform import manager
from streamops.platform.process import read_pid


def timed_up(settings, only=None) -> float:
    t0 = time.monotonic()
    rows = manager.up(settings, only=only)
    elapsed = time.monotonic() - t0
    bad = [r.name for r in rows if not r.healthy]
    if bad:
        raise SystemExit(f"not healthy after up: {bad}")
    return elapsed


def pss_by_component(settings) -> dict[str, float]:
    """PSS in MiB of each component's whole process tree."""
    out = {}
    for comp in manager.select(settings):
        rec = read_pid(manager.pid_path(settings, comp.name))
        proc = rec.process() if rec else None
        if proc is None:
            continue
        total = 0
        for p in [proc, *proc.children(recursive=True)]:
            try:
                total += p.memory_full_info().pss
            except psutil.Error:
                pass
        out[comp.name] = total / 2**20
    return out


def broker_runs(runs: int, idle: float) -> dict[str, list[float]]:
    """Cold start, warm start (seconds to healthy) and idle PSS (MiB) of the broker alone."""
    out: dict[str, list[float]] = {"cold": [], "warm": [], "pss": []}
    for i in range(runs):
        with tempfile.TemporaryDirectory(prefix="streamops-bench-") as tmp:
            s = isolated_settings(Path(tmp) / "home")
            try:
                out["cold"].append(timed_up(s, only=["kafka"]))
                manager.down(s, only=["kafka"])
                out["warm"].append(timed_up(s, only=["kafka"]))
                time.sleep(idle)
                out["pss"].append(pss_by_component(s).get("kafka", 0.0))
            finally:
                manager.down(s, only=["kafka"])
        print(f"run {i + 1}: cold {out['cold'][-1]:.1f}s warm {out['warm'][-1]:.1f}s "
              f"pss {out['pss'][-1]:.0f} MiB", file=sys.stderr, flush=True)
    return out


def broker_main(args) -> None:
    results = {"Apache Kafka 4.1 (KRaft)": broker_runs(args.runs, args.idle)}
    print(f"# bench/startup.py --broker — {args.runs} runs, {psutil.cpu_count()} cores\n")
    base = next(iter(results.values()))
    rows = []
    for metric, unit in (("cold", "s"), ("warm", "s"), ("pss", "MiB")):
        for name, r in results.items():
            lo, med, hi = summary(r[metric])
            fmt = "{:.1f}" if unit == "s" else "{:.0f}"
            rows.append([f"{metric} ({unit})", name, fmt.format(lo), fmt.format(med), fmt.format(hi),
                         f"{med / summary(base[metric])[1]:.2f}"])
    print(table(["metric", "broker", "min", "median", "max", "ratio to first (median)"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--idle", type=float, default=20.0, help="seconds idle before measuring memory")
    ap.add_argument("--broker", action="store_true", help="the broker alone, cold/warm start and idle PSS")
    args = ap.parse_args()
    if args.broker:
        broker_main(args)
        return

    cold, warm, pss_runs = [], [], []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="streamops-bench-") as tmp:
            s = isolated_settings(Path(tmp) / "home")
            try:
                cold.append(timed_up(s))
                print(f"run {i + 1}: cold {cold[-1]:.1f}s", file=sys.stderr, flush=True)
                manager.down(s)
                warm.append(timed_up(s))
                print(f"run {i + 1}: warm {warm[-1]:.1f}s", file=sys.stderr, flush=True)
                time.sleep(args.idle)
                pss_runs.append(pss_by_component(s))
            finally:
                manager.down(s)

    print(f"# bench/startup.py — {args.runs} runs, {psutil.cpu_count()} cores, "
          f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {pyplatform.python_version()}\n")
    c, w = summary(cold), summary(warm)
    print(table(
        ["start to all-healthy", "min s", "median s", "max s", "ratio to cold (median)"],
        [["cold (fresh state dir, baseline)", f"{c[0]:.1f}", f"{c[1]:.1f}", f"{c[2]:.1f}", "1.00"],
         ["warm (state dir reused)", f"{w[0]:.1f}", f"{w[1]:.1f}", f"{w[2]:.1f}", f"{w[1] / c[1]:.2f}"]],
    ))
    print()
    names = list(pss_runs[0])
    rows = []
    for n in names:
        vals = [r.get(n, 0.0) for r in pss_runs]
        lo, med, hi = summary(vals)
        rows.append([n, f"{lo:.0f}", f"{med:.0f}", f"{hi:.0f}"])
    totals = summary([sum(r.values()) for r in pss_runs])
    rows.append(["**whole platform**", f"{totals[0]:.0f}", f"{totals[1]:.0f}", f"{totals[2]:.0f}"])
    print(table([f"idle PSS after {args.idle:.0f}s (MiB)", "min", "median", "max"], rows))


if __name__ == "__main__":
    main()
