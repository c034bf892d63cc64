"""One state blob against named state (``streamops.named_state``) on Spark, for the two time
examples: the same records through the same query, once with the app's job (``applyInPandasWithState``,
the key's whole state serialized per batch) and once with its named-state twin
(``transformWithStateInPandas``, one variable per part, only changed parts written).

    .venv/bin/python bench/named_state.py [--runs 3] [--events 60000] [--batches 12] [--partitions 2] \
        [--apps "recent_pages large,sessions"]

Per run (seed = run number) and job, on one local Spark (``local[2]``, RocksDB state with
changelog checkpointing, as the apps run), the app's sample is cut into ``--batches`` micro-batches
of a file stream (``state.lint``'s runner, ticks included) and measured:

- ``s``: wall time of the whole stream (every batch, ticks' batches included);
- ``store KB``: bytes of the RocksDB changelog files the batches wrote (``state/0/*/N.changelog``:
  what each batch writes to the checkpoint for its state);
- ``changelog KB``: key + value bytes of the changelog records (what Kafka's changelog topic gets);
- ``state KB``: the final state as the changelog holds it, after compaction (latest per key).

The twins are in ``tests/fixtures/named_jobs.py``: ``recent_pages`` on one blob with its TTL
written as a timer by hand; sessions with ``open``/``closed`` as lists; the join with the price in
force as a value, the buffer as a list, the written joins as a map. Every run must equal
``check``'s fold (asserted).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import summary, table
from jobs.enriched_orders import ORDERS, PRICES, EnrichedOrders
from jobs.enriched_orders import generate as orders_and_prices
from jobs.recent_pages import RecentPages
from jobs.recent_pages import generate as visits
from jobs.sessions import Sessions
from jobs.sessions import generate as clicks
from tests.fixtures.named_jobs import BlobRecentPages, NamedOrders, NamedSessions

PAIRS = {
    # the app's own sample: ~6 pages per user in the hour, most of them revisited every batch
    "recent_pages": (BlobRecentPages, RecentPages, ["page-visits"],
                     lambda n, seed: visits(n, seed=seed, users=300, pages=500)),
    # a few hundred pages per user in the hour, a batch changing a few dozen of them
    "recent_pages large": (BlobRecentPages, RecentPages, ["page-visits"],
                                 lambda n, seed: visits(n, seed=seed, users=50, pages=2000, step_ms=100)),
    "sessions": (Sessions, NamedSessions, ["clicks"], lambda n, seed: clicks(n, seed=seed, users=2000, step_ms=2_000)),
    "enriched_orders": (EnrichedOrders, NamedOrders, [ORDERS, PRICES],
                        lambda n, seed: orders_and_prices(n, seed=seed, skus=2000)),
}


def session(**conf: str):
    import os

    from pyspark.sql import SparkSession

    from streamops.host import jars
    from streamops.spark import pydaemon
    from streamops.spark.checkpoint_files import checkpoint_files_conf
    from streamops.spark.session import ROCKSDB_PROVIDER

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    spark = (SparkSession.builder.master("local[2]").appName("bench-named-state")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g")
             .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
             .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .config("spark.sql.adaptive.enabled", "false")
             .config(map=pydaemon.conf()).config(map=jars.spark_conf())
             .config(map=checkpoint_files_conf())  # the apps' checkpoint files (no shell command per file)
             .config(map=conf).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def measure(spark, job_cls, records, batches: int, partitions: int) -> dict:
    from streamops.named_state import decode_changelog
    from streamops.spark.query.plan import JobQuery, Topics
    from streamops.state.lint_spark import TICKS, compare, run_stream
    from streamops.state.oracle import fold_input

    root = Path(tempfile.mkdtemp(prefix="bench-named-"))
    query = JobQuery(job_cls, state_partitions=partitions, topics=Topics("out", "changelog", "dlq", TICKS))
    written = [0]
    import streamops.spark.query.plan as jq

    records_fn = jq.JobQuery.records

    def counting(self, table, batch_id):  # the changelog records' bytes, as the committer would send them
        out = records_fn(self, table, batch_id)
        written[0] += sum(len(r.key or b"") + len(r.value or b"") for r in out if r.topic == "changelog")
        return out

    jq.JobQuery.records = counting
    try:
        t0 = time.perf_counter()
        got, n = run_stream(spark, query, records, root, batches)
        seconds = time.perf_counter() - t0
    finally:
        jq.JobQuery.records = records_fn
    try:
        expected = fold_input(job_cls, records)
        diffs = compare(job_cls, expected, got)
        assert not diffs, diffs
        store = sum(f.stat().st_size for f in (root / "checkpoint" / "state").rglob("*.changelog"))
        final = sum(len(k) + len(v) for k, v in got["changelog"].items() if v is not None)
        assert decode_changelog(job_cls, got["changelog"]) == expected.states
        return {"s": seconds, "store": store / 1024, "changelog": written[0] / 1024, "state": final / 1024,
                "batches": n}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--partitions", type=int, default=2, help="state partitions")
    ap.add_argument("--apps", default=",".join(PAIRS), help="comma-separated, of: " + ", ".join(PAIRS))
    args = ap.parse_args()
    from streamops.state.lint import sample_records

    spark = session()
    results: dict[tuple[str, str], list[dict]] = {}
    try:
        for run in range(args.runs):
            for app in (a.strip() for a in args.apps.split(",")):
                blob_cls, named_cls, topics, gen = PAIRS[app]
                records = sample_records(blob_cls, topics, 3, gen(args.events, run))
                sides = [("one blob", blob_cls), ("named", named_cls)]
                for side, cls in sides if run % 2 == 0 else sides[::-1]:
                    r = measure(spark, cls, records, args.batches, args.partitions)
                    results.setdefault((app, side), []).append(r)
                    print(f"run {run} {app} {side}: {r['s']:.1f}s, {r['batches']} batches, store "
                          f"{r['store']:.0f} KB, changelog {r['changelog']:.0f} KB", flush=True)
    finally:
        spark.stop()
    rows = []
    for (app, side), rs in results.items():
        base = results[(app, "one blob")]
        med = {m: statistics.median(r[m] for r in rs) for m in ("s", "store", "changelog", "state")}
        ref = {m: statistics.median(r[m] for r in base) for m in ("s", "store", "changelog", "state")}
        lo, mid, hi = summary([r["s"] for r in rs])
        rows.append([app, side, f"{lo:.1f} / {mid:.1f} / {hi:.1f}", f"{ref['s'] / med['s']:.2f}x",
                     f"{med['store']:,.0f}", f"{med['store'] / ref['store']:.2f}x",
                     f"{med['changelog']:,.0f}", f"{med['changelog'] / ref['changelog']:.2f}x", f"{med['state']:,.0f}"])
    print()
    print(f"{args.events:,} records, {args.batches} input batches, {args.partitions} state partitions, "
          f"{args.runs} runs (speed ratio: one blob's median time / this one's)")
    print(table(["app", "state", "s min/med/max", "speed vs blob", "store KB", "vs blob", "changelog KB",
                 "vs blob", "final state KB"], rows))


if __name__ == "__main__":
    main()
