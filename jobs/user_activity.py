"""Demo app ``user_activity``: per-user activity profiles with a changelog and a DLQ.

user-events (JSON keyed by user_id) -> parse (invalid -> DLQ with reason and source) ->
per-user aggregation in the RocksDB state store -> each batch, in one Kafka transaction:
updated profiles to the output topic and to the compacted changelog topic, DLQ records, and
the batch marker (see streamops.spark.commit).

Pure transformations (``parse``, ``profile_updates``, ``build_query``, ``to_records``) take and
return DataFrames / Arrow tables and are tested without Kafka; ``main`` does the I/O.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator

import pyarrow as pa

from streamops.demo import contract as c
from streamops.demo.contract import amount_cents

log = logging.getLogger("streamops.jobs.user_activity")

PARSED_SCHEMA = pa.schema([
    ("user_id", pa.string()), ("event_type", pa.string()), ("amount_cents", pa.int64()),
    ("ts", pa.int64()), ("reason", pa.string()), ("raw_key", pa.binary()), ("raw_value", pa.binary()),
    ("src_topic", pa.string()), ("src_partition", pa.int32()), ("src_offset", pa.int64()),
])
PARSED_DDL = ("user_id string, event_type string, amount_cents long, ts long, reason string, "
              "raw_key binary, raw_value binary, src_topic string, src_partition int, src_offset long")


# -- pure transformations ------------------------------------------------------------------------
_WS = r"[ \t\n\r]*"


def _field(name: str, pattern: str) -> str:
    return rf'{_WS}"{name}"{_WS}:{_WS}{pattern}{_WS}'


#: The canonical event shape (keys in contract order, ASCII user_id without escapes, a plain
#: decimal amount of at most 12+3 digits, an integer ts that fits a long). A value matching it
#: is valid under the contract and its fields are exactly these groups, so it is parsed in
#: Arrow's C++ regex engine; anything else (1% bad records, escapes, exponents, other key
#: orders, extra keys) takes the exact Python validator. <= 15 significant digits means
#: Python's float round trip leaves the decimal unchanged, so cents computed from the text
#: equal ``contract.amount_cents``.
CANONICAL_EVENT = "^{" + ",".join([
    _field("user_id", r'"(?P<uid>[ !#-\[\]-~]+)"'),
    _field("event_type", r'"(?P<et>login|purchase|view)"'),
    _field("amount", r"(?P<ai>0|[1-9][0-9]{0,11})(?:\.(?P<af>[0-9]{1,3}))?"),
    _field("ts", r"(?P<ts>0|[1-9][0-9]{0,17})"),
]) + "}" + _WS + "$"


def _fast_columns(batch: pa.RecordBatch, matched: pa.StructArray, mask: pa.Array) -> dict[str, pa.Array]:
    import pyarrow.compute as pc

    m = matched.filter(mask)
    frac = pc.utf8_rpad(pc.cast(m.field("af"), pa.string()), 3, "0")  # "5" -> "500" thousandths
    cents = pc.add(pc.multiply(pc.cast(pc.cast(m.field("ai"), pa.string()), pa.int64()), 100),
                   pc.divide(pc.add(pc.cast(frac, pa.int64()), 5), 10))  # half up; ints: floor div
    n = len(m)
    return {
        "user_id": pc.cast(m.field("uid"), pa.string()),
        "event_type": pc.cast(m.field("et"), pa.string()),
        "amount_cents": cents,
        "ts": pc.cast(pc.cast(m.field("ts"), pa.string()), pa.int64()),
        "reason": pa.nulls(n, pa.string()),
        "raw_key": pa.nulls(n, pa.binary()),
        "raw_value": pa.nulls(n, pa.binary()),
        "src_topic": batch.column("topic").filter(mask),
        "src_partition": batch.column("partition").filter(mask).cast(pa.int32()),
        "src_offset": batch.column("offset").filter(mask).cast(pa.int64()),
    }


def _slow_columns(batch: pa.RecordBatch) -> dict[str, list]:
    from streamops.demo.fold import validate

    cols: dict[str, list] = {f.name: [] for f in PARSED_SCHEMA}
    for key, value, topic, part, off in zip(*(batch.column(n).to_pylist() for n in
                                              ("key", "value", "topic", "partition", "offset"))):
        event, reason = validate(value)
        if reason is None:
            cols["user_id"].append(event["user_id"])
            cols["event_type"].append(event["event_type"])
            cols["amount_cents"].append(amount_cents(event["amount"]))
            cols["ts"].append(event["ts"])
            cols["reason"].append(None)
            cols["raw_key"].append(None)
            cols["raw_value"].append(None)
        else:
            for name in ("user_id", "event_type", "amount_cents", "ts"):
                cols[name].append(None)
            cols["reason"].append(reason)
            cols["raw_key"].append(key)
            cols["raw_value"].append(value)
        cols["src_topic"].append(topic)
        cols["src_partition"].append(part)
        cols["src_offset"].append(off)
    return cols


def parse_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Validate each record with the contract's rules; keep raw bytes only for invalid ones.

    Canonical values are parsed vectorized (``CANONICAL_EVENT``), the rest one by one with
    ``fold.validate``; both give identical rows for the values the fast path accepts.
    """
    import pyarrow.compute as pc

    for b in batches:
        values = b.column("value")
        if pa.types.is_large_binary(values.type):
            values = values.cast(pa.binary())
        matched = pc.extract_regex(values, CANONICAL_EVENT)
        mask = pc.is_valid(matched)
        fast = int(pc.sum(mask).as_py() or 0)
        if fast:
            yield pa.RecordBatch.from_pydict(_fast_columns(b, matched, mask), schema=PARSED_SCHEMA)
        if fast < len(b):
            yield pa.RecordBatch.from_pydict(_slow_columns(b.filter(pc.invert(mask))), schema=PARSED_SCHEMA)


def parse(raw):
    """Kafka-schema DataFrame -> parsed events (valid rows have reason = null)."""
    return raw.select("key", "value", "topic", "partition", "offset").mapInArrow(parse_batches, PARSED_DDL)


#: What the aggregation folds, one row per event or one row per *profile*: the state's buffers
#: are max(login_ts), sum(purchase_n), sum(cents), sum(n), so a row holding a whole profile
#: reproduces that profile's state exactly. That is how rebuild-state and compaction seed a new
#: checkpoint from the changelog or from the state store (``streamops.state.seed``).
SEED_DDL = "user_id string, login_ts long, purchase_n long, cents long, n long"


def aggregate(rows):
    """The stateful per-user fold over ``SEED_DDL`` rows (its state lives in the RocksDB store)."""
    from pyspark.sql import functions as F

    return rows.groupBy("user_id").agg(
        F.max("login_ts").alias("last_login_ts"),
        F.sum("purchase_n").alias("purchases"),
        F.sum("cents").alias("total_cents"),
        F.sum("n").alias("events"),
    )


def profile_updates(parsed):
    """Valid events -> one ``SEED_DDL`` row each -> ``aggregate``."""
    from pyspark.sql import functions as F

    valid = parsed.where(F.col("reason").isNull())
    is_purchase = F.col("event_type") == "purchase"
    return aggregate(valid.select(
        "user_id",
        F.when(F.col("event_type") == "login", F.col("ts")).alias("login_ts"),
        F.when(is_purchase, F.lit(1)).otherwise(F.lit(0)).cast("long").alias("purchase_n"),
        F.when(is_purchase, F.col("amount_cents")).otherwise(F.lit(0)).cast("long").alias("cents"),
        F.lit(1).cast("long").alias("n"),
    ))


def seed_row_from_changelog(key: bytes | None, value: bytes | None) -> tuple | None:
    """A changelog record (a profile as JSON) -> its ``SEED_DDL`` row; None for a tombstone."""
    import json

    if value is None:
        return None
    p = json.loads(value)
    return (p["user_id"], p["last_login_ts"], int(p["purchases"]), amount_cents(p["total_amount"]),
            int(p["events"]))


#: Sources Spark counts in this query's plan: the union scans the input once per branch (one Kafka
#: read thanks to the shared exchange, but two entries in each offsets-log batch). rebuild-state
#: needs it when there is no old checkpoint to learn it from.
QUERY_SOURCES = 2

OUT_COLUMNS = ["kind", "user_id", "last_login_ts", "purchases", "total_cents", "events",
               "reason", "raw_key", "raw_value", "src_topic", "src_partition", "src_offset"]


def build_query(raw, state_partitions: int):
    """One output stream: profile updates (kind=profile) united with DLQ rows (kind=dlq).

    Note: Spark plans the two branches of the union as two scans of the source, so each input
    record is read and parsed twice per batch (measured in docs/benchmarks.md). The shuffle
    for the aggregation uses ``state_partitions`` partitions (spark.sql.shuffle.partitions).
    """
    from pyspark.sql import functions as F

    parsed = parse(raw.select("key", "value", "topic", "partition", "offset").repartition(state_partitions, "key"))
    profiles = profile_updates(parsed).select(
        F.lit("profile").alias("kind"), "user_id", "last_login_ts", "purchases", "total_cents", "events",
        *(F.lit(None).cast(t).alias(n) for n, t in [("reason", "string"), ("raw_key", "binary"),
                                                    ("raw_value", "binary"), ("src_topic", "string"),
                                                    ("src_partition", "int"), ("src_offset", "long")]),
    )
    dlq = parsed.where(F.col("reason").isNotNull()).select(
        F.lit("dlq").alias("kind"), "user_id",
        *(F.lit(None).cast("long").alias(n) for n in ("last_login_ts", "purchases", "total_cents", "events")),
        "reason", "raw_key", "raw_value", "src_topic", "src_partition", "src_offset",
    )
    return profiles.select(*OUT_COLUMNS).unionByName(dlq.select(*OUT_COLUMNS))


def profile_of(row: dict) -> dict:
    return {
        "user_id": row["user_id"],
        "last_login_ts": row["last_login_ts"],
        "purchases": int(row["purchases"]),
        "total_amount": round(int(row["total_cents"]) / 100, 2),
        "events": int(row["events"]),
    }


def to_records(table: pa.Table, *, output_topic: str, changelog_topic: str, dlq_topic: str,
               batch_id: int) -> list:
    """Arrow batch output -> Kafka records (profiles to output + changelog; DLQ with headers)."""
    from streamops.demo.fold import profile_json
    from streamops.spark.commit import OutRecord

    bid = (c.H_BATCH_ID, str(batch_id).encode())
    out = []
    for row in table.to_pylist():
        if row["kind"] == "profile":
            key = row["user_id"].encode()
            value = profile_json(profile_of(row))
            out.append(OutRecord(output_topic, key, value, (bid,)))
            out.append(OutRecord(changelog_topic, key, value, (bid,)))
        else:
            out.append(OutRecord(dlq_topic, row["raw_key"], row["raw_value"], (
                (c.H_REASON, row["reason"].encode()),
                (c.H_SOURCE_TOPIC, row["src_topic"].encode()),
                (c.H_SOURCE_PARTITION, str(row["src_partition"]).encode()),
                (c.H_SOURCE_OFFSET, str(row["src_offset"]).encode()),
                bid,
            )))
    return out


# -- I/O -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    from streamops.settings import Settings
    from streamops.spark.runner import add_run_arguments, run_app, run_setup

    ap = argparse.ArgumentParser(prog="user_activity", description=__doc__.splitlines()[0])
    ap.add_argument("--app", default=c.APP, help="spec entry to run (default user_activity)")
    add_run_arguments(ap)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = Settings.from_env()
    spec, options = run_setup(settings, args.app, args)  # the live output version, overrides, reprocess
    return run_app(
        spec, settings,
        build=lambda raw: build_query(raw, spec.state_partitions),
        to_records=lambda table, batch_id: to_records(
            table, output_topic=spec.live_output_topic, changelog_topic=spec.changelog_topic,
            dlq_topic=spec.dlq_topic, batch_id=batch_id),
        options=options,
    )


if __name__ == "__main__":
    sys.exit(main())


# -- oracle hooks (used by `streamops check`; plain Python, no Spark except reading state) --------
def expected_from_input(messages) -> tuple[dict, dict]:
    """Fold the input records with the contract's plain-Python rules."""
    from streamops.demo.fold import fold, validate

    invalid: dict = {}

    def events():
        for m in messages:
            event, reason = validate(m.value())
            if reason is None:
                yield event
            else:
                invalid[(m.topic(), m.partition(), m.offset())] = reason

    return fold(events()), invalid


def state_profiles(spark, checkpoint: str, batch_id: int) -> dict:
    """Profiles as held by Spark's state store at ``batch_id`` (the aggregation's buffers)."""
    rows = (spark.read.format("statestore").option("batchId", batch_id).load(checkpoint)
            .select("key.user_id", "value").collect())
    out = {}
    for user_id, buf in rows:
        # aggregation buffers, by position (three are named "sum"): max, sum, sum, sum
        last_login, purchases, cents, events = tuple(buf)
        out[user_id] = profile_of({"user_id": user_id, "last_login_ts": last_login,
                                   "purchases": purchases or 0, "total_cents": cents or 0,
                                   "events": events})
    return out


def dlq_entry(m) -> tuple[tuple[str, int, int], str]:
    h = {k: v.decode() for k, v in (m.headers() or [])}
    return (h[c.H_SOURCE_TOPIC], int(h[c.H_SOURCE_PARTITION]), int(h[c.H_SOURCE_OFFSET])), h[c.H_REASON]


def state_table(spark, checkpoint: str, batch_id: int) -> pa.Table:
    """``state_profiles`` as one Arrow table (key column ``user_id`` first), for `streamops verify`.

    Why: ``collect()`` of a million Rows plus a dict per row costs tens of seconds; Arrow from
    Spark and vectorized arithmetic keep a 1M-key scan to a few. Values equal ``profile_of``'s.
    """
    import pyarrow.compute as pc

    # the buffers are named max, sum, sum, sum (Arrow rejects duplicate names): rename by position
    table = (spark.read.format("statestore").option("batchId", batch_id).load(checkpoint)
             .selectExpr("key.user_id AS user_id",
                         "CAST(value AS STRUCT<login: BIGINT, purchases: BIGINT, cents: BIGINT, "
                         "events: BIGINT>) AS v")
             .selectExpr("user_id", "v.login AS last_login_ts", "COALESCE(v.purchases, 0) AS purchases",
                         "COALESCE(v.cents, 0) AS cents", "v.events AS events")
             .toArrow())
    cents = table.column("cents")
    # cents / 100 as a double equals Python's round(cents / 100, 2) while cents is exact in a double
    amount = pc.divide(pc.cast(cents, pa.float64()), 100.0)
    big = pc.greater(pc.abs(cents), 2**53)
    if pc.any(big).as_py():
        amount = pa.array([round(c / 100, 2) for c in cents.to_pylist()], pa.float64())
    return pa.table({
        "user_id": table.column("user_id"),
        "last_login_ts": table.column("last_login_ts"),
        "purchases": table.column("purchases"),
        "total_amount": amount,
        "events": table.column("events"),
    })


def batch_of(headers: list | None) -> int | None:
    """The micro-batch that wrote an output/changelog record (None: not written by the job).

    `streamops verify` ignores records of batches after the one whose state it reads.
    """
    for k, v in headers or ():
        if k == c.H_BATCH_ID:
            return int(v)
    return None
