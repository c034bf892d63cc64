"""A declared job's state as Spark's state store holds it, read with the ``statestore`` source.

Aggregate jobs keep the aggregation buffers (one per field, in declaration order; Spark names
them after the function, so several are called ``sum``); update jobs keep the serialized state
in one ``blob`` column under the grouping key (key, lane).
"""

from __future__ import annotations

from typing import Any

from streamops.job import Job


def _state(spark, checkpoint: str, batch_id: int):
    return spark.read.format("statestore").option("batchId", batch_id).load(checkpoint)


def state_frame(spark, job_cls: type[Job], checkpoint: str, batch_id: int):
    """One row per key: the key column (``key_name``) and the state's columns
    (aggregate: the fields; update: ``blob``)."""
    from pyspark.sql import functions as F

    df = _state(spark, checkpoint, batch_id)
    if job_cls.is_aggregate():
        fields = job_cls.aggregate or {}
        unique = ", ".join(f"{f}: {'BIGINT' if a.type == 'long' else 'DOUBLE'}" for f, a in fields.items())
        cols = [F.col(f"key.{job_cls.key_name}").alias(job_cls.key_name)]
        for f, a in fields.items():
            c = F.col(f"v.{f}")
            cols.append((F.coalesce(c, F.lit(a.identity())) if a.kind == "sum" else c).alias(f))
        return df.select("key", F.col("value").cast(f"struct<{unique}>").alias("v")).select(*cols)
    return df.where(F.col("key.lane") == 0).select(
        F.col("key.key").alias(job_cls.key_name), F.col("value.groupState.blob").alias("blob"))


def read_states(spark, job_cls: type[Job], checkpoint: str, batch_id: int) -> dict[str, Any]:
    """key -> state (aggregate: the dict of fields; update: ``state_serde.loads(blob)``)."""
    table = state_frame(spark, job_cls, checkpoint, batch_id).toArrow()
    keys = table.column(0).to_pylist()
    if job_cls.is_aggregate():
        names = list(job_cls.aggregate or {})
        cols = [table.column(n).to_pylist() for n in names]
        return {k: dict(zip(names, vals)) for k, *vals in zip(keys, *cols)}
    loads = job_cls.state_serde.loads
    return {k: loads(b) for k, b in zip(keys, table.column("blob").to_pylist())}
