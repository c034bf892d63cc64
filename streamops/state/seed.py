"""Seed a checkpoint with given state: the one mechanism behind compaction and rebuild-state.

Spark 4.2 has no API to write a state store (offline repartitioning arrives in 4.3), so the state
is written by Spark itself: a one-batch streaming query runs the job's own stateful operator over
one row per key (``JobQuery.seed_ddl``: for a native aggregation the key and its fields, which
reproduce the aggregation buffers exactly; for an ``update`` job the key and its serialized
state, which the operator stores as it is) into a fresh checkpoint with the RocksDB provider, and the store is
made to upload a snapshot of that version (``minDeltasForSnapshot=1``). What comes out is a
checkpoint whose state at version 1 is one self-contained snapshot zip per partition (plus the
SST files it names) with the operator's exact key/value schema.

- rebuild-state keeps it as the app's new checkpoint (batch 0) after pointing its offsets log at
  the input offsets the state corresponds to (``point_offsets``);
- compaction takes only the snapshot zips and installs them into an existing checkpoint as the
  snapshot of the version the state was read at (``streamops.checkpoints.compact``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from streamops.exceptions import StreamopsError
from streamops.host import jars
from streamops.settings import Settings
from streamops.spark import pydaemon
from streamops.spark.local_log import quiet_console_conf

#: the seed query's version: Spark's first batch (0) commits state version 1
SEED_VERSION = 1


class SeedError(StreamopsError):
    """Spark did not produce the seeded state (no snapshot in time, schema mismatch).

    Operator action: read the message (it names the partitions and the Spark error); the app's own
    checkpoint was not touched.
    """


def seed_columns(query) -> list[str]:
    """Column names of the job's seed rows (``JobQuery.seed_ddl``: "name type, ...")."""
    return [part.split()[0] for part in query.seed_ddl().split(",")]


def seed_session(settings: Settings, *, name: str = "streamops-seed"):
    """A local SparkSession whose state stores upload a snapshot right after each commit."""
    from pyspark.sql import SparkSession


    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", settings.host)
    # Spark's Python workers unpickle the job too: the checkout on their path, from any cwd
    # (app lint, rebuild-state, compaction and savepoint checks all seed through this session)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(settings.repo) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(settings.repo), *paths) if p)
    spark = (SparkSession.builder.master("local[2]").appName(name)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g")
             .config(map=seeding_conf())
             .config(map=pydaemon.conf())
             .config(map=quiet_console_conf())
             .config(map=jars.spark_conf())  # app lint reads the input with Spark's Kafka connector
             .config("spark.sql.adaptive.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    _ = spark.streams.active  # the StateStoreCoordinator the statestore reader talks to
    return spark


def state_rows(spark, query, checkpoint: Path, batch_id: int):
    """The state at ``batch_id`` as seed rows (``JobQuery.seed_ddl``)."""
    from pyspark.sql import functions as F

    from streamops.state.store import state_frame

    names = seed_columns(query)
    try:
        frame = state_frame(spark, query.job_cls, str(checkpoint), batch_id)
    except Exception as exc:  # noqa: BLE001 - an AnalysisException names the schema that differs
        raise SeedError(f"{checkpoint}: the state at batch {batch_id} does not have the job's shape "
                        f"({str(exc).splitlines()[0][:300]}): the job changed its state") from None
    if not query.aggregate:
        frame = frame.select(F.col(query.job_cls.key_name).alias("key"), F.lit(0).alias("lane"), "blob")
    return frame.toDF(*names)


def write_seed_input(rows: Any, folder: Path, names: list[str]) -> int:
    """Seed rows (a Spark DataFrame, or an Arrow table with ``names``) -> parquet files in ``folder``."""
    shutil.rmtree(folder, ignore_errors=True)
    if hasattr(rows, "write"):  # a Spark DataFrame
        rows.write.mode("overwrite").parquet(str(folder))
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(f).metadata.num_rows for f in folder.glob("*.parquet"))
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    pq.write_table(rows.select(names), folder / "part-00000.parquet")
    return rows.num_rows


def snapshot_zips(checkpoint: Path, version: int = SEED_VERSION, operator: int = 0) -> dict[int, Path]:
    """Partition -> its snapshot zip of ``version`` (only those present)."""
    root = checkpoint / "state" / str(operator)
    out = {}
    if root.is_dir():
        for part in root.iterdir():
            if part.name.isdigit() and (part / f"{version}.zip").is_file():
                out[int(part.name)] = part / f"{version}.zip"
    return out


def seed_checkpoint(spark, query, input_folder: Path, dest: Path, *, state_partitions: int,
                    timeout: float = 600.0, progress: Callable[[str], None] = lambda _m: None) -> dict[int, Path]:
    """Run the job's stateful operator (``JobQuery.state_op``) over the seed rows in ``input_folder`` as one streaming batch into a
    new checkpoint ``dest`` with ``state_partitions`` state partitions; return each partition's
    snapshot zip of version 1 (waits until Spark has uploaded all of them)."""
    if dest.exists():
        raise SeedError(f"{dest} exists: refusing to seed into it")
    with _seeding_conf(spark):
        return _seed(spark, query, input_folder, dest, state_partitions=state_partitions, timeout=timeout,
                     progress=progress)


def seeding_conf() -> dict[str, str]:
    """What a seed query needs of its session: RocksDB state with a snapshot right after each commit."""
    from streamops.spark.session import ROCKSDB_PROVIDER

    return {"spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
            "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1",
            "spark.sql.streaming.stateStore.maintenanceInterval": "200ms"}


@contextlib.contextmanager
def _seeding_conf(spark) -> Iterator[None]:
    """``seeding_conf`` on a session that may be shared (``app lint``, tests), put back after."""
    saved = {k: spark.conf.get(k, None) for k in (*seeding_conf(), "spark.sql.shuffle.partitions")}
    for k, v in seeding_conf().items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _seed(spark, query, input_folder: Path, dest: Path, *, state_partitions: int, timeout: float,
          progress: Callable[[str], None]) -> dict[int, Path]:
    spark.conf.set("spark.sql.shuffle.partitions", str(state_partitions))
    rows = spark.readStream.schema(query.seed_ddl()).parquet(str(input_folder))
    stream = (query.state_op(rows).writeStream.queryName(f"streamops-seed-{dest.name}")
             .format("noop").outputMode("update")
             .option("checkpointLocation", str(dest))
             .trigger(processingTime="1 second").start())
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if stream.exception() is not None:
                raise SeedError(f"seeding {dest} failed: {str(stream.exception()).splitlines()[0][:500]}")
            zips = snapshot_zips(dest)
            if (dest / "commits" / "0").exists() and len(zips) == state_partitions:
                progress(f"seeded {state_partitions} state partitions into {dest}")
                return zips
            time.sleep(0.2)
        have = sorted(snapshot_zips(dest))
        raise SeedError(f"seeding {dest}: snapshots of {len(have)}/{state_partitions} partitions after "
                        f"{timeout:.0f} s (have {have})")
    finally:
        stream.stop()


def point_offsets(checkpoint: Path, source_offsets: dict[str, dict[str, int]], sources: int = 1, *,
                  watermark_ms: int | None = None) -> None:
    """Make a seeded checkpoint's batch 0 end at ``source_offsets`` (the app's Kafka source, which
    keeps no files under ``sources/``): the app continues with batch 1 from exactly there.

    ``watermark_ms``: Spark's event-time watermark as of that batch (jobs with stream time).
    ``sources``: how many sources the app's query plan has — Spark counts a source once per scan
    in the plan (the demo's union scans its one topic twice) and refuses an offsets entry with
    another count."""
    path = checkpoint / "offsets" / "0"
    lines = path.read_text().splitlines()
    if len(lines) != 3 or not lines[0].startswith("v"):
        raise SeedError(f"{path}: expected a one-source offsets entry, got {len(lines)} lines")
    meta = lines[1]
    if watermark_ms is not None:  # a job with stream time: Spark goes on from the state's watermark
        meta = json.dumps({**json.loads(meta), "batchWatermarkMs": int(watermark_ms)}, separators=(",", ":"))
    body = "\n".join([lines[0], meta, *[json.dumps(source_offsets, sort_keys=True)] * sources])
    tmp = path.with_name(".0.rewrite")
    tmp.write_text(body)
    tmp.replace(path)
    (checkpoint / "offsets" / ".0.crc").unlink(missing_ok=True)  # Hadoop would reject the new bytes
    shutil.rmtree(checkpoint / "sources", ignore_errors=True)  # the seed's file-source log
