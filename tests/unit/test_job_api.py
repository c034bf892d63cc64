"""The job API's declaration checks and ``app lint``'s pure checks, on small jobs written here."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from streamops.job import Job, JobDeclarationError, Max, Record, Reject, Sum, find_job, validate_job
from streamops.state.lint import lint
from streamops.state.oracle import fold_input


class Counts(Job):
    def parse(self, record: Record):
        return Reject("empty") if not record.value else {"k": record.key.decode(), "v": record.value.decode()}

    def key(self, event) -> str:
        return event["k"]

    def initial(self, key: str):
        return {"n": 0, "values": []}

    def update(self, key: str, state, events: Sequence):
        return {"n": state["n"] + len(events), "values": sorted({*state["values"], *(e["v"] for e in events)})}


def records(pairs) -> list[Record]:
    return [Record("t", 0, i, k.encode(), v.encode()) for i, (k, v) in enumerate(pairs)]


SAMPLE = records([("a", "x"), ("b", "y"), ("a", "z"), ("a", ""), ("a", "x"), ("b", "q")])


@pytest.mark.parametrize(("body", "message"), [
    ({"key": lambda self, e: "k", "initial": lambda self, k: 0, "update": lambda self, k, s, es: s},
     "does not define parse"),
    ({"parse": Counts.parse, "key": Counts.key, "initial": Counts.initial}, "does not define update"),
    ({"parse": Counts.parse, "key": Counts.key}, "does not define initial, update"),
    ({"parse": Counts.parse, "key": Counts.key, "aggregate": {"n": Sum()}}, "does not define contribute"),
    ({"parse": Counts.parse, "key": Counts.key, "aggregate": {"n": Sum()}, "contribute": lambda self, e: {},
      "update": Counts.update}, "declares aggregate and also update"),
    ({"parse": Counts.parse, "key": Counts.key, "aggregate": {}, "contribute": lambda self, e: {}},
     "non-empty mapping"),
    ({"parse": Counts.parse, "key": Counts.key, "aggregate": {"n": "sum"}, "contribute": lambda self, e: {}},
     "Sum\\(\\)/Max\\(\\)/Min\\(\\)"),
    ({**vars(Counts), "state_serde": object()}, "state_serde must have dumps"),
])
def test_incomplete_declarations_are_refused_naming_the_piece(body, message) -> None:
    cls = type("Broken", (Job,), {k: v for k, v in body.items() if not k.startswith("__")})
    with pytest.raises(JobDeclarationError, match=message):
        validate_job(cls)


def test_a_module_must_define_exactly_one_job() -> None:
    import types

    mod = types.ModuleType("jobs.two")
    for name in ("A", "B"):
        setattr(mod, name, type(name, (Counts,), {"__module__": "jobs.two"}))
    with pytest.raises(JobDeclarationError, match=r"exactly one subclass .*found A, B"):
        find_job(mod)
    empty = types.ModuleType("jobs.none")
    empty.Counts = Counts  # imported, not defined there
    with pytest.raises(JobDeclarationError, match="found none"):
        find_job(empty)


def test_the_oracle_folds_update_jobs_per_key_in_input_order() -> None:
    out = fold_input(Counts, SAMPLE)
    assert out.states == {"a": {"n": 3, "values": ["x", "z"]}, "b": {"n": 2, "values": ["q", "y"]}}
    assert out.output == out.states and out.rejected == {("t", 0, 3): "empty"} and out.records == 6


def test_the_oracle_folds_an_aggregation_like_spark() -> None:
    class Agg(Job):
        aggregate = {"n": Sum(), "top": Max()}

        def parse(self, record):
            return json.loads(record.value)

        def key(self, event):
            return event["k"]

        def contribute(self, event):
            return {"n": 1, "top": event.get("x")}

    out = fold_input(Agg, records([("a", '{"k":"a","x":3}'), ("a", '{"k":"a"}'), ("b", '{"k":"b"}')]))
    assert out.states == {"a": {"n": 2, "top": 3}, "b": {"n": 1, "top": None}}


def test_lint_passes_a_sound_job() -> None:
    report = lint(Counts, SAMPLE)
    assert report.ok, report.checks
    assert [c.name for c in report.checks] == ["declaration", "parse", "serde round trip", "batch split",
                                              "one key, one partition"]


def test_lint_catches_a_serde_that_does_not_round_trip() -> None:
    class WithSet(Counts):
        def initial(self, key):
            return {"n": 0, "values": set()}

        def update(self, key, state, events):
            return {"n": state["n"] + len(events), "values": state["values"] | {e["v"] for e in events}}

        def emit(self, key, state):
            return {key: {"n": state["n"]}}

    report = lint(WithSet, SAMPLE)
    failed = {c.name: c.detail for c in report.checks if not c.ok}
    assert list(failed) == ["serde round trip"], report.checks
    assert "TypeError" in failed["serde round trip"] or "change through state_serde" in failed["serde round trip"]

    class WithTuple(Counts):
        def update(self, key, state, events):
            return {"n": state["n"] + len(events), "values": tuple(sorted({*state["values"], *(e["v"] for e in events)}))}

        def emit(self, key, state):
            return {key: {"n": state["n"]}}

    failed = {c.name: c.detail for c in lint(WithTuple, SAMPLE).checks if not c.ok}
    assert "2 of 2 states change through state_serde" in failed["serde round trip"]


def test_lint_catches_an_update_that_depends_on_batches() -> None:
    class LastBatchOnly(Counts):
        def update(self, key, state, events):
            return {"n": len(events), "values": []}  # forgets the state it was given

    failed = {c.name: c.detail for c in lint(LastBatchOnly, SAMPLE).checks if not c.ok}
    assert list(failed) == ["batch split"] and "differs from the same events in two calls" in failed["batch split"]
    # the values that differ (docs/writing-a-job.md promises them): a's x, z, x in one call or as x | z, x
    assert failed["batch split"].endswith("split at 1: update must not depend on how Spark cuts batches; "
                                          "'n': one call 3, two calls 2"), failed


def test_lint_shows_what_an_expire_that_drops_too_much_changed() -> None:
    class ForgetsLoners(Counts):
        def expire(self, key, state):
            return None if state["n"] == 1 else state  # a key after its first event is not done yet

    failed = {c.name: c.detail for c in lint(ForgetsLoners, SAMPLE).checks if not c.ok}
    assert list(failed) == ["batch split"], failed
    # a: x, z, x; expired after x, the count starts again at z
    assert failed["batch split"].startswith("key 'a': expiring after event 1 changed the final state")
    assert failed["batch split"].endswith("; 'n': no expire between 3, expired after event 1 2"), failed


def test_lint_of_an_incomplete_job_stops_at_the_declaration() -> None:
    class NoUpdate(Job):
        def parse(self, record):
            return {}

        def key(self, event):
            return "k"

    report = lint(NoUpdate, SAMPLE)
    assert not report.ok and [c.name for c in report.checks] == ["declaration"]
    assert "does not define initial, update" in report.checks[0].detail


def test_page_stats_rejects_late_views_and_expires_closed_windows() -> None:
    from jobs.page_stats import GRACE_MS, WINDOW_MS, PageStats

    def view(ts: int, user: str = "u") -> bytes:
        return json.dumps({"page": "/a", "user": user, "ts": ts, "duration_ms": 10}).encode()

    t0 = 1_767_225_600_000  # a window start
    rs = [Record("pv", 0, i, b"/a", v) for i, v in enumerate([
        view(t0 + 1), view(t0 + 2, "w"), view(t0 + WINDOW_MS + GRACE_MS),  # closes the first window
        view(t0 + 5),  # late: its window is closed
        view(t0 + WINDOW_MS + 1, "w"),
    ])]
    out = fold_input(PageStats, rs)
    assert out.rejected == {("pv", 0, 3): "late"}
    assert [w[0] for w in out.states["/a"]["open"]] == [t0 + WINDOW_MS]  # the closed one expired
    first = out.output[f"/a@{t0}"]
    assert (first["views"], first["distinct_users"], first["last_seen"]) == (2, 2, t0 + 2)
    assert out.output[f"/a@{t0 + WINDOW_MS}"]["views"] == 2
    assert lint(PageStats, rs).ok


def test_a_job_module_that_does_not_import_is_a_config_error(tmp_path) -> None:
    from streamops.exceptions import ConfigError
    from streamops.spec import AppSpec, load_job

    spec = AppSpec(name="app1", job="jobs.nope", input_topics=("in",), output_topic="o", changelog_topic="c",
                   dlq_topic="d", input_partitions=6, state_partitions=4)
    with pytest.raises(ConfigError, match=r"apps.app1.job: the job module 'jobs.nope' cannot be imported") as err:
        load_job(spec, tmp_path)
    assert err.value.exit_code == 2
