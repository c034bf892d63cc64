"""The per-batch sink's steps, in their order: evaluate, the live resize's boundary, encode (with
stream time), commit, then the heartbeat, the batch's facts and the observed state."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from streamops.app.topics import H_REASON
from streamops.checkpoints import layout
from streamops.spark.driver.report import BatchFacts
from streamops.spark.driver.sink import BatchSink
from streamops.spec import AppSpec

SPEC = AppSpec(name="app1", job="jobs.orders", input_topics=["in"], output_topic="out")


class Steps:
    """Every collaborator of the sink, each call recorded in one list."""

    def __init__(self, hb: Path, *, replayed: bool = False) -> None:
        self.calls: list[tuple] = []
        self.hb, self.replayed = hb, replayed

    def toArrow(self):  # Spark's name
        self.calls.append(("toArrow",))
        return "table"

    def boundary(self):
        self.calls.append(("boundary",))
        return {"removed_executors": ["3"]}

    def to_records(self, table, batch_id):
        self.calls.append(("to_records", table, batch_id))
        return [SimpleNamespace(topic="out", headers=None),
                SimpleNamespace(topic=SPEC.dlq_topic, headers=[(H_REASON, b"bad-json")])]

    def advance_clocks(self, table, batch_id, ckpt, parts, ends=None):
        assert table in ("table", {"in/0": 5})  # the collected batch, or the tasks' clock rows
        self.calls.append(("advance_clocks", batch_id, parts, ends))
        return SimpleNamespace(ticks=[SimpleNamespace(topic=SPEC.ticks_topic, headers=None)],
                               clocks=layout.Clocks(batch_id, {("in", 0): 5}, 7))

    def commit(self, batch_id, records, input_end=None, marker_extra=None):
        self.calls.append(("commit", batch_id, [r.topic for r in records], input_end, marker_extra))
        return None if self.replayed else object()

    def executors(self):
        self.calls.append(("executors", json.loads(self.hb.read_text())["batch_id"]))  # after the heartbeat
        return 2

    def report(self, **fields):
        self.calls.append(("report", fields))


def _sink(tmp_path: Path, steps: Steps, facts: BatchFacts, **kw) -> BatchSink:
    spark = SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl="http://h:4040", applicationId="app-1"))
    return BatchSink(spark, SPEC, tmp_path / "ckpt", SimpleNamespace(commit=steps.commit),
                     to_records=steps.to_records, control=SimpleNamespace(boundary=steps.boundary),
                     heartbeat=steps.hb, reporter=SimpleNamespace(report=steps.report), facts=facts,
                     executors=steps.executors, started=1.0, **kw)


def test_a_batch_commits_before_anything_reports_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "batch_end_offsets", lambda ckpt, b: {"in": {"0": 10, "1": 40}})
    monkeypatch.setattr(layout, "batch_watermark", lambda ckpt, b: 3000)
    steps, facts = Steps(tmp_path / "driver.json"), BatchFacts()
    sink = _sink(tmp_path, steps, facts, advance_clocks=steps.advance_clocks, stop_at={"in": {"0": 8, "1": 50}})
    sink(SimpleNamespace(toArrow=steps.toArrow), 4)
    marker = {"stream_time": {"clocks": [["in", 0, 5]], "watermark": 7, "spark_watermark": 3000}}
    assert steps.calls == [
        ("toArrow",), ("boundary",), ("to_records", "table", 4), ("advance_clocks", 4, [("in", 0), ("in", 1)],
                                                                  {("in", 0): 10, ("in", 1): 40}),  # before the clamp
        # a bounded run's input end is clamped to its bound
        ("commit", 4, ["out", SPEC.dlq_topic, SPEC.ticks_topic], {"in": {"0": 8, "1": 40}}, marker),
        ("executors", 4),
        ("report", {"status": "running", "last_batch": 4, "executors": 2, "error": None})]
    hb = json.loads(steps.hb.read_text())
    assert hb["batch_id"] == 4 and hb["records"] == 3 and hb["replayed"] is False
    assert hb["removed_executors"] == ["3"] and hb["prometheus_url"] == "http://h:4040/metrics/prometheus/"
    got = facts(4)
    assert got["executors"] == 2 and got["dlq"] == {"bad-json": 1} and "committed_ms" in got


def test_a_replayed_batch_has_no_commit_time_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "batch_end_offsets", lambda ckpt, b: {"in": {"0": 10}})
    steps, facts = Steps(tmp_path / "driver.json", replayed=True), BatchFacts()
    _sink(tmp_path, steps, facts, advance_clocks=None, stop_at=None)(SimpleNamespace(toArrow=steps.toArrow), 0)
    assert steps.calls[3] == ("commit", 0, ["out", SPEC.dlq_topic], {"in": {"0": 10}}, None)
    assert json.loads(steps.hb.read_text())["replayed"] is True
    assert facts(0) == {"executors": 2, "dlq": {"bad-json": 1}}
    assert facts(1) == {"executors": 2}  # a batch the sink never saw: the last count


def test_with_commit_on_executors_the_tasks_write_and_the_driver_commits_the_marker_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch's records never reach the driver: its tasks write them under the batch's task
    marker (with what was emitted before a rewind), and the driver's transaction holds the tick, the
    marker (counting the tasks' records) and the input end; the clocks come from the tasks' totals."""
    from streamops.spark.query.task_records import BatchTotals

    monkeypatch.setattr(layout, "batch_end_offsets", lambda ckpt, b: {"in": {"0": 10, "1": 40}})
    monkeypatch.setattr(layout, "batch_watermark", lambda ckpt, b: 3000)
    steps, facts = Steps(tmp_path / "driver.json"), BatchFacts()

    def emitted_before(end):
        steps.calls.append(("emitted_before", end))
        return {"in": {"0": 4}}

    def write(df, batch_id, *, marker, emitted_until):
        steps.calls.append(("tasks.write", df, batch_id, marker, emitted_until))
        return BatchTotals(records=41, dropped=2, dlq={"bad-json": 3}, clocks={"in/0": 5})

    def commit(batch_id, records, input_end=None, marker_extra=None, written=0):
        steps.calls.append(("commit", batch_id, [r.topic for r in records], input_end, marker_extra, written))
        return 44

    committer = SimpleNamespace(commit=commit, emitted_before=emitted_before, task_marker=lambda b: (1 << 40) | b,
                                dropped=0)
    spark = SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl="http://h:4040", applicationId="app-1"))
    sink = BatchSink(spark, SPEC, tmp_path / "ckpt", committer, to_records=steps.to_records,
                     control=SimpleNamespace(boundary=steps.boundary), heartbeat=steps.hb,
                     reporter=SimpleNamespace(report=steps.report), facts=facts, executors=steps.executors,
                     started=1.0, advance_clocks=steps.advance_clocks, stop_at={"in": {"0": 8, "1": 50}},
                     tasks=SimpleNamespace(write=write))
    sink("the batch", 4)
    marker = {"stream_time": {"clocks": [["in", 0, 5]], "watermark": 7, "spark_watermark": 3000}}
    assert steps.calls == [
        ("emitted_before", {"in": {"0": 8, "1": 40}}),  # a bounded run's input end is clamped to its bound
        ("tasks.write", "the batch", 4, (1 << 40) | 4, {"in": {"0": 4}}),
        ("boundary",),
        ("advance_clocks", 4, [("in", 0), ("in", 1)], {("in", 0): 10, ("in", 1): 40}),  # before the clamp
        ("commit", 4, [SPEC.ticks_topic], {"in": {"0": 8, "1": 40}}, marker, 41),
        ("executors", 4),
        ("report", {"status": "running", "last_batch": 4, "executors": 2, "error": None})]
    assert committer.dropped == 2
    hb = json.loads(steps.hb.read_text())
    assert hb["records"] == 42 and hb["replayed"] is False
    assert facts(4)["dlq"] == {"bad-json": 3}
