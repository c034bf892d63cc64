"""Reprocess's pure parts: range bounds, the identity a reprocess runs under, the bounded source option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamops.app.outputs import reprocess_spec
from streamops.exceptions import UsageError
from streamops.reset.reprocess import bound_offset, committed_records, parse_bound
from streamops.spark.kafka_io import clamp_to_bound
from streamops.spec import AppSpec, ReprocessPolicy


def test_bounds() -> None:
    assert parse_bound("earliest", "--from") == {"kind": "earliest"}
    assert parse_bound(" latest ", "--to") == {"kind": "latest"}
    assert parse_bound("2026-11-23T08:00:00Z", "--from")["ms"] == 1795420800000
    assert parse_bound("2026-11-23T08:00:00", "--from")["ms"] == 1795420800000  # no zone: UTC
    assert parse_bound('{"t": {"0": 5}}', "--to") == {"kind": "offsets", "offsets": {"t": {"0": 5}}}
    with pytest.raises(UsageError, match="--from: 'yesterday' is none of"):
        parse_bound("yesterday", "--from")
    with pytest.raises(UsageError, match="--to: not JSON offsets"):
        parse_bound("{t: 1}", "--to")


def test_a_reprocess_runs_under_its_own_identity_and_versioned_topics() -> None:
    spec = AppSpec(name="ua", job="jobs.x", input_topics=("in",), output_topic="out", changelog_topic="cl",
                   dlq_topic="dlq", output_version="v2")
    r = reprocess_spec(spec, "v3")
    assert (r.name, r.output_topic, r.changelog_topic, r.dlq_topic) == ("ua__reprocess_v3", "out.v3", "cl.v3", "dlq.v3")
    assert r.live_output_topic == "out.v3" and r.commits_topic == "_streamops-ua__reprocess_v3-commits"
    assert r.input_topics == spec.input_topics
    assert r.max_offsets_per_trigger is None  # the app's batches are unbounded: so are the backfill's
    sized = spec.model_copy(update={"max_offsets_per_trigger": 1000})
    assert reprocess_spec(sized, "v3").max_offsets_per_trigger == 4000  # bigger batches for throughput
    own = sized.model_copy(update={"reprocess": ReprocessPolicy(max_offsets_per_trigger=50)})
    assert reprocess_spec(own, "v3").max_offsets_per_trigger == 50
    with pytest.raises(UsageError, match="output version must look like v2"):
        reprocess_spec(spec, "3")


def test_a_bounded_read_takes_back_what_its_last_batch_planned_past_the_bound() -> None:
    """Spark's Kafka source has no end for a stream: a batch may plan past the bound (its rows are
    filtered out), and the checkpoint's end offsets are clamped to it, so the range that starts there
    continues exactly where this one ended."""
    end = {"t": {"0": 17, "1": 3}, "u": {"0": 9}}
    bound = {"t": {"0": 10, "1": 5}}
    assert clamp_to_bound(end, bound) == {"t": {"0": 10, "1": 3}, "u": {"0": 9}}
    assert clamp_to_bound({}, bound) == {}


def test_progress_counts_a_batch_planned_past_the_range_up_to_its_end(tmp_path: Path) -> None:
    """The trigger logged "3000/1000 records (300%)" while a run's batch had planned to the topic's end."""
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    planned = {"in": {"0": 1500, "1": 1500}}  # the whole topic, 3000 records
    (tmp_path / "offsets" / "0").write_text("\n".join(["v1", "{}", json.dumps(planned)]))
    (tmp_path / "commits" / "0").write_text("v1\n{}")
    plan = {"start": {"in": {"0": 0, "1": 100}}, "stop": {"in": {"0": 500, "1": 600}}}
    assert committed_records(tmp_path, plan) == 1000
    plan = {"start": {"in": {"0": 0, "1": 100}}, "stop": {"in": {"0": 2000, "1": 2000}}}
    assert committed_records(tmp_path, plan) == 2900  # below the end: as committed


TIME, OFFSETS = {"kind": "time", "ms": 0}, {"kind": "offsets"}


@pytest.mark.parametrize(("bound", "option", "lo", "hi", "at_time", "given", "want"), [
    # nothing deleted (lo 0): never a warning
    (TIME, "--from", 0, 100, 0, None, (0, False)),
    # retention deleted 40 records; the time's first kept record is the oldest kept: they may be in range
    (TIME, "--from", 40, 100, 40, None, (40, True)),
    (TIME, "--from", 40, 100, 70, None, (70, False)),  # the range starts after the oldest kept
    (TIME, "--from", 40, 40, None, None, (40, True)),  # every record deleted
    (TIME, "--from", 40, 100, None, None, (100, False)),  # no record at or after the time
    (TIME, "--to", 40, 100, 40, None, (40, False)),  # only the start can begin in deleted records
    (OFFSETS, "--from", 40, 100, None, 10, (40, True)),  # asked for deleted offsets: clamped, warned
    (OFFSETS, "--from", 40, 100, None, 50, (50, False)),
    (OFFSETS, "--from", 40, 100, None, 40, (40, False)),  # the oldest kept, asked for
    (OFFSETS, "--from", 40, 100, None, None, (40, False)),  # a partition the offsets leave out: what is kept
    (OFFSETS, "--to", 40, 100, None, None, (100, False)),
    (OFFSETS, "--to", 40, 100, None, 500, (100, False)),  # past the end: clamped
    ({"kind": "earliest"}, "--from", 40, 100, None, None, (40, False)),  # asks for what is kept
    ({"kind": "latest"}, "--to", 40, 100, None, None, (100, False)),
])
def test_a_bound_within_the_kept_records_and_whether_it_starts_in_deleted_ones(bound, option, lo, hi, at_time,
                                                                              given, want) -> None:
    assert bound_offset(bound, option, lo, hi, at_time, given) == want
