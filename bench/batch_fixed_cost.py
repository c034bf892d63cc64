"""What a micro-batch of one record costs, by operator and by how the JVM reaches its Python
workers (TCP on loopback, Spark's default, or Unix domain sockets, ``pydaemon.UNIX_SOCKETS``).

    .venv/bin/python bench/batch_fixed_cost.py [--runs 3] [--batches 20] [--partitions 4] \\
        [--shapes jvm-agg,map-in-arrow,pandas-with-state,pandas-with-state-timeout] [--sockets tcp,unix]

Per run, shape and socket kind: a fresh local Spark (``local[2]``, the benches' session: RocksDB
with changelog checkpointing, the apps' checkpoint file manager), a file stream of ``--batches``
files of one row each, exchanged into ``--partitions`` partitions, then the shape's operator and a
``foreachBatch`` sink that collects the batch (as the apps' sink does):

- ``jvm-agg``: ``groupBy().count()``, a stateful operator without Python;
- ``map-in-arrow``: a Python ``mapInArrow`` that returns its input (no state);
- ``pandas-with-state``: ``applyInPandasWithState`` with a function that counts the rows and
  writes a state (``NoTimeout``, as ``orders``);
- ``pandas-with-state-timeout``: the same with a watermark and ``EventTimeTimeout`` (as the jobs
  with stream time: Spark runs the function a second time per partition for the timed-out keys).

Reported per batch (the first 3 left out: Python workers, state stores, JIT), min/median/max over
the runs of each run's median: ``triggerExecution``, and the state operator's own times summed over
its partitions' tasks (all updates, all removals, commit). Ratio: the median triggerExecution to TCP's.
"""

from __future__ import annotations

import argparse
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
from bench._common import summary, table

SHAPES = ("jvm-agg", "map-in-arrow", "pandas-with-state", "pandas-with-state-timeout")
SOCKETS = ("tcp", "unix")
SKIP = 3


def one(shape: str, sockets: str, batches: int, partitions: int) -> dict:
    """One fresh JVM (this script again, ``--child``), its per-batch medians."""
    out = subprocess.run([sys.executable, __file__, "--child", shape, sockets, str(batches), str(partitions)],
                         check=True, capture_output=True, text=True, timeout=900).stdout
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    trigger, updates, removals, commit = (float(v) for v in line.split()[1:])
    return {"trigger": trigger, "updates": updates, "removals": removals, "commit": commit}


def child(shape: str, sockets: str, batches: int, partitions: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.named_state import session
    from streamops.spark.pydaemon import UNIX_SOCKETS

    spark = session(**{UNIX_SOCKETS: "true" if sockets == "unix" else "false"})
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    root = Path(tempfile.mkdtemp(prefix="bench-fixed-cost-"))
    try:
        folder = root / "in"
        folder.mkdir()
        base = time.time() - batches
        for i in range(batches):  # one row each, oldest first (the file source orders by mtime)
            path = folder / f"p{i}.parquet"
            pq.write_table(pa.table({"key": [f"k{i % 3}"], "lane": pa.array([0], pa.int32()), "row": [b"x"]}), path)
            os.utime(path, (base + i, base + i))

        def counts(key, frames, state):
            import pandas as pd

            n = sum(len(f) for f in frames)
            state.update((b"s",))
            yield pd.DataFrame({"kind": ["out"], "key": [key[0]], "value": [str(n).encode()]})

        from pyspark.sql import functions as F

        df = (spark.readStream.schema("key string, lane int, row binary").option("maxFilesPerTrigger", 1)
              .parquet(str(folder)).repartition(partitions, "key", "lane"))
        out_ddl, state_ddl = "kind string, key string, value binary", "blob binary"
        if shape == "jvm-agg":
            out = df.groupBy("key", "lane").count()
        elif shape == "map-in-arrow":
            out = df.mapInArrow(lambda it: it, "key string, lane int, row binary")
        elif shape == "pandas-with-state":
            out = df.groupBy("key", "lane").applyInPandasWithState(counts, out_ddl, state_ddl, "update", "NoTimeout")
        else:
            timed = df.withColumn("wm", F.timestamp_millis(F.lit(1))).withWatermark("wm", "1 millisecond")
            out = timed.groupBy("key", "lane").applyInPandasWithState(counts, out_ddl, state_ddl, "update",
                                                                      "EventTimeTimeout")
        q = (out.writeStream.outputMode("update").foreachBatch(lambda d, _i: d.toArrow())
             .option("checkpointLocation", str(root / "cp")).start())
        q.processAllAvailable()
        q.stop()
        ps = [p for p in q.recentProgress if p["numInputRows"] > 0][SKIP:]
        ops = [p["stateOperators"][0] for p in ps if p["stateOperators"]]

        def med(key: str) -> float:
            return statistics.median(s[key] for s in ops) if ops else 0.0

        print("RESULT", statistics.median(p["durationMs"]["triggerExecution"] for p in ps),
              med("allUpdatesTimeMs"), med("allRemovalsTimeMs"), med("commitTimeMs"), flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        shape, sockets, batches, partitions = sys.argv[2:6]
        child(shape, sockets, int(batches), int(partitions))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated, of: " + ", ".join(SHAPES))
    ap.add_argument("--sockets", default=",".join(SOCKETS), help="comma-separated, of: " + ", ".join(SOCKETS))
    args = ap.parse_args()
    shapes = [s.strip() for s in args.shapes.split(",")]
    sockets = [s.strip() for s in args.sockets.split(",")]
    bad = sorted(set(shapes) - set(SHAPES)) + sorted(set(sockets) - set(SOCKETS))
    if bad:
        ap.error(f"unknown {', '.join(bad)} (shapes: {', '.join(SHAPES)}; sockets: {', '.join(SOCKETS)})")
    if args.batches <= SKIP:
        ap.error(f"--batches must be more than {SKIP} (the first {SKIP} are left out)")
    results: dict[tuple[str, str], list[dict]] = {}
    for n in range(args.runs):
        for shape in shapes:
            for kind in sockets if n % 2 == 0 else sockets[::-1]:
                r = one(shape, kind, args.batches, args.partitions)
                results.setdefault((shape, kind), []).append(r)
                print(f"run {n} {shape} {kind}: {r['trigger']:.0f} ms per batch", flush=True)
    rows = []
    for (shape, kind), rs in results.items():
        lo, mid, hi = summary([r["trigger"] for r in rs])
        base = results.get((shape, "tcp"))
        ratio = f"{mid / statistics.median(r['trigger'] for r in base):.2f}" if base else ""
        rows.append([shape, kind, f"{lo:.0f}", f"{mid:.0f}", f"{hi:.0f}", ratio,
                     *(f"{statistics.median(r[k] for r in rs):.0f}" for k in ("updates", "removals", "commit"))])
    print()
    print(f"one-record batches, {args.partitions} partitions, local[2], {args.runs} runs of {args.batches} batches "
          f"(the first {SKIP} left out); state times summed over the partitions' tasks")
    print(table(["shape", "sockets", "triggerExecution ms min", "median", "max", "ratio to tcp (median)",
                 "state: all updates ms", "all removals ms", "commit ms"], rows))


if __name__ == "__main__":
    main()
