"""What the streaming query's observed metrics cost per record (``observed.input_timestamps`` and
``state_partition_records``, ``hot_keys``, in every app's query since issue 25's metrics), on a local Spark job.

    .venv/bin/python bench/observed_metrics.py [--rows 4000000] [--runs 5]

A batch job over ``--rows`` generated rows (50,000 keys, one lane), repartitioned by key into the
state partitions (``noop`` sink), runs without the observations, then with both at 4, 32 and 200
state partitions: the per-partition count as the app's query does it (one conditional sum per
partition; not observed above ``MAX_OBSERVED_STATE_PARTITIONS``, so 200 shows why), and as the
alternative ``histogram_numeric`` with one bin per partition. Reported: the median time and the
extra time per row; then whether each form's counts equal the partitions Spark gives the rows
(32 partitions, eight tasks' counts merged).
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    from pyspark.sql import Observation, SparkSession
    from pyspark.sql import functions as F

    from streamops.spark.driver.report import observed_facts
    from streamops.spark.query.observed import (
        OBSERVED_STATE_PARTITIONS,
        hot_keys,
        input_timestamps,
        state_partition_records,
    )

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.sql.adaptive.enabled", "false").getOrCreate())
    base = spark.range(args.rows).select(F.concat(F.lit("u"), (F.col("id") % 50000).cast("string")).alias("key"),
                                         F.lit(0).alias("lane"), F.current_timestamp().alias("timestamp"))

    def counts(n: int, histogram: bool) -> list:
        part = F.pmod(F.hash("key", "lane"), F.lit(n))
        if histogram:
            return [F.histogram_numeric(part, F.lit(n)).alias("records")]
        return [F.sum(F.when(part == i, 1).otherwise(0)).alias(f"p{i}") for i in range(n)]

    def run(n: int | None, histogram: bool = False, hot: bool = False) -> float:
        df = base if n is None else base.observe("in", *input_timestamps()).observe("sp", *counts(n, histogram))
        if hot:
            df = df.observe("hot", *hot_keys("key"))
        t = time.perf_counter()
        df.repartition(4, "key", "lane").write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t

    for _ in range(2):
        run(None)
    rows = [("none", None, False), *((f"conditional sums (kept), {n} partitions", n, False) for n in (4, 32, 200)),
            *((f"histogram_numeric, {n} partitions", n, True) for n in (4, 32, 200))]
    rows = [(label, n, histogram, False) for label, n, histogram in rows] + [
        ("conditional sums (kept), 4 partitions + the hottest keys (approx_top_k)", 4, False, True)]
    base_s = None
    print(f"| observations | median s ({args.rows:,} rows, {args.runs} runs) | extra ns/row |\n|---|---|---|")
    for label, n, histogram, hot in rows:
        med = statistics.median(run(n, histogram, hot) for _ in range(args.runs))
        base_s = med if base_s is None else base_s
        print(f"| {label} | {med:.3f} | {(med - base_s) / args.rows * 1e9:+.0f} |")
    n = 32
    real = dict(base.repartition(n, "key", "lane").groupBy(F.spark_partition_id()).count().collect())
    for label, cols in (("conditional sums", state_partition_records(["key", "lane"], n)),
                        ("histogram_numeric", counts(n, True))):
        obs = Observation(label)
        base.repartition(8).observe(obs, *cols).write.format("noop").mode("overwrite").save()
        if "records" in obs.get:
            got = {round(b["x"]): round(b["y"]) for b in obs.get["records"]}
        else:
            got = dict(enumerate(observed_facts({OBSERVED_STATE_PARTITIONS: obs.get})["state_partition_records"]))
        print(f"{label}: exact {got == real} ({len(got)} partitions, {sum(got.values()):,} rows)")
    spark.stop()


if __name__ == "__main__":
    main()
