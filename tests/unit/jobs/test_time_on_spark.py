"""Jobs with stream time on a real (local) Spark, fed as a file stream of Kafka-shaped rows cut
into 1, 2 and 7 micro-batches over 3, 1 and 2 state partitions: output, changelog, DLQ and the
state store equal ``check``'s fold.
The sessions of users who went quiet close by the watermark's timers, in batches with no input
that the ticks start; the orders joined to two topics' prices pay the price in force at their time;
the docs' episode alerts write the fold's records."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from jobs.enriched_orders import ORDERS, PRICES, EnrichedOrders
from jobs.enriched_orders import generate as orders_and_prices
from jobs.sessions import Sessions, generate
from streamops.spark.query.plan import JobQuery, Topics
from streamops.state.lint import sample_records
from streamops.state.lint_spark import TICKS, compare, run_stream
from streamops.state.oracle import fold_input
from streamops.state.store import read_states

#: batches -> state partitions: each cut also with other state partitions
STATE_PARTITIONS = {1: 3, 2: 1, 7: 2}


def _spark_equals_fold(spark, job_cls, records, parts: int):
    expected = fold_input(job_cls, records)
    query = JobQuery(job_cls, state_partitions=STATE_PARTITIONS[parts],
                     topics=Topics("out", "changelog", "dlq", TICKS))
    root = Path(tempfile.mkdtemp(prefix="streamops-time-"))
    try:
        got, batches = run_stream(spark, query, records, root, parts)
        assert batches > parts  # ticks started batches with no input
        assert compare(job_cls, expected, got) == []
        assert read_states(spark, job_cls, str(root / "checkpoint"), batches - 1) == expected.states
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return expected


@pytest.mark.parametrize("parts", [1, 2, 7])
def test_sessions_on_spark_equal_the_fold_whatever_the_cut(local_spark, parts: int) -> None:
    records = sample_records(Sessions, "clicks", 3, generate(400, seed=5, users=12, step_ms=20_000))
    expected = _spark_equals_fold(local_spark, Sessions, records, parts)
    closed_by_timer = [k for k in expected.output if k.split("@")[0] not in expected.states]
    assert closed_by_timer and "late" in expected.rejected.values()  # the sample has what matters


@pytest.mark.parametrize("parts", [1, 2, 7])
def test_a_temporal_join_of_two_topics_on_spark_equals_the_fold_whatever_the_cut(local_spark, parts: int) -> None:
    records = sample_records(EnrichedOrders, [ORDERS, PRICES], 3, orders_and_prices(600, seed=4, skus=15))
    expected = _spark_equals_fold(local_spark, EnrichedOrders, records, parts)
    assert len(expected.output) > 100 and "late" in expected.rejected.values()


@pytest.mark.parametrize("parts", [1, 2, 7])
def test_the_docs_episode_alerts_on_spark_equal_the_fold_whatever_the_cut(local_spark, parts: int) -> None:
    """docs/writing-a-job.md's ``CardAlerts`` (sliding windows, fields of its own, emit on change)."""
    from tests.fixtures.card_alerts import TOPIC, CardAlerts
    from tests.fixtures.card_alerts import generate as transactions

    records = sample_records(CardAlerts, TOPIC, 3, transactions(600, seed=3, cards=12))
    expected = _spark_equals_fold(local_spark, CardAlerts, records, parts)
    assert len(expected.output) > 20 and None not in expected.output.values()
    assert "late" in expected.rejected.values()


@pytest.mark.parametrize("job", ["orders", "sessions"])
def test_an_update_job_over_a_batch_dataframe_runs_its_parse_stage(local_spark, job: str) -> None:
    """An executor's warm-up runs the query over a batch DataFrame; Spark refuses
    applyInPandasWithState there, so an update job (with or without stream time) gives its
    parse stage: every record parsed or rejected, none lost."""
    import datetime as dt

    from jobs.orders import Orders
    from streamops.spark.query.worker import unpack_row

    job_cls = {"orders": Orders, "sessions": Sessions}[job]
    records = sample_records(job_cls, "in", 3, job_cls().generate(300, 2))
    df = local_spark.createDataFrame(
        [(r.key, r.value, r.topic, r.partition, r.offset, dt.datetime(2026, 1, 1)) for r in records],
        "key binary, value binary, topic string, partition int, offset long, timestamp timestamp")
    parsed = JobQuery(job_cls, state_partitions=2, topics=Topics("o", "c", "d", TICKS)).build(df).toArrow()
    rows = parsed.filter(parsed.column("lane").to_numpy() != 2).column("row").to_pylist()
    offsets = sorted(unpack_row(r)["src_offset"] for r in rows)
    assert offsets == sorted(r.offset for r in records)


@pytest.mark.parametrize(("job", "parts"), [("recent_pages", 1), ("recent_pages", 7), ("named_orders", 2)])
def test_named_state_on_spark_equals_the_fold_whatever_the_cut(local_spark, job: str, parts: int) -> None:
    """Named state (``transformWithStateInPandas``, one variable per part, a TTL map's expiry a
    timer): the output, the changelog's parts put together, the DLQ and each state variable as the
    ``statestore`` reader gives it equal the fold."""
    from jobs.recent_pages import RecentPages
    from jobs.recent_pages import generate as visits
    from tests.fixtures.named_jobs import NamedOrders

    if job == "recent_pages":
        records = sample_records(RecentPages, "page-visits", 3, visits(900, seed=3, users=10, pages=60, step_ms=20_000))
        expected = _spark_equals_fold(local_spark, RecentPages, records, parts)
        assert any(not s["pages"] for s in expected.states.values())  # a quiet user's pages all left by TTL
    else:
        records = sample_records(NamedOrders, [ORDERS, PRICES], 3, orders_and_prices(600, seed=4, skus=15))
        _spark_equals_fold(local_spark, NamedOrders, records, parts)


def test_a_checkpoint_seeded_with_named_state_reads_back(local_spark) -> None:
    """``app lint``'s Spark check seeds a checkpoint from the folded states (rebuild-state's and
    compaction's mechanism) and reads every variable back."""
    from jobs.recent_pages import RecentPages
    from jobs.recent_pages import generate as visits
    from streamops.state.lint import lint

    records = sample_records(RecentPages, "page-visits", 3, visits(500, seed=1, users=8, pages=40, step_ms=30_000))
    report = lint(RecentPages, records, spark=local_spark)
    assert [(c.name, c.ok) for c in report.checks if not c.ok] == []
    assert "seeded checkpoint reads back equal" in report.checks[-1].detail


@pytest.mark.parametrize(("job", "columns"), [("orders", ["key", "lane", "row"]),
                                              ("sessions", ["key", "lane", "row", "wm"]),
                                              ("recent_pages", ["key", "lane", "row", "wm"])])
def test_the_state_function_gets_the_parsed_row_in_one_column(local_spark, tmp_path, job: str, columns) -> None:
    """PySpark hands an update job's per-group function each group as a pandas frame built column
    by column: the stateful operator's input is the grouping key, the packed row and (stream time)
    Spark's watermark column, not a column per field (``worker`` module docstring)."""
    import re

    from jobs.orders import Orders
    from jobs.recent_pages import RecentPages

    job_cls = {"orders": Orders, "sessions": Sessions, "recent_pages": RecentPages}[job]
    ddl = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
    raw = local_spark.readStream.schema(ddl).parquet(str(tmp_path))
    df = JobQuery(job_cls, state_partitions=2, topics=Topics("o", "c", "d", TICKS)).build(raw, tmp_path / "ckpt")
    plan = df._jdf.queryExecution().analyzed().toString()
    op = re.search(r"(?:FlatMapGroupsInPandasWithState|TransformWithStateInPySpark) \w+\(([^)]*)\)", plan)
    assert op is not None, plan
    assert [a.split("#")[0] for a in op.group(1).split(", ")] == columns
