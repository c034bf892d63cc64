"""The streaming query's observed metrics (``Dataset.observe``): Spark reports them in each batch's
progress (``observedMetrics``) under these names, and the runner adds them to the batch's progress
line (``runner.observed_facts``): the end-to-end latency's input timestamps and the state
partitions' skew (``observe.metrics``).

The driver runs it: it builds the aggregates as Spark columns (``plan.JobQuery.observe_input``,
``observe_state_partitions``) and reads the names back from the progress. Spark computes the
aggregates with its own accumulators in the scan's tasks, in the JVM: no Python worker imports this.
"""

from __future__ import annotations

#: the streaming query's observed metrics (``Dataset.observe``: Spark reports them in each batch's
#: progress, ``observedMetrics``): the input records' Kafka timestamps (``newest_ms``, ``oldest_ms``)
#: and the records each state partition received (``p0``, ``p1``, ...)
OBSERVED_INPUT = "streamops_input"
OBSERVED_STATE_PARTITIONS = "streamops_state_partitions"
#: ... and the batch's hottest keys (``hot_keys``)
OBSERVED_HOT_KEYS = "streamops_hot_keys"


def input_timestamps(ticks_topic: str | None = None) -> list:
    """Aggregates for ``Dataset.observe`` over Kafka rows: the newest and oldest timestamp (ms;
    ``ticks_topic``'s left out: the driver wrote them). Spark computes them in the scan's tasks
    with its own accumulators: no extra job, a max and a min per record."""
    from pyspark.sql import functions as F

    ts = F.unix_millis("timestamp")
    if ticks_topic is not None:
        ts = F.when(F.col("topic") != ticks_topic, ts)
    return [F.max(ts).alias("newest_ms"), F.min(ts).alias("oldest_ms")]


#: above this many state partitions the records per partition are not observed: one conditional sum
#: per partition and record costs about 8 ns each (bench/observed_metrics.py), ~1 % of a record's
#: work at 32 (the default is 4)
MAX_OBSERVED_STATE_PARTITIONS = 32


def state_partition_records(keys: list[str], partitions: int, only=None) -> list:
    """Aggregates for ``Dataset.observe``: records per state partition (skew a uniform test misses),
    ``p0``, ``p1``, ...; none above ``MAX_OBSERVED_STATE_PARTITIONS``. A row's partition is the one
    Spark's hash partitioning of the stateful operator's keys gives it (``pmod(hash(keys), n)``, as
    ``repartition`` and ``groupBy`` compute it); ``only``: the rows that count. One exact count per
    partition (``histogram_numeric`` with one bin each was cheaper at 200 partitions but merged
    distinct partitions' bins when many tasks' histograms combined)."""
    from pyspark.sql import functions as F

    if partitions > MAX_OBSERVED_STATE_PARTITIONS:
        return []
    part = F.pmod(F.hash(*keys), F.lit(partitions))
    hit = (lambda i: part == i) if only is None else (lambda i: only & (part == i))
    return [F.sum(F.when(hit(i), 1).otherwise(0)).alias(f"p{i}") for i in range(partitions)]


#: how many hottest keys a batch reports, and how many keys the sketch tracks: a key is reported
#: when its records are a large share of the batch's (a frequent-items sketch; uniform keys: none)
HOT_KEYS, HOT_KEYS_TRACKED = 5, 100


def hot_keys(key: str, only=None) -> list:
    """An aggregate for ``Dataset.observe``: the batch's hottest keys with their records (Spark's
    ``approx_top_k`` sketch, updated in the tasks that already run: 50-90 ns a record,
    bench/observed_metrics.py), the skew a uniform test misses, by key; ``only``: the rows that count."""
    from pyspark.sql import functions as F

    k = F.col(key).cast("string")
    if only is not None:
        k = F.when(only, k)
    return [F.call_function("approx_top_k", k, F.lit(HOT_KEYS), F.lit(HOT_KEYS_TRACKED)).alias("hot")]
