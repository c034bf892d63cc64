"""A windowed job's own fields beside its windows (``initial_fields``), ``on_close`` and
``emit_on = "change"`` (issue 40, item 4): worked out by hand on small inputs, then the property
that every window kind gives the same records, output and state whatever the batch cut."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamops.job import JobDeclarationError, Record, validate_job
from streamops.state.oracle import fold_input, normalized
from streamops.testing import assert_job_sound
from streamops.windows import Hopping, Session, Sliding, Tumbling, WindowedJob
from tests.fixtures.stream_sim import run_batches
from tests.unit.time.test_cut_independence import cut
from tests.unit.time.test_windows import Count, _records

pytestmark = pytest.mark.unit


class Tally(Count):
    """Tumbling 100 ms, grace 10: numbers the key's windows as they close, in a field of its own."""

    def initial_fields(self, key: str) -> dict:
        return {"closed_so_far": 0}

    def on_close(self, key, state, start, end, acc):
        state["closed_so_far"] += 1
        return [acc, state["closed_so_far"]]


def test_a_field_of_the_job_stays_across_timers_and_expire() -> None:
    rs = _records((0, "a", 1000), (0, "a", 1050), (0, "b", 1110),  # closes a@1000
                  (0, "a", 1200), (0, "b", 1400))  # closes a@1200 and b@1100
    out = fold_input(Tally, rs)
    assert out.output == {"a@1000": [2, 1], "a@1200": [1, 2], "b@1100": [1, 1]}
    # a has no window left but its field is not as at first: kept, not deleted
    assert out.states == {"a": {"open": [], "closed": [], "closed_so_far": 2},
                          "b": {"open": [[1400, 1500, 1]], "closed": [], "closed_so_far": 1}}
    for sizes in (1, 2, "random"):  # expired after every batch on the app's path: the same
        got = run_batches(Tally, cut(rs, sizes, seed=2), [("in", 0)])
        assert got.output == out.output and got.states == out.states
        assert sorted(got.written) == sorted(out.output.items())  # each window written once
    assert_job_sound(Tally, rs)


def test_a_key_back_to_its_first_state_is_deleted() -> None:
    class Quiet(Tally):
        def on_close(self, key, state, start, end, acc):
            return acc  # leaves its field as it was

    out = fold_input(Quiet, _records((0, "a", 1000), (0, "b", 1110)))
    assert out.output == {"a@1000": 1} and out.states == {"b": {"open": [[1100, 1200, 1]], "closed": [],
                                                                 "closed_so_far": 0}}


class Busy(Count):
    """Tumbling 100 ms, grace 10: a window with two events or more is "busy"."""

    emit_on = "change"

    def result(self, key, start, end, acc):
        return "busy" if acc >= 2 else None


def test_emit_on_change_writes_a_window_only_when_its_value_differs_from_the_window_before() -> None:
    rs = _records((0, "a", 1000), (0, "a", 1010),  # busy: written
                  (0, "a", 1100), (0, "a", 1110),  # busy again: not written
                  (0, "a", 1200),  # None: not written, but the next busy one differs from it
                  (0, "a", 1300), (0, "a", 1301),  # busy: written
                  (0, "a", 1500), (0, "b", 1700))  # None
    out = fold_input(Busy, rs)
    assert out.output == {"a@1000": "busy", "a@1300": "busy"}
    assert out.states == {"b": {"open": [[1700, 1800, 1]], "closed": [], "last": None}}  # a: back to first
    for sizes in (1, 2, 7):
        got = run_batches(Busy, cut(rs, sizes, seed=0), [("in", 0)])
        assert got.written == [("a@1000", "busy"), ("a@1300", "busy")]  # no None, no repeat
        assert got.states == out.states


def test_a_key_keeps_its_last_value_while_it_is_not_none() -> None:
    out = fold_input(Busy, _records((0, "a", 1000), (0, "a", 1010), (0, "b", 1110)))
    assert out.output == {"a@1000": "busy"}
    assert out.states["a"] == {"open": [], "closed": [], "last": "busy"}  # its next window compares with it


def test_values_are_compared_as_json_reads_them_back() -> None:
    class Pair(Busy):
        def result(self, key, start, end, acc):
            return (1, 2)  # a tuple; the state after the changelog holds [1, 2]

    out = fold_input(Pair, _records((0, "a", 1000), (0, "a", 1100), (0, "b", 1210)))
    assert out.output == {"a@1000": [1, 2]}
    got = run_batches(Pair, [[r] for r in _records((0, "a", 1000), (0, "a", 1100), (0, "b", 1210))], [("in", 0)])
    assert got.written == [("a@1000", [1, 2])]


def test_declarations_of_fields_and_emit_modes_are_checked() -> None:
    class OwnInitial(Count):
        def initial(self, key):
            return {"open": [], "closed": [], "n": 0}

    class Sometimes(Count):
        emit_on = "sometimes"

    class Clash(Count):
        def initial_fields(self, key):
            return {"last": 0, "n": 0}

    for cls, text in ((OwnInitial, "declare the fields it keeps beside them in initial_fields"),
                      (Sometimes, "'close', 'update' or 'change'")):
        with pytest.raises(JobDeclarationError, match=text):
            validate_job(cls)
    with pytest.raises(JobDeclarationError, match=r"initial_fields names \['last'\]"):
        Clash().initial("a")
    for w in (Tumbling(100), Hopping(100, 50), Sliding(100), Session(100)):  # change: every kind
        validate_job(type("Changes", (Count,), {"windows": w, "emit_on": "change"}))


KINDS = {"tumbling": Tumbling(size_ms=1_000), "hopping": Hopping(size_ms=1_000, advance_ms=400),
         "sliding": Sliding(size_ms=1_000), "session": Session(gap_ms=300)}


def _levels(w) -> type[WindowedJob]:
    """A window's value is its event count in levels of 3, with the run of equal levels it belongs
    to numbered in a field of the job's own: what is written depends on the windows before it."""

    class Levels(Count):
        windows = w
        grace_ms = 200
        emit_on = "change"

        def initial_fields(self, key):
            return {"runs": 0, "level": None}

        def on_close(self, key, state, start, end, acc):
            level = acc // 3
            if level != state["level"]:
                state["runs"] += 1
            state["level"] = level
            return None if level == 0 else {"level": level, "run": state["runs"]}

    return Levels


def _input(seed: int, events: int, keys: int, step: int) -> list[Record]:
    rng = random.Random(seed)
    rows = []
    for i in range(events):
        ts = 10_000 + i * step + rng.randint(-150, 150) - (rng.randint(100, 900) if rng.random() < 0.05 else 0)
        k = rng.randint(0, keys - 1)
        rows.append((k % 2, f"k{k}", ts))  # one key, one partition
    return _records(*rows)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(list(KINDS)), seed=st.integers(0, 10_000), events=st.integers(1, 120),
       keys=st.integers(1, 5), step=st.sampled_from([20, 90, 400]), sizes=st.sampled_from([1, 2, 7, "random"]),
       cut_seed=st.integers(0, 1000))
def test_emit_on_change_is_the_same_whatever_the_batch_cut(kind, seed, events, keys, step, sizes, cut_seed) -> None:
    job_cls = _levels(KINDS[kind])
    records = _input(seed, events, keys, step)
    parts = [("in", 0), ("in", 1)]
    expected = fold_input(job_cls, records, parts)
    got = run_batches(job_cls, cut(records, sizes, cut_seed), parts)
    assert sorted(got.written, key=json.dumps) == sorted(expected.output.items(), key=json.dumps)
    assert None not in [v for _k, v in got.written]
    assert got.dlq == expected.rejected
    assert {k: normalized(job_cls, s) for k, s in got.states.items()} == expected.states
