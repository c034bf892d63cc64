"""``app lint``'s Spark check: the job's own query over the sample, as a file stream cut into
micro-batches on a local Spark, equals the plain-Python fold (output, changelog, DLQ and state
store), and a checkpoint seeded from the fold's states reads them back. Apart from ``lint``
because it is the part that needs Spark (and its own harness, which tests of the time jobs use)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamops.job import Job, JsonSerde, Record
from streamops.named_state import decode_changelog
from streamops.state.oracle import Expected, fold_input

_JSON = JsonSerde()


class SparkCheckFailed(Exception):
    """Spark's run of the job differs from the fold (the detail names what)."""


def spark_check(job_cls: type[Job], records: list[Record], spark: Any, state_partitions: int,
           progress: Callable[[str], None]) -> str:
    from streamops.spark.query.plan import JobQuery, Topics
    from streamops.state import seed
    from streamops.state.store import read_states

    expected = fold_input(job_cls, records)
    query = JobQuery(job_cls, state_partitions=state_partitions, topics=Topics("out", "changelog", "dlq", TICKS))
    root = Path(tempfile.mkdtemp(prefix="streamops-lint-"))
    try:
        got, batches = run_stream(spark, query, records, root)
        diffs = compare(job_cls, expected, got)
        states = read_states(spark, job_cls, str(root / "checkpoint"), batches - 1)
        if states != expected.states:
            diffs.append(_diff("state store", expected.states, states))
        if diffs:
            raise SparkCheckFailed("; ".join(diffs))
        progress("  seeding a checkpoint from the states ...")
        seed.write_seed_input(query.seed_table(expected.states), root / "seed-input", seed.seed_columns(query))
        seed.seed_checkpoint(spark, query, root / "seed-input", root / "seeded", state_partitions=state_partitions,
                             timeout=300)
        seeded = read_states(spark, job_cls, str(root / "seeded"), 0)
        if seeded != expected.states:
            raise SparkCheckFailed("a checkpoint seeded from the states " + _diff("reads back", expected.states, seeded))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return (f"{batches} micro-batches: {len(expected.states)} states, {len(expected.output)} output keys, "
            f"{len(expected.rejected)} DLQ records equal; seeded checkpoint reads back equal")


#: a job with stream time: the file stream's stand-in for the app's ticks topic
TICKS = "ticks"


def write_stream_input(records: list[Record], folder: Path, parts: int) -> list[Path]:
    """The sample as ``parts`` parquet files of Kafka-shaped rows, one micro-batch each, in order.

    Spark's file source takes new files oldest first (by modification time, in ms), and files
    written within the same few ms tie, so their order was the listing's: a later part read first
    made a screening job (page_stats' late views) differ from the fold now and then. Each part's
    modification time is set one second after the previous one's.
    """
    import datetime as dt
    import os
    import time

    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    base = time.time() - parts
    paths = []
    default_ts = int(dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp() * 1_000_000)
    for i in range(parts):
        chunk = records[i * len(records) // parts:(i + 1) * len(records) // parts]
        path = folder / f"part-{i}.parquet"
        pq.write_table(pa.table({
            "key": pa.array([r.key for r in chunk], pa.binary()), "value": pa.array([r.value for r in chunk], pa.binary()),
            "topic": [r.topic for r in chunk], "partition": pa.array([r.partition for r in chunk], pa.int32()),
            "offset": pa.array([r.offset for r in chunk], pa.int64()),
            "timestamp": pa.array([default_ts if r.timestamp_ms is None else r.timestamp_ms * 1000 for r in chunk],
                                  pa.timestamp("us", tz="UTC")),
        }), path)
        os.utime(path, (base + i, base + i))
        paths.append(path)
    return paths


def run_stream(spark: Any, query: Any, records: list[Record], root: Path, parts: int = 3,
               progress: list | None = None) -> tuple[dict, int]:
    """The job's query over the sample as a file stream of Kafka-shaped rows, in ``parts`` batches
    (a job with stream time: and the batches its ticks start, each a file of one tick record).
    ``progress`` gets the stream's progress reports (``recentProgress``), for benches."""
    parts = len(write_stream_input(records, root / "input", parts))
    got: dict[str, dict] = {"out": {}, "changelog": {}, "dlq": {}}
    partitions = sorted({(r.topic, r.partition) for r in records})
    ticks, last = [0], [-1]

    def sink(df, batch_id: int) -> None:
        from streamops.spark.query.records import dlq_entry

        last[0] = max(last[0], batch_id)
        table = df.toArrow()
        if query.timed and query.advance_clocks(table, batch_id, root / "checkpoint", partitions).ticks:
            _write_tick(root / "input", ticks[0])
            ticks[0] += 1
        for r in query.records(table, batch_id):
            if r.topic == "dlq":
                where, reason = dlq_entry(list(r.headers))
                got["dlq"][where] = reason
            else:
                got[r.topic][r.key.decode()] = r.value

    from streamops.spark.session import ROCKSDB_PROVIDER

    ddl = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
    spark.conf.set("spark.sql.shuffle.partitions", str(query.state_partitions))
    provider = "spark.sql.streaming.stateStore.providerClass"
    saved = spark.conf.get(provider, None)
    if query.named:  # transformWithState runs on RocksDB only (the apps' store)
        spark.conf.set(provider, ROCKSDB_PROVIDER)
    try:
        raw = spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).parquet(str(root / "input"))
        stream = (query.build(raw, checkpoint=root / "checkpoint").writeStream.outputMode("update")
                  .foreachBatch(sink).option("checkpointLocation", str(root / "checkpoint")).start())
        try:
            stream.processAllAvailable()
        finally:
            stream.stop()
        if progress is not None:
            progress.extend(stream.recentProgress)
    finally:
        if saved is None:
            spark.conf.unset(provider)
        else:
            spark.conf.set(provider, saved)
    return got, last[0] + 1


def _write_tick(folder: Path, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"key": pa.array([None], pa.binary()), "value": pa.array([b""], pa.binary()),
                             "topic": [TICKS], "partition": pa.array([0], pa.int32()),
                             "offset": pa.array([n], pa.int64()),
                             "timestamp": pa.array([0], pa.timestamp("us", tz="UTC"))}), folder / f"tick-{n}.parquet")


def compare(job_cls: type[Job], expected: Expected, got: dict) -> list[str]:
    diffs = []
    output = {k: _JSON.loads(v) for k, v in got["out"].items()}
    if output != expected.output:
        diffs.append(_diff("output", expected.output, output))
    changelog = decode_changelog(job_cls, got["changelog"])
    if changelog != expected.states:
        diffs.append(_diff("changelog", expected.states, changelog))
    if got["dlq"] != expected.rejected:
        diffs.append(_diff("dlq", expected.rejected, got["dlq"]))
    return diffs


def _diff(view: str, expected: dict, actual: dict) -> str:
    missing = [k for k in expected if k not in actual]
    extra = [k for k in actual if k not in expected]
    different = [k for k in expected if k in actual and expected[k] != actual[k]]
    sample = ""
    if different:
        k = different[0]
        sample = f"; e.g. {k!r}: python {expected[k]!r} spark {actual[k]!r}"
    return (f"{view} differs from the python fold: {len(missing)} missing, {len(extra)} extra, "
            f"{len(different)} different{sample}")[:1500]
