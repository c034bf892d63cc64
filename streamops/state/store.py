"""A declared job's state as Spark's state store holds it, read with the ``statestore`` source.

Aggregate jobs keep the aggregation buffers (one per field, in declaration order; Spark names
them after the function, so several are called ``sum``); update jobs keep the serialized state
in one ``blob`` column under the grouping key (key, lane). Jobs with named state
(``streamops.named_state``) keep one ``transformWithState`` variable per name, read one by one
(``stateVarName``) and put back together per key.
"""

from __future__ import annotations

from typing import Any

from streamops.job import Job


def _state(spark, checkpoint: str, batch_id: int, var: str | None = None):
    reader = spark.read.format("statestore").option("batchId", batch_id)
    return (reader if var is None else reader.option("stateVarName", var)).load(checkpoint)


def load_all(spark, job_cls: type[Job], checkpoint: str, batch_id: int) -> int:
    """Load every state partition at ``batch_id`` (snapshot + replay) and count its rows: what a
    restart pays (a job with named state: through its first variable; the whole store loads)."""
    var = next(iter(job_cls.state_values)) if job_cls.has_named_state() else None
    return _state(spark, checkpoint, batch_id, var).count()


def state_frame(spark, job_cls: type[Job], checkpoint: str, batch_id: int):
    """One row per key: the key column (``key_name``) and the state's columns
    (aggregate: the fields; update: ``blob``)."""
    from pyspark.sql import functions as F

    if job_cls.has_named_state():
        import pyarrow as pa

        from streamops.job import JsonSerde

        dumps = JsonSerde().dumps
        states = _named_states(spark, job_cls, checkpoint, batch_id)
        table = pa.table({job_cls.key_name: pa.array(list(states), pa.string()),
                          "blob": pa.array([dumps(v) for v in states.values()], pa.binary())})
        return spark.createDataFrame(table.to_pandas(), f"{job_cls.key_name} string, blob binary") if len(table) \
            else spark.createDataFrame([], f"{job_cls.key_name} string, blob binary")
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
    if job_cls.has_named_state():
        return _named_states(spark, job_cls, checkpoint, batch_id)
    table = state_frame(spark, job_cls, checkpoint, batch_id).toArrow()
    keys = table.column(0).to_pylist()
    if job_cls.is_aggregate():
        names = list(job_cls.aggregate or {})
        cols = [table.column(n).to_pylist() for n in names]
        return {k: dict(zip(names, vals)) for k, *vals in zip(keys, *cols)}
    loads = job_cls.state_serde.loads
    return {k: loads(b) for k, b in zip(keys, table.column("blob").to_pylist())}


def _named_states(spark, job_cls: type[Job], checkpoint: str, batch_id: int) -> dict[str, Any]:
    """key -> named state, each variable read with the ``statestore`` source's ``stateVarName``."""
    import json

    from streamops import named_state as ns

    values = job_cls.state_values or {}
    states: dict[str, dict[str, Any]] = {}
    for name, kind in values.items():
        df = _state(spark, checkpoint, batch_id, name)
        if isinstance(kind, ns.MapOf):
            rows = df.selectExpr("key.key AS k", "user_map_key.entry AS e", "user_map_value.json AS v").toArrow()
            for k, e, v in zip(*(rows.column(c).to_pylist() for c in ("k", "e", "v"))):
                states.setdefault(k, ns.initial(values))[name][e] = json.loads(v)
        elif isinstance(kind, ns.ListOf):  # one row per element, in the list's order
            rows = df.selectExpr("key.key AS k", "list_element.json AS v").toArrow()
            for k, v in zip(rows.column("k").to_pylist(), rows.column("v").to_pylist()):
                states.setdefault(k, ns.initial(values))[name].append(json.loads(v))
        else:
            rows = df.selectExpr("key.key AS k", "value.json AS v").toArrow()
            for k, v in zip(rows.column("k").to_pylist(), rows.column("v").to_pylist()):
                states.setdefault(k, ns.initial(values))[name] = json.loads(v)
    return states
