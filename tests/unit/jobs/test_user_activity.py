"""The demo job's pure transformations on static DataFrames, checked against the Python fold."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from jobs import user_activity as job
from jobs.demo import contract as c
from jobs.demo.fold import fold, profile_json, validate
from jobs.demo.generator import generate_records
from streamops.app.topics import H_BATCH_ID, H_REASON, H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC
from streamops.job import Record
from streamops.spark.query.plan import JobQuery, Topics
from streamops.spark.query.records import state_of
from streamops.spark.query.worker import parse_aggregate
from streamops.state.oracle import fold_input

KAFKA_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
             "timestampType int, headers array<struct<key:string,value:binary>>")


@pytest.fixture(scope="module")
def records():
    return list(generate_records(3000, 50, seed=11, skew="zipf:1.2", bad_ratio=0.05))


@pytest.fixture(scope="module")
def raw(local_spark, records):
    ts = dt.datetime(2026, 1, 1)
    rows = [(r.key, r.value, c.INPUT_TOPIC, i % 3, i // 3, ts, 0, []) for i, r in enumerate(records)]
    return local_spark.createDataFrame(rows, KAFKA_DDL)


QUERY = JobQuery(job.UserActivity, state_partitions=2, topics=Topics("o", "cl", "d"))


def test_the_spark_query_equals_the_reference_fold(local_spark, raw, records) -> None:
    """The declared job run by Spark gives the contract's profiles (``jobs.demo.fold``, written
    independently of the API) and what the API's own Python fold gives."""
    expected = fold(e for e, reason in map(validate, (r.value for r in records)) if reason is None)
    table = QUERY.build(raw).toArrow()
    states = {r["user_id"]: state_of(job.UserActivity, r) for r in table.to_pylist() if r["kind"] == "state"}
    assert {k: job.UserActivity().emit(k, s)[k] for k, s in states.items()} == expected
    oracle = fold_input(job.UserActivity, (Record(c.INPUT_TOPIC, i % 3, i // 3, r.key, r.value)
                                           for i, r in enumerate(records)))
    assert states == oracle.states and len(states) == 50


def test_the_plan_parses_each_record_once(local_spark, raw) -> None:
    """The aggregate shape parses where the input is read, then shuffles once by the job's key:
    the aggregation needs no other exchange and the DLQ branch reuses this one, so the Python
    parse runs once per record (it ran in each branch of the union when the exchange came first).
    The plan as the streaming query runs it: without adaptive execution."""
    adaptive = local_spark.conf.get("spark.sql.adaptive.enabled")
    local_spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        plan = QUERY.build(raw)._jdf.queryExecution().executedPlan().toString()
    finally:
        local_spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    assert plan.count("MapInArrow") == 1, plan
    assert plan.count("+- Exchange hashpartitioning") == 1 and plan.count("+- ReusedExchange") == 1, plan


def test_build_query_and_records(raw, records) -> None:
    out = QUERY.build(raw).toArrow()
    recs = QUERY.records(out, 7)
    by_topic: dict[str, list] = {}
    for r in recs:
        by_topic.setdefault(r.topic, []).append(r)
    expected = fold(e for e, reason in map(validate, (r.value for r in records)) if reason is None)
    assert {r.key.decode(): r.value for r in by_topic["o"]} == {k: profile_json(p) for k, p in expected.items()}
    # the changelog holds the state (cents, exact), the output its projection (currency units)
    changelog = {r.key.decode(): json.loads(r.value) for r in by_topic["cl"]}
    assert {k: (s["purchases"], s["total_cents"]) for k, s in changelog.items()} == {
        k: (p["purchases"], round(p["total_amount"] * 100)) for k, p in expected.items()}
    assert all(dict(r.headers)[H_BATCH_ID] == b"7" for r in recs)
    bad = {(i % 3, i // 3): (rec.key, rec.value, validate(rec.value)[1])
           for i, rec in enumerate(records) if validate(rec.value)[1] is not None}
    assert len(bad) == sum(1 for r in records if r.reason is not None) > 0
    got = {}
    for r in by_topic["d"]:
        h = {k: v.decode() for k, v in r.headers}
        assert h[H_SOURCE_TOPIC] == c.INPUT_TOPIC
        got[(int(h[H_SOURCE_PARTITION]), int(h[H_SOURCE_OFFSET]))] = (r.key, r.value, h[H_REASON])
    assert got == bad
    assert {reason for *_, reason in got.values()} == set(c.REASONS)


_EDGE_VALUES = [
    b'{"user_id":"u1","event_type":"purchase","amount":0.005,"ts":1}',
    b'{"user_id":"u1","event_type":"purchase","amount":0.015,"ts":1}',
    b'{"user_id":"u1","event_type":"purchase","amount":12.345,"ts":1}',
    b'{"user_id":"u1","event_type":"purchase","amount":999999999999.999,"ts":1}',
    b'{"user_id":"u1","event_type":"purchase","amount":1000000000000,"ts":1}',
    b'{"user_id":"u1","event_type":"purchase","amount":1000000000000.01,"ts":1}',
    b'{"user_id":"u1","event_type":"purchase","amount":0.12345678,"ts":1}',
    b'{"user_id":"u1","event_type":"purchase","amount":5.10,"ts":1}',
    b'{"user_id":"u1","event_type":"purchase","amount":0,"ts":0}',
    b'{"user_id":"u1","event_type":"purchase","amount":01,"ts":1}',
    b'{"user_id":"u1","event_type":"purchase","amount":1e3,"ts":1}',
    b'{"user_id":"u1","event_type":"purchase","amount":-1,"ts":1}',
    b' {"user_id":"u1","event_type":"login","amount":1,"ts":5}',
    b'{ "user_id" : "u 1" ,\n "event_type":\t"login", "amount": 1 , "ts": 5 }\r\n',
    b'{"event_type":"login","user_id":"u1","amount":1,"ts":5}',
    b'{"user_id":"u1","event_type":"login","amount":1,"ts":5,"extra":1}',
    b'{"user_id":"u1","event_type":"login","amount":1,"ts":5,"ts":6}',
    b'{"user_id":"u\\"1","event_type":"login","amount":1,"ts":5}',
    b'{"user_id":"\xc3\xbc","event_type":"login","amount":1,"ts":5}',
    b'{"user_id":"\xff","event_type":"login","amount":1,"ts":5}',
    b'{"user_id":"","event_type":"login","amount":1,"ts":5}',
    b'{"user_id":"u1","event_type":"LOGIN","amount":1,"ts":5}',
    b'{"user_id":"u1","event_type":"login","amount":1,"ts":999999999999999999}',
    b'{"user_id":"u1","event_type":"login","amount":1,"ts":9223372036854775807}',
    b'{"user_id":"u1","event_type":"login","amount":1,"ts":9223372036854775808}',
    b'{"user_id":"u1","event_type":"login","amount":1,"ts":5.0}',
    b'', None, b'null', b'[]',
]


def test_vectorized_parse_agrees_with_the_validator_record_by_record(records) -> None:
    """The Arrow fast path and the per-record ``parse`` + ``contribute`` give the same rows."""
    import pyarrow as pa

    values = [r.value for r in records] + _EDGE_VALUES
    batch = pa.RecordBatch.from_pydict({
        "key": [b"k"] * len(values), "value": values, "topic": [c.INPUT_TOPIC] * len(values),
        "partition": pa.array([0] * len(values), pa.int32()), "offset": list(range(len(values)))})
    out = list(parse_aggregate(job.UserActivity, QUERY.parsed_schema())(iter([batch])))
    assert len(out) == 2  # both paths were used
    fast_rows = out[0].num_rows
    assert 0 < fast_rows < len(values)
    rows = {r["src_offset"]: r for b in out for r in b.to_pylist()}
    assert sorted(rows) == list(range(len(values)))
    ua = job.UserActivity()
    for i, value in enumerate(values):
        event, reason = validate(value)
        row = rows[i]
        assert row["reason"] == reason, value
        if reason is None:
            assert {f: row[f] for f in QUERY.fields} == ua.contribute(event), value
            assert row["user_id"] == event["user_id"] and row["raw_value"] is None
        else:
            assert (row["raw_key"], row["raw_value"]) == (b"k", value)
