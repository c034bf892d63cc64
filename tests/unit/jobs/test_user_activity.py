"""The demo job's pure transformations on static DataFrames, checked against the Python fold."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.testing import assertDataFrameEqual

from jobs import user_activity as job
from streamops.demo import contract as c
from streamops.demo.fold import fold, profile_json, validate
from streamops.demo.generator import generate_records

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


def test_profile_updates_equal_the_python_fold(local_spark, raw, records) -> None:
    expected = fold(e for e, reason in map(validate, (r.value for r in records)) if reason is None)
    actual = job.profile_updates(job.parse(raw))
    want = local_spark.createDataFrame(
        [(p["user_id"], p["last_login_ts"], p["purchases"], round(p["total_amount"] * 100), p["events"])
         for p in expected.values()],
        "user_id string, last_login_ts long, purchases long, total_cents long, events long",
    )
    assertDataFrameEqual(actual, want)


def test_build_query_and_records(raw, records) -> None:
    out = job.build_query(raw, state_partitions=2).toArrow()
    recs = job.to_records(out, output_topic="o", changelog_topic="cl", dlq_topic="d", batch_id=7)
    by_topic: dict[str, list] = {}
    for r in recs:
        by_topic.setdefault(r.topic, []).append(r)
    expected = fold(e for e, reason in map(validate, (r.value for r in records)) if reason is None)
    assert {r.key.decode(): r.value for r in by_topic["o"]} == {k: profile_json(p) for k, p in expected.items()}
    assert [(r.key, r.value) for r in by_topic["o"]] == [(r.key, r.value) for r in by_topic["cl"]]
    assert all(dict(r.headers)[c.H_BATCH_ID] == b"7" for r in recs)
    bad = {(i % 3, i // 3): (rec.key, rec.value, validate(rec.value)[1])
           for i, rec in enumerate(records) if validate(rec.value)[1] is not None}
    assert len(bad) == sum(1 for r in records if r.reason is not None) > 0
    got = {}
    for r in by_topic["d"]:
        h = {k: v.decode() for k, v in r.headers}
        assert h[c.H_SOURCE_TOPIC] == c.INPUT_TOPIC
        got[(int(h[c.H_SOURCE_PARTITION]), int(h[c.H_SOURCE_OFFSET]))] = (r.key, r.value, h[c.H_REASON])
    assert got == bad
    assert {reason for *_, reason in got.values()} == set(c.REASONS)
