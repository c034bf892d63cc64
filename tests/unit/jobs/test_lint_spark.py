"""``app lint``'s Spark checks on a local Spark: the declared apps pass; a vectorized parser that
disagrees with ``parse`` is caught by comparing the Spark run with the plain-Python fold."""

from __future__ import annotations

from jobs.page_stats import PageStats
from jobs.user_activity import UserActivity, parse_canonical
from streamops.state.lint import lint, sample_records


def test_an_update_app_passes_lint_with_spark(local_spark) -> None:
    """(The aggregate path's Spark check is the next test's, which fails only where it should.)"""
    for job_cls, n in ((PageStats, 300),):
        records = sample_records(job_cls, "in", 4, job_cls().generate(n, 3))
        report = lint(job_cls, records, spark=local_spark)
        assert report.ok, [c for c in report.checks if not c.ok]
        spark_check = report.checks[-1]
        assert spark_check.name == "spark equals the python fold" and "seeded checkpoint reads back equal" in \
            spark_check.detail


def _double_purchases(job, batch):
    """A wrong fast path: counts each purchase twice."""
    done, rest = parse_canonical(job, batch)
    if done is not None:
        import pyarrow.compute as pc

        i = done.schema.get_field_index("purchases")
        done = done.set_column(i, "purchases", pc.multiply(done.column(i), 2))
    return done, rest


class WrongFastPath(UserActivity):
    parse_arrow = _double_purchases


def test_a_fast_path_that_disagrees_with_parse_fails_lint(local_spark) -> None:
    records = sample_records(WrongFastPath, "in", 4, WrongFastPath().generate(400, 4))
    report = lint(WrongFastPath, records, spark=local_spark)
    failed = {c.name: c.detail for c in report.checks if not c.ok}
    assert list(failed) == ["spark equals the python fold"], report.checks
    assert "output differs from the python fold" in failed["spark equals the python fold"]
    assert "'purchases'" in failed["spark equals the python fold"] or "purchases" in failed["spark equals the python fold"]


def test_the_stream_input_parts_are_read_in_order(tmp_path) -> None:
    """Spark's file source reads new files oldest first (ms modification times): parts written in
    the same few ms tied, and a later part read first made page_stats' lint fail now and then."""
    import itertools

    import pyarrow.parquet as pq

    from streamops.state.lint_spark import write_stream_input

    records = sample_records(PageStats, "in", 4, PageStats().generate(30, 3))
    paths = write_stream_input(records, tmp_path / "input", 3)
    mtimes = [int(p.stat().st_mtime * 1000) for p in paths]
    assert all(a < b for a, b in itertools.pairwise(mtimes)), mtimes
    offsets = [pq.read_table(p).column("offset").to_pylist() for p in paths]
    assert [o for part in offsets for o in part] == [r.offset for r in records]
