"""Platform start-up time (cold and warm) and idle memory (PSS) per component, untouched and after
the Streams page and the Prometheus exporter were used (issue 25), against the 2 GiB budget.

cold = a fresh state dir (includes the one-time Airflow DB migration);
warm = the same state dir again after `down`. Ports are picked free, the state dir is temporary.

Memory, per run and side by side, on the warm platform:

- ``untouched``: idle PSS after ``--idle`` s, before anything but the health checks asked it;
- ``after page + scrape``: then an operator's browser and a Prometheus server use it (log in with
  the admin's password through ``/auth/token``; the Streams page, its script and style and
  ``/streamops/api/streams``, the ``--app`` page with its data over 1 h and 24 h and its DLQ,
  ``--requests`` times each (the DLQ twice); ``settings.metrics_url`` scraped ``--requests``
  times), then ``--idle`` s idle and PSS again;
- ``app deployed`` (unless ``--no-deploy``): a few thousand of ``--app``'s records produced, the app
  deployed (``streamops deploy``, the spec's parallelism), the page and exporter used again, idle,
  PSS again. The app's driver (a child of the supervisor) and its executors (children of the Spark
  workers) are counted apart from the components they run under: the budget is the platform's.

    .venv/bin/python bench/startup.py [--runs 3] [--idle 20] [--app user_activity] [--no-deploy]
    .venv/bin/python bench/startup.py --broker [--runs 5]   # the broker alone: Apache Kafka vs a baseline

``--broker`` starts only the Kafka component, cold and warm, and measures its idle PSS. The
Kafka-protocol stand-in the platform ran before issue 23 was measured beside it in the same run
while it was still installed (docs/benchmarks.md has that table).
"""

from __future__ import annotations

import argparse
import json
import platform as pyplatform
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import isolated_settings, summary, table
from streamops.host.process import read_pid
from streamops.platform import manager


def timed_up(settings, only=None) -> float:
    t0 = time.monotonic()
    rows = manager.up(settings, only=only)
    elapsed = time.monotonic() - t0
    bad = [r.name for r in rows if not r.healthy]
    if bad:
        raise SystemExit(f"not healthy after up: {bad}")
    return elapsed


def _pss(p: psutil.Process) -> int:
    try:
        return p.memory_full_info().pss
    except psutil.Error:
        return 0


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def pss_by_component(settings, apps: tuple[str, ...] = ()) -> dict[str, float]:
    """PSS in MiB of each component's whole process tree. The drivers of ``apps`` (the
    supervisor's children) count as ``driver APP`` and Spark's executors (the workers' children,
    with their Python workers) as ``executors``, not as the component they run under."""
    from streamops.lifecycle import driver

    bucket: dict[int, str] = {}
    procs: dict[int, psutil.Process] = {}
    for comp in manager.select(settings):
        rec = read_pid(manager.pid_path(settings, comp.name))
        proc = rec.process() if rec else None
        if proc is None:
            continue
        for p in _tree(proc):
            bucket[p.pid], procs[p.pid] = comp.name, p
    for p in list(procs.values()):
        try:
            executor = "CoarseGrainedExecutorBackend" in " ".join(p.cmdline())
        except psutil.Error:
            continue
        if executor:
            for q in _tree(p):
                bucket[q.pid], procs[q.pid] = "executors", q
    for app in apps:
        rec = driver.running(settings, app)
        proc = rec.process() if rec else None
        for q in _tree(proc) if proc is not None else []:
            bucket[q.pid], procs[q.pid] = f"driver {app}", q
    out: dict[str, float] = {}
    for pid, name in bucket.items():
        out[name] = out.get(name, 0.0) + _pss(procs[pid]) / 2**20
    return out


def _http(url: str, *, token: str | None = None, body: dict | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                 method="POST" if body is not None else "GET")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def use_page_and_exporter(settings, app: str, requests: int, timings: dict[str, list[float]]) -> None:
    """What an operator's browser and a Prometheus server ask of the platform; every answer must be 200."""
    password = json.loads(manager.password_file(settings).read_text())["admin"]
    t0 = time.perf_counter()
    status, body = _http(f"{settings.airflow_url}/auth/token", body={"username": "admin", "password": password})
    if status not in (200, 201):
        raise SystemExit(f"log in: HTTP {status} {body[:300]!r}")
    timings.setdefault("POST /auth/token", []).append((time.perf_counter() - t0) * 1000)
    token = json.loads(body)["access_token"]
    page = ["/streamops/", "/streamops/ui/streams.css", "/streamops/ui/streams.js", "/streamops/api/streams"]
    app_page = [f"/streamops/apps/{app}", f"/streamops/api/apps/{app}?window_s=3600",
                f"/streamops/api/apps/{app}?window_s=86400"]
    shown = {f"/streamops/apps/{app}": "/streamops/apps/APP",
             f"/streamops/api/apps/{app}?window_s=3600": "/streamops/api/apps/APP?window_s=3600",
             f"/streamops/api/apps/{app}?window_s=86400": "/streamops/api/apps/APP?window_s=86400",
             f"/streamops/api/apps/{app}/dlq": "/streamops/api/apps/APP/dlq"}

    def get(url: str, name: str, auth: bool = True) -> None:
        t = time.perf_counter()
        status, body = _http(url, token=token if auth else None)
        if status != 200:
            raise SystemExit(f"GET {url}: HTTP {status} {body[:300]!r}")
        timings.setdefault(f"GET {name}", []).append((time.perf_counter() - t) * 1000)

    for i in range(requests):
        for path in page + app_page + ([f"/streamops/api/apps/{app}/dlq"] if i < 2 else []):
            get(f"{settings.airflow_url}{path}", shown.get(path, path))
        get(settings.metrics_url, "/metrics (supervisor)", auth=False)


def deploy_app(settings, app: str, events: int) -> float:
    """Produce ``events`` of the app's records, deploy it at its spec's parallelism; seconds taken."""
    from bench.apps import produce_input
    from streamops.app.context import open_app
    from streamops.lifecycle.operations import deploy

    t0 = time.monotonic()
    produce_input(settings, app, events, seed=1)
    with open_app(settings, app) as ctx:
        deploy(ctx, who="bench", timeout=300)
    return time.monotonic() - t0


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


UNTOUCHED, USED, DEPLOYED = "untouched", "after page + scrape", "app deployed"
BUDGET_MIB = 2048.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--idle", type=float, default=20.0, help="seconds idle before measuring memory")
    ap.add_argument("--broker", action="store_true", help="the broker alone, cold/warm start and idle PSS")
    ap.add_argument("--app", default="user_activity", help="the app whose page is opened (and deployed)")
    ap.add_argument("--requests", type=int, default=5, help="times each page request and scrape is made")
    ap.add_argument("--events", type=int, default=20_000, help="records produced for the deployed app")
    ap.add_argument("--no-deploy", action="store_true", help="skip the side with the app deployed")
    args = ap.parse_args()
    if args.broker:
        broker_main(args)
        return

    cold, warm = [], []
    pss_runs: dict[str, list[dict[str, float]]] = {UNTOUCHED: [], USED: []}
    if not args.no_deploy:
        pss_runs[DEPLOYED] = []
    timings: dict[str, list[float]] = {}
    deploy_s: list[float] = []
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
                pss_runs[UNTOUCHED].append(pss_by_component(s))
                use_page_and_exporter(s, args.app, args.requests, timings)
                time.sleep(args.idle)
                pss_runs[USED].append(pss_by_component(s))
                print(f"run {i + 1}: whole platform {sum(pss_runs[UNTOUCHED][-1].values()):.0f} MiB untouched, "
                      f"{sum(pss_runs[USED][-1].values()):.0f} MiB after page + scrape", file=sys.stderr, flush=True)
                if not args.no_deploy:
                    try:
                        deploy_s.append(deploy_app(s, args.app, args.events))
                    except Exception as exc:  # noqa: BLE001 - the platform's sides stand without it
                        print(f"run {i + 1}: {args.app} not deployed ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0][:300] if str(exc) else ''}); no app side this run",
                              file=sys.stderr, flush=True)
                        continue
                    print(f"run {i + 1}: {args.app} deployed in {deploy_s[-1]:.1f}s", file=sys.stderr, flush=True)
                    use_page_and_exporter(s, args.app, args.requests, timings)
                    time.sleep(args.idle)
                    pss_runs[DEPLOYED].append(pss_by_component(s, (args.app,)))
            finally:
                manager.down(s)

    if not pss_runs.get(DEPLOYED, True):
        del pss_runs[DEPLOYED]
    print(f"# bench/startup.py — {args.runs} runs, {psutil.cpu_count()} cores, "
          f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {pyplatform.python_version()}\n")
    c, w = summary(cold), summary(warm)
    print(table(
        ["start to all-healthy", "min s", "median s", "max s", "ratio to cold (median)"],
        [["cold (fresh state dir, baseline)", f"{c[0]:.1f}", f"{c[1]:.1f}", f"{c[2]:.1f}", "1.00"],
         ["warm (state dir reused)", f"{w[0]:.1f}", f"{w[1]:.1f}", f"{w[2]:.1f}", f"{w[1] / c[1]:.2f}"]],
    ))
    print()
    app_parts = {n for r in pss_runs.get(DEPLOYED, []) for n in r if n == "executors" or n.startswith("driver ")}
    names = [n for n in pss_runs[UNTOUCHED][0] if n not in app_parts]
    names += [n for r in pss_runs[USED] + pss_runs.get(DEPLOYED, []) for n in r
              if n not in names and n not in app_parts]
    rows = []

    def add(label: str, per_side: dict[str, list[float]]) -> None:
        base = summary(per_side[UNTOUCHED])[1] if UNTOUCHED in per_side else None
        for side, vals in per_side.items():
            lo, med, hi = summary(vals)
            ratio = f"{med / base:.2f}" if base else "–"
            rows.append([label, side, f"{lo:.0f}", f"{med:.0f}", f"{hi:.0f}", ratio])

    for n in names:
        add(n, {side: [r.get(n, 0.0) for r in runs] for side, runs in pss_runs.items()})
    platform_total = {side: [sum(v for k, v in r.items() if k not in app_parts) for r in runs]
                      for side, runs in pss_runs.items()}
    add("**whole platform**", platform_total)
    for n in sorted(app_parts):
        add(n, {DEPLOYED: [r.get(n, 0.0) for r in pss_runs[DEPLOYED]]})
    if DEPLOYED in pss_runs:
        add("platform + app", {DEPLOYED: [sum(r.values()) for r in pss_runs[DEPLOYED]]})
    print(table([f"idle PSS after {args.idle:.0f}s (MiB)", "side", "min", "median", "max",
                 "ratio to untouched (median)"], rows))
    print()
    for side, vals in platform_total.items():
        _lo, med, hi = summary(vals)
        verdict = "under" if hi < BUDGET_MIB else "OVER"
        print(f"- whole platform, {side}: median {med:.0f} MiB ({med / 1024:.2f} GiB), max {hi:.0f} MiB: "
              f"{verdict} the 2 GiB budget ({BUDGET_MIB - hi:.0f} MiB to spare at the max)")
    if deploy_s:
        d = summary(deploy_s)
        print(f"- {args.app}: produce {args.events:,} records and deploy to its first batch: "
              f"{d[0]:.1f} / {d[1]:.1f} / {d[2]:.1f} s (min / median / max)")
    print()
    print(table(["request (all runs and sides)", "n", "min ms", "median ms", "max ms"],
                [[name, len(ms), *(f"{x:.0f}" for x in summary(ms))] for name, ms in timings.items()]))


if __name__ == "__main__":
    main()
