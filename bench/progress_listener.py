"""What the driver's progress listener costs per micro-batch, in CPU of the driver's JVM and Python.

Every app driver registers one (``streamops.spark.driver.report.progress_listener``: the progress file,
the observed rates). Three variants side by side, each in a fresh process:

- ``none``: no listener (the floor);
- ``pyspark`` (baseline): a ``StreamingQueryListener`` as PySpark delivers it, each event turned
  into Python objects field by field over Py4J (what ours did before);
- ``json``: ours, the progress taken as Spark's JSON in one call.

A trivial query (rate source, 200 rows/s, noop sink, 100 ms trigger) on ``local[2]`` with the JVM
options the tests use; after a 15 s warm-up, CPU over ``--seconds`` is divided by the batches run.
Printed: ms of CPU per batch, min / median / max over ``--runs``, and the ratio of the medians
to the baseline.

    .venv/bin/python bench/progress_listener.py [--runs 3] [--seconds 40]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import summary, table

VARIANTS = ("none", "pyspark", "json")
BASELINE = "pyspark"


def one(variant: str, seconds: float) -> tuple[float, float]:
    """(JVM ms, Python ms) of CPU per batch, in this process; a fresh session each call."""
    import time

    import psutil
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQueryListener

    from streamops.app.dir import AppDir
    from streamops.spark.driver.report import progress_listener

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    if variant == "json":
        spark.streams.addListener(progress_listener(AppDir(Path(tempfile.mkdtemp())), None, "q"))
    elif variant == "pyspark":
        class Stock(StreamingQueryListener):
            def onQueryStarted(self, event) -> None:
                pass

            def onQueryProgress(self, event) -> None:
                _ = event.progress.batchId

            def onQueryIdle(self, event) -> None:
                pass

            def onQueryTerminated(self, event) -> None:
                pass

        spark.streams.addListener(Stock())
    q = (spark.readStream.format("rate").option("rowsPerSecond", 200).load()
         .writeStream.queryName("q").format("noop").trigger(processingTime="100 milliseconds").start())
    try:
        time.sleep(15)
        me = psutil.Process()
        jvm = next(c for c in me.children(recursive=True) if c.name() == "java")

        def cpu() -> tuple[float, float]:
            return sum(jvm.cpu_times()[:2]), sum(me.cpu_times()[:2])

        (j0, p0), b0 = cpu(), q.lastProgress["batchId"]
        time.sleep(seconds)
        (j1, p1), b1 = cpu(), q.lastProgress["batchId"]
        return 1000 * (j1 - j0) / (b1 - b0), 1000 * (p1 - p0) / (b1 - b0)
    finally:
        q.stop()
        spark.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)  # a child run
    a = ap.parse_args()
    if a.one:
        print(*one(a.one, a.seconds))
        return 0
    env = {**os.environ, "JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}  # as in tests
    got: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    for run in range(a.runs):
        for v in VARIANTS:  # alternating, so drift hits every variant alike
            out = subprocess.run([sys.executable, __file__, "--one", v, "--seconds", str(a.seconds)], env=env,
                                 capture_output=True, text=True, check=True).stdout.split()
            got[v].append((float(out[-2]), float(out[-1])))
            print(f"run {run + 1}/{a.runs} {v}: JVM {got[v][-1][0]:.0f} ms, Python {got[v][-1][1]:.1f} ms per batch",
                  file=sys.stderr)
    rows = []
    base = [summary([r[i] for r in got[BASELINE]])[1] for i in (0, 1)]
    for v in VARIANTS:
        for i, side in enumerate(("driver JVM", "driver Python")):
            lo, med, hi = summary([r[i] for r in got[v]])
            rows.append([v, side, f"{lo:.1f}", f"{med:.1f}", f"{hi:.1f}", f"{med / base[i]:.2f}"])
    print(table(["listener", "CPU ms per batch", "min", "median", "max", f"ratio to {BASELINE} (median)"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
