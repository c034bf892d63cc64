"""The query's observed metrics on Spark itself: the records per state partition are the partitions
Spark's own hash partitioning gives the rows, and a streaming query of a declared job reports both
observations in each batch's progress (``driver.report.progress_line``), through ``foreachBatch``."""

from __future__ import annotations

import json
import time

from jobs import user_activity as job
from jobs.demo.generator import generate_records
from streamops.spark.driver.report import observed_facts, progress_line
from streamops.spark.query.observed import (
    OBSERVED_HOT_KEYS,
    OBSERVED_STATE_PARTITIONS,
    hot_keys,
    state_partition_records,
)
from streamops.spark.query.plan import JobQuery, Topics


def test_the_state_partitions_records_are_the_partitions_spark_gives_the_rows(local_spark) -> None:
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    rows = [(f"u{(i * i) % 997}", i % 2, i) for i in range(30000)]  # skewed keys, two lanes
    df = local_spark.createDataFrame(rows, "key string, lane int, n long").repartition(8)  # 8 tasks' histograms merge
    obs = Observation("t")
    counted = df.observe(obs, *state_partition_records(["key", "lane"], 32, only=F.col("n") % 10 != 0))
    real = dict(counted.where(F.col("n") % 10 != 0).repartition(32, "key", "lane")
                .groupBy(F.spark_partition_id().alias("p")).count().collect())
    got = observed_facts({OBSERVED_STATE_PARTITIONS: obs.get})["state_partition_records"]
    got = {p: n for p, n in enumerate(got) if n}
    assert got == real and sum(got.values()) == 27000


def test_the_hottest_keys_are_the_keys_with_a_large_share(local_spark) -> None:
    """A key with a fifth of the records among 997 others (more than the sketch tracks): it comes
    first, its count within the sketch's error; a uniform batch has no hot key."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    rows = [("hot" if i % 5 == 0 else f"u{(i * 7919) % 997}", i) for i in range(30000)]
    df = local_spark.createDataFrame(rows, "key string, n long").repartition(8)
    obs = Observation("h")
    df.observe(obs, *hot_keys("key", only=F.col("n") % 10 != 3)).write.format("noop").mode("overwrite").save()
    got = observed_facts({OBSERVED_HOT_KEYS: obs.get})["hot_keys"]
    assert got[0][0] == "hot" and abs(got[0][1] - 6000) <= 300, got  # every 5th row; none is dropped by only
    uniform = Observation("u")
    local_spark.range(30000).select((F.col("id") % 5000).cast("string").alias("key")).repartition(8) \
        .observe(uniform, *hot_keys("key")).write.format("noop").mode("overwrite").save()
    assert "hot_keys" not in observed_facts({OBSERVED_HOT_KEYS: uniform.get})


def _run_until_a_batch(spark, checkpoint, *, observed: bool = True) -> tuple[dict, dict]:
    """user_activity over a rate source until a batch read records: (its progress line, Spark's progress)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StreamingQueryListener

    records = list(generate_records(200, 20, seed=3, bad_ratio=0.0))
    values = F.array(*(F.lit(r.value) for r in records))
    keys = F.array(*(F.lit(r.key) for r in records))
    idx = (F.col("value") % len(records)).cast("int") + 1
    raw = (spark.readStream.format("rate").option("rowsPerSecond", 200).load()
           .select(F.element_at(keys, idx).alias("key"), F.element_at(values, idx).alias("value"),
                   F.lit("user-events").alias("topic"), F.lit(0).alias("partition"), F.col("value").alias("offset"),
                   F.col("timestamp")))
    lines: list[tuple[dict, dict]] = []  # (the progress line, Spark's progress)

    class Recorder(StreamingQueryListener):
        def onQueryStarted(self, event) -> None: ...
        def onQueryIdle(self, event) -> None: ...
        def onQueryTerminated(self, event) -> None: ...

        def onQueryProgress(self, event) -> None:
            progress = json.loads(event.progress.json)
            lines.append((progress_line(progress), progress))

    listener = Recorder()
    spark.streams.addListener(listener)
    query = JobQuery(job.UserActivity, state_partitions=3, topics=Topics("o", "cl", "d"))
    if not observed:  # as the drivers before the observations built it
        query.observe_input = lambda cols: cols
        query.observe_state_partitions = lambda rows, keys, only=None: rows
    sq = (query.build(raw).writeStream.outputMode("update").foreachBatch(lambda df, _b: df.toArrow())
          .option("checkpointLocation", str(checkpoint)).trigger(processingTime="1 second").start())
    try:
        deadline = time.monotonic() + 120
        while not any(line["input_rows"] for line, _p in lines) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        sq.stop()
        spark.streams.removeListener(listener)
    return next((line, p) for line, p in lines if line["input_rows"])


def test_a_streaming_batch_reports_its_input_timestamps_and_state_partitions(local_spark, tmp_path) -> None:
    line, progress = _run_until_a_batch(local_spark, tmp_path / "ckpt")
    assert line["input_oldest_ms"] <= line["input_newest_ms"] <= int(time.time() * 1000)
    assert len(line["state_partition_records"]) == 3  # the stateful operator's partitions
    # every record is valid (no DLQ) and goes to the state
    assert sum(line["state_partition_records"]) == progress["sources"][0]["numInputRows"] > 0
    # 20 users, fewer than the sketch tracks: the 5 hottest with their exact records
    assert len(line["hot_keys"]) == 5 and all(n >= 1 for _k, n in line["hot_keys"])
    assert [n for _k, n in line["hot_keys"]] == sorted((n for _k, n in line["hot_keys"]), reverse=True)


def test_a_checkpoint_written_without_the_observations_goes_on_with_them(local_spark, tmp_path) -> None:
    """A running app's driver restarted on this code: same sources, same stateful operator."""
    before, _p = _run_until_a_batch(local_spark, tmp_path / "ckpt", observed=False)
    assert "state_partition_records" not in before
    after, _p = _run_until_a_batch(local_spark, tmp_path / "ckpt")
    assert after["batch_id"] > before["batch_id"] and len(after["state_partition_records"]) == 3
