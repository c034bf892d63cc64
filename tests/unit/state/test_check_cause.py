"""``check`` names keys whose input came from several partitions as the likely cause of a
difference (pure logic: the fold's bookkeeping and the report, no broker, no Spark)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from streamops.job import Job, Record, Sum
from streamops.state.check import CheckReport, SplitKeys, compare, likely_cause, render
from streamops.state.oracle import fold_input


class Last(Job):
    def parse(self, record: Record):
        k, v = record.value.decode().split(":")
        return {"k": k, "v": v}

    def key(self, event) -> str:
        return event["k"]

    def initial(self, key: str):
        return None

    def update(self, key: str, state, events: Sequence):
        return events[-1]["v"] if events else state


class Agg(Last):
    aggregate: ClassVar = {"n": Sum()}
    initial = Job.initial
    update = Job.update

    def contribute(self, event):
        return {"n": 1}


RECORDS = [Record("in", 0, 0, None, b"a:1"), Record("in", 1, 0, None, b"a:2"), Record("in", 1, 1, None, b"b:1"),
           Record("in", 1, 2, None, b"b:2"), Record("other", 0, 0, None, b"c:1"), Record("in", 3, 0, None, b"c:2"),
           Record("in", 0, 1, None, b"d:1")]


def test_the_fold_records_keys_seen_in_several_partitions() -> None:
    out = fold_input(Last, RECORDS)
    assert out.split_keys == {"a": {("in", 0), ("in", 1)}, "c": {("other", 0), ("in", 3)}}
    assert out.states == {"a": "2", "b": "2", "c": "1", "d": "1"}  # sorted by (topic, partition, offset)


def test_a_difference_with_split_keys_names_them_with_an_example() -> None:
    folded = fold_input(Last, RECORDS)
    diffs = [compare("state", folded.states, {**folded.states, "c": "2"}), compare("output", {}, {})]
    cause = likely_cause(Last, diffs, folded.split_keys)
    assert cause == SplitKeys(2, "c", (("in", 3), ("other", 0)))  # the key that differs, not just any
    report = CheckReport("app", 3, len(RECORDS), {}, diffs, cause=cause)
    text = render(report)
    assert "likely cause: 2 key(s) have input in several partitions, e.g. 'c' in in/3, other/0" in text
    assert "one key stays in one partition" in text
    assert report.to_dict()["likely_cause"]["split_keys"]["partitions"] == ["in/3", "other/0"]


def test_no_cause_without_a_difference_or_split_keys_or_for_an_aggregation() -> None:
    folded = fold_input(Last, RECORDS)
    same = [compare("state", folded.states, folded.states)]
    differs = [compare("state", folded.states, {})]
    assert likely_cause(Last, same, folded.split_keys) is None
    assert likely_cause(Last, differs, {}) is None
    assert likely_cause(Agg, differs, folded.split_keys) is None  # a sum does not depend on order
    example = likely_cause(Last, [compare("output", {"x": 1}, {"x": 2})], folded.split_keys)
    assert example is not None and example.example == "a"  # no differing key is split: the first one
    assert CheckReport("app", 3, 7, {}, same).to_dict()["likely_cause"] is None


def test_no_cause_for_a_job_that_orders_its_events_across_partitions() -> None:
    """A join in event-time order (``fire_timers_by = "watermark"``) has its keys in two topics by
    design: that is not what makes it differ."""
    from jobs.enriched_orders import EnrichedOrders

    folded = fold_input(Last, RECORDS)
    differs = [compare("state", folded.states, {})]
    assert likely_cause(EnrichedOrders, differs, folded.split_keys) is None
