"""Idle inputs (``AppSpec.idle_timeouts``, ``stream_time.step_clocks``): a partition quiet for longer
than its topic's timeout stops holding the watermark back; its records, once it shows some again,
are judged against the raised stream time, and ``check``'s fold replays those raises. Run as Spark
runs the job (``tests.fixtures.stream_sim``), under random batch cuts and pauses."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamops import stream_time
from streamops.job import Record
from streamops.state.lint import sample_records
from streamops.state.oracle import fold_input, normalized
from tests.fixtures.stream_sim import run_batches
from tests.unit.time.test_cut_independence import JOBS

pytestmark = pytest.mark.unit

BATCH_MS = 100


def paused_cut(records: list[Record], sizes: int | str, seed: int, paused: tuple[str, int],
               pause: tuple[int, int]) -> list[list[Record]]:
    """Micro-batches as ``test_cut_independence.cut`` makes them, but ``paused`` shows nothing in
    batches ``pause[0]`` to ``pause[1] - 1`` (a quiet price topic, a partition no key hashed to)."""
    rng = random.Random(seed)
    queues: dict[tuple[str, int], list[Record]] = {}
    for r in records:
        queues.setdefault((r.topic, r.partition), []).append(r)
    batches: list[list[Record]] = []
    while any(queues.values()):
        i, batch = len(batches), []
        for tp, q in queues.items():
            if tp == paused and pause[0] <= i < pause[1]:
                continue
            n = rng.randint(0, 9) if sizes == "random" else int(sizes)
            batch += q[:n]
            del q[:n]
        batches.append(batch)
    return batches


def _sessions(events: int, seed: int, skip_partition: int | None = None):
    job_cls, topics, gen = JOBS["sessions"]
    records = sample_records(job_cls, topics, 3, gen(events, seed))
    if skip_partition is not None:  # no key hashes there: the partition shows nothing, ever
        records = [r for r in records if r.partition != skip_partition]
    return job_cls, records, [(t, p) for t in topics for p in range(3)]


def assert_as_check_folds(job_cls, records, partitions, got) -> None:
    """The run equals ``check``'s fold: as of its last batch's watermark, with its raises."""
    expected = fold_input(job_cls, records, partitions, watermark=got.watermark, raises=got.raises)
    assert got.output == expected.output
    assert got.dlq == expected.rejected
    assert got.dlq_count == len(expected.rejected)
    assert {k: normalized(job_cls, s) for k, s in got.states.items()} == expected.states


def test_a_partition_that_never_shows_a_record_holds_every_session_open_until_it_is_released() -> None:
    job_cls, records, partitions = _sessions(400, seed=5, skip_partition=2)
    batches = paused_cut(records, 7, seed=1, paused=("clicks", 2), pause=(0, 0))
    held = run_batches(job_cls, batches, partitions)
    released = run_batches(job_cls, batches, partitions, idle_timeouts_ms={"clicks": 3 * BATCH_MS}, batch_ms=BATCH_MS)
    # without idleness the watermark never exists: the sessions still open stay open
    assert held.watermark == 0
    assert any(s["open"] for s in held.states.values())
    # released, the watermark is the other partitions' and closes every session it passed
    assert released.watermark > 0
    assert len(released.output) > len(held.output)
    assert_as_check_folds(job_cls, records, partitions, released)
    assert released.raises == {}  # it never showed a record: nothing was judged against a raise


def test_records_of_a_resumed_partition_are_judged_against_the_raised_stream_time() -> None:
    job_cls, records, partitions = _sessions(600, seed=3)
    batches = paused_cut(records, 2, seed=2, paused=("clicks", 1), pause=(3, 40))
    got = run_batches(job_cls, batches, partitions, idle_timeouts_ms={"clicks": 5 * BATCH_MS}, batch_ms=BATCH_MS)
    assert got.raises and set(got.raises) == {("clicks", 1)}
    assert_as_check_folds(job_cls, records, partitions, got)
    # the raise is what makes the fold right: its records behind the others' watermark were late
    without = fold_input(job_cls, records, partitions, watermark=got.watermark)
    late = {w for w, reason in got.dlq.items() if reason == stream_time.LATE and w[:2] == ("clicks", 1)}
    assert late - {w for w, reason in without.rejected.items() if reason == stream_time.LATE}
    # with no timeout, the same pause changes nothing: the result is the input's alone
    plain = run_batches(job_cls, batches, partitions)
    assert plain.raises == {}
    assert plain.output == fold_input(job_cls, records, partitions).output


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(["sessions", "enriched_orders", "interval_join", "recent_pages"]),
       seed=st.integers(0, 10_000), events=st.integers(1, 250), step=st.sampled_from([500, 20_000, 600_000]),
       sizes=st.sampled_from([1, 2, 7, "random"]), cut_seed=st.integers(0, 1000), paused_at=st.integers(0, 5),
       pause_len=st.integers(0, 30), timeout=st.integers(1, 8), which=st.integers(0, 5))
def test_any_input_any_cut_any_pause(name, seed, events, step, sizes, cut_seed, paused_at, pause_len, timeout,
                                     which) -> None:
    job_cls, topics, gen = JOBS[name]
    records = sample_records(job_cls, topics, 3, gen(events, seed, step=step))
    partitions = [(t, p) for t in topics for p in range(3)]
    paused = partitions[which % len(partitions)]
    batches = paused_cut(records, sizes, cut_seed, paused, (paused_at, paused_at + pause_len))
    got = run_batches(job_cls, batches, partitions, idle_timeouts_ms={paused[0]: timeout * BATCH_MS},
                      batch_ms=BATCH_MS)
    assert_as_check_folds(job_cls, records, partitions, got)


def test_lint_names_the_partition_holding_the_watermark_and_what_an_idle_timeout_changes() -> None:
    from streamops.state.lint import lint
    from streamops.state.oracle import Expected, timed_items
    from streamops.state.sample_watermark import sample_watermark

    job_cls, records, partitions = _sessions(3000, seed=5, skip_partition=2)
    held = sample_watermark(job_cls, records, partitions)
    assert (held.watermark, held.holder, held.holder_empty) == (None, ("clicks", 2), True)
    assert "clicks[2] shows no event" in held.describe() and "idle_timeouts: {clicks: ...}" in held.describe()
    released = sample_watermark(job_cls, records, partitions, {"clicks": "30 seconds"})
    # released, the watermark is the other two partitions' (the smaller of their stream times)
    assert released.released_watermark == timed_items(job_cls(), records, Expected(), partitions[:2])[1]
    more = fold_input(job_cls, records, partitions, watermark=released.released_watermark)
    assert released.released_outputs == len(more.output) - len(fold_input(job_cls, records, partitions).output) > 0
    report = lint(job_cls, records, partitions=partitions, idle_timeouts={"clicks": "30 seconds"})
    check = next(c for c in report.checks if c.name == "watermark")
    assert check.ok and f"{released.released_outputs} more output record(s)" in check.detail
    # every partition shows events: the one with the oldest stream time holds it
    job_cls, records, partitions = _sessions(600, seed=3)
    full = sample_watermark(job_cls, records, partitions)
    assert full.watermark == timed_items(job_cls(), records, Expected(), partitions)[1] is not None
    assert f"held by clicks[{full.holder[1]}]" in full.describe()


def test_the_docs_idle_inputs_example_runs_and_prints_what_it_shows() -> None:
    import contextlib
    import io
    import re
    from pathlib import Path

    import yaml

    from streamops.spec import AppSpec, default_spec_path, load_specs

    repo = Path(__file__).resolve().parents[3]
    doc = (repo / "docs" / "writing-a-job.md").read_text()
    section = doc[doc.index("### Idle inputs"):doc.index("### Windows")]
    spec_yaml, code, shown = (m.group(2) for m in re.finditer(r"```(yaml|python|text)\n(.*?)```", section, re.DOTALL))
    # the spec snippet is a valid entry of the app it names
    (name, fields), = yaml.safe_load(spec_yaml).items()
    real = load_specs(default_spec_path(repo))[name]
    assert tuple(fields["input_topics"]) == real.input_topics
    spec = AppSpec.model_validate({**real.model_dump(), **fields})
    assert spec.idle_timeout_ms == {"product-prices": 600_000}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "writing-a-job.md", "exec"), {})  # noqa: S102 - the docs' own example, run as written
    assert out.getvalue() == shown


def test_a_whole_input_gone_quiet_is_released_to_the_stream_time_its_partitions_showed() -> None:
    """Every partition quiet past its timeout: the watermark is the smallest stream time of those that
    showed events (the last sessions close), the one that showed none is raised to it, and a batch
    is due for the driver to wake its query only while a watched partition is not yet released."""
    a, b, c = ("clicks", 0), ("clicks", 1), ("clicks", 2)
    first = stream_time.step_clocks({}, {a: 5_000, b: 7_000}, [a, b, c], {a: 10, b: 4, c: 0},
                                    timeouts_ms={"clicks": 3_000}, now_ms=1_000)
    assert (first.watermark, first.idle) == (None, {})
    assert stream_time.release_due(first.moved, first.idle, {"clicks": 3_000}, 3_999) == []
    assert stream_time.release_due(first.moved, first.idle, {"clicks": 3_000}, 4_000) == [a, b, c]
    quiet = stream_time.step_clocks(first.clocks, first.clocks, [a, b, c], {a: 10, b: 4, c: 0}, idle=first.idle,
                                    moved=first.moved, timeouts_ms={"clicks": 3_000}, now_ms=4_000)
    assert quiet.idle == {a: 4_000, b: 4_000, c: 4_000}
    assert quiet.clocks == {a: 5_000, b: 7_000, c: 5_000} and quiet.watermark == 5_000
    assert stream_time.release_due(quiet.moved, quiet.idle, {"clicks": 3_000}, 9_000) == []
    # c shows a record: judged against 5000, which is kept as its raise from its first record on
    back = stream_time.step_clocks(quiet.clocks, {**quiet.clocks, c: 6_000}, [a, b, c], {a: 10, b: 4, c: 1},
                                   idle=quiet.idle, moved=quiet.moved, timeouts_ms={"clicks": 3_000}, now_ms=9_000)
    assert back.raises == {c: [(0, 5_000)]} and c not in back.idle
    assert back.clocks == {a: 6_000, b: 7_000, c: 6_000} and back.watermark == 6_000  # a follows the active c
