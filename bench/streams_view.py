"""How fast the Streams view's data endpoints answer, with 10 apps and 24 hours of per-batch
history each, side by side with the same apps and no history (issue 25: under 200 ms).

    .venv/bin/python bench/streams_view.py [--runs 20] [--apps 10] [--hours 24] [--batch-s 2]

A temporary state dir and SQLite ledger: ``--apps`` apps, each deployed in the ledger with 20
operations and 5 savepoints, and (history side) one progress line per ``--batch-s`` seconds over
``--hours`` hours, as a driver writes them (``AppDir.append_progress``, so rotation keeps what it
keeps). Then the plugin's FastAPI app (``streams_view.create_app``, without Airflow's login
check) is asked through Starlette's test client, ``--runs`` times each:

- ``/api/streams``: the Streams page's rows (every app);
- ``/api/apps/APP?window_s=3600`` and ``?window_s=86400``: one app's page over 1 h and 24 h.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "plugins"))
from bench._common import summary, table


def populate(home: Path, apps: list[str], *, hours: float, batch_s: float) -> int:
    from streamops.app.dir import AppDir
    from streamops.ledger import Ledger
    from streamops.settings import Settings

    settings = Settings.from_env()
    ledger = Ledger.open(settings.ledger_db_url)
    now = datetime.now(UTC)
    lines = 0
    try:
        for app in apps:
            ledger.set_desired(app, status="running", parallelism=2, who="bench")
            ledger.report_observed(app, status="running", parallelism=2, executors=2)
            for i in range(20):
                ledger.record(app, "resize" if i % 2 else "savepoint", {"i": i}, who="bench", outcome="succeeded",
                              before={"parallelism": 1}, after={"parallelism": 2})
            for i in range(5):
                ledger.add_savepoint(id=f"{app}-sp{i}", app=app, batch_id=i, path="/x", sha256="0" * 64, bytes=1,
                                     offsets={}, created_at=now - timedelta(hours=i))
            if not hours:
                continue
            d = AppDir.of(settings, app)
            n = int(hours * 3600 / batch_s)
            start = now - timedelta(hours=hours)
            for b in range(n):
                at = start + timedelta(seconds=b * batch_s)
                end = {"in": {str(p): b * 50 + p for p in range(6)}}
                d.append_progress({
                    "batch_id": b, "timestamp": at.isoformat(), "input_rows": 300, "input_rows_per_s": 150.0,
                    "processed_rows_per_s": 900.0, "duration_ms": {"triggerExecution": 400, "addBatch": 300},
                    "end_offsets": [json.dumps(end)], "start_offsets": [json.dumps(end)],
                    "latest_offsets": [json.dumps(end)], "state_rows": 50_000, "state_bytes": 8_000_000,
                    "executors": 2, "dlq": {"bad_json": 1}})
            lines += n
    finally:
        ledger.close()
    return lines


def timed(client, url: str, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = client.get(url)
        out.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200, (url, r.status_code, r.text[:300])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--apps", type=int, default=10)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--batch-s", type=float, default=2.0)
    args = ap.parse_args()
    from fastapi.testclient import TestClient

    apps = [f"app{i:02d}" for i in range(args.apps)]
    results: dict[tuple[str, str], list[float]] = {}
    kept: dict[str, int] = {}
    for side, hours in (("no history", 0.0), (f"{args.hours:g} h history", args.hours)):
        with tempfile.TemporaryDirectory() as tmp:
            home, repo = Path(tmp) / "home", Path(tmp) / "repo"
            (repo / "include").mkdir(parents=True)
            specs = {"apps": {a: {"job": "jobs.orders", "input_topics": ["in"], "output_topic": f"{a}-out"}
                              for a in apps}}
            (repo / "include" / "streams.yaml").write_text(json.dumps(specs))  # JSON is YAML
            os.environ["STREAMOPS_HOME"], os.environ["STREAMOPS_REPO"] = str(home), str(repo)
            t0 = time.perf_counter()
            written = populate(home, apps, hours=hours, batch_s=args.batch_s)
            print(f"{side}: {written:,} progress lines written in {time.perf_counter() - t0:.0f} s", flush=True)
            from streamops.observe.streams import history
            from streamops.settings import Settings

            kept[side] = len(history(Settings.from_env(), apps[0]))
            from streamops_airflow.streams_view import create_app

            client = TestClient(create_app(dependencies=[]))
            for name, url in (("/api/streams", "/api/streams"),
                              ("/api/apps/APP (1 h)", f"/api/apps/{apps[0]}?window_s=3600"),
                              ("/api/apps/APP (24 h)", f"/api/apps/{apps[0]}?window_s=86400")):
                timed(client, url, 2)  # imports, first connections
                results[(name, side)] = timed(client, url, args.runs)
    rows = []
    for (name, side), ms in results.items():
        base = statistics.median(results[(name, "no history")])
        lo, mid, hi = summary(ms)
        rows.append([name, side, f"{kept[side]:,}", f"{lo:.1f}", f"{mid:.1f}", f"{hi:.1f}", f"{mid / base:.2f}"])
    print()
    print(f"{args.apps} apps, {args.runs} requests each (ms; ratio: median / the same endpoint with no history)")
    print(table(["endpoint", "history", "batches kept per app", "min", "median", "max", "ratio"], rows))


if __name__ == "__main__":
    main()
