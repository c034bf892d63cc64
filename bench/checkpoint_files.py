"""Writing one checkpoint file, by the checkpoint file manager Spark uses (issue 39).

    .venv/bin/python bench/checkpoint_files.py [--files 100] [--runs 3]

In one local JVM (PySpark's, with the plugin jar on its class path), each run writes ``--files``
small files (200 bytes, as an offsets or commit log entry) into a fresh folder through each
manager's ``createAtomic`` (a temporary file renamed into place on close, refusing to replace),
in turn: Spark's default (``FileContextBasedCheckpointFileManager``), Spark's
``FileSystemBasedCheckpointFileManager``, and ``io.streamops.spark.LocalCheckpointFileManager``
(``streamops.spark.checkpoint_files``). Reported: milliseconds per file (min/median/max over
runs), the ratio to Spark's default, and the processes (and threads) the machine started per
file while the manager wrote (``/proc/stat``; on a quiet machine, the shell commands Hadoop's
local file system runs). The py4j calls from Python (four per file) are in every row alike.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import summary, table

MANAGERS = {
    "Spark's default (FileContext)": "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager",
    "Spark's FileSystem": "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "streamops LocalCheckpointFileManager": "io.streamops.spark.LocalCheckpointFileManager",
}


def forks_so_far() -> int:
    """Processes and threads created on this machine since boot (``/proc/stat``'s ``processes``)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("processes "):
            return int(line.split()[1])
    raise RuntimeError("/proc/stat has no processes line")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    from streamops.spark.warmup_plugin import plugin_jar

    jar = plugin_jar()
    if jar is None:
        raise SystemExit("the plugin jar did not build (javac?)")
    spark = (SparkSession.builder.master("local[1]").appName("bench-checkpoint-files")
             .config("spark.ui.enabled", "false").config("spark.driver.extraClassPath", str(jar)).getOrCreate())
    jvm, conf = spark._jvm, spark._jsc.hadoopConfiguration()
    hadoop_path = jvm.org.apache.hadoop.fs.Path
    times: dict[str, list[float]] = {name: [] for name in MANAGERS}
    forks: dict[str, list[float]] = {name: [] for name in MANAGERS}
    tmp = Path(tempfile.mkdtemp(prefix="bench-checkpoint-files-"))
    try:
        for run in range(args.runs):
            for name, cls in MANAGERS.items():
                folder = tmp / f"run-{run}-{len(times[name])}-{cls.rsplit('.', 1)[1]}"
                folder.mkdir()
                root = hadoop_path(folder.as_uri())
                manager = functools.reduce(getattr, cls.split("."), jvm)(root, conf)  # the class's constructor
                f0, t0 = forks_so_far(), time.perf_counter()
                for i in range(args.files):
                    out = manager.createAtomic(hadoop_path(f"{folder.as_uri()}/{i}"), False)
                    out.write(b"x" * 200)
                    out.close()
                elapsed, started = time.perf_counter() - t0, forks_so_far() - f0
                names = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
                if names != sorted(str(i) for i in range(args.files)):
                    raise SystemExit(f"{name}: wrote {len(names)} files, not {args.files}")
                times[name].append(1000 * elapsed / args.files)
                forks[name].append(started / args.files)
                print(f"run {run + 1} {name}: {times[name][-1]:.2f} ms per file", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    base = summary(times[next(iter(MANAGERS))])[1]
    rows = []
    for name in MANAGERS:
        lo, med, hi = summary(times[name])
        rows.append([name, f"{lo:.2f}", f"{med:.2f}", f"{hi:.2f}", f"{med / base:.3f}",
                     f"{summary(forks[name])[1]:.1f}"])
    print(f"\n{args.files} files of 200 bytes per manager and run, {args.runs} runs, local JVM\n")
    print(table(["manager", "ms per file min", "median", "max", "ratio to Spark's default",
                 "processes started per file"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
