"""``streamops verify``'s output keys of jobs that expire state (the pure rule): the output shape,
the split into compared, expired and malformed keys, the job's own sample."""

from __future__ import annotations

import json

import pytest

from streamops.job import Job, Record, Reject, is_int, json_object
from streamops.state.check import compare
from streamops.state.verify.outputs import OutputShape, emitted, json_kind, sample_outputs, split_output


# -- output keys of jobs that expire state (the pure rule) -------------------------------------------
def page_stats_fold(events: int = 20_000, seed: int = 1):
    """page_stats folded over its own sample as the app would have: (expected, what its state emits now)."""
    from jobs.page_stats import PageStats, generate
    from streamops.job import Record
    from streamops.state.oracle import fold_input

    recs = [Record("page-views", 0, i, k, val) for i, (k, val) in enumerate(generate(events, seed=seed))]
    exp = fold_input(PageStats, recs)
    return exp, emitted(PageStats, exp.states)


def test_json_kinds() -> None:
    assert [json_kind(x) for x in (None, True, 3, 2.5, "s", [1], {"a": 1})] == \
        ["null", "boolean", "number", "number", "string", "array", "object"]


def test_output_shape_learns_what_emit_gives_and_names_what_does_not_fit() -> None:
    assert OutputShape.learn([]) is None
    shape = OutputShape.learn([{"page": "/a", "views": 2, "avg": 1.5, "end": None, "tag": "x"},
                                 {"page": "/b", "views": 1, "avg": 2, "end": None}])
    assert shape is not None and shape.learned_from == 2 and shape.required == {"page", "views", "avg", "end"}
    assert shape.problem({"page": "/c", "views": 9, "avg": 3.0, "end": None}) is None
    assert shape.problem({"page": "/c", "views": 9, "avg": 3, "end": 1_767_225_600_000, "tag": "y"}) is None  # null-only field
    assert shape.problem({"page": "/c", "views": "many", "avg": 1, "end": None}) == \
        "field 'views' is a JSON string, the job emits number"
    assert shape.problem({"page": "/c", "avg": 1, "end": None}) == "no field 'views'"
    assert shape.problem({"page": "/c", "views": 1, "avg": 1, "end": None, "x": 0}) == \
        "field 'x', which the job does not emit"
    assert shape.problem({"page": "/c", "views": True, "avg": 1, "end": None}) == \
        "field 'views' is a JSON boolean, the job emits number"
    assert shape.problem([1, 2]) == "a JSON array, the job emits object"
    assert OutputShape.learn([3, 4.5]).problem(7) is None  # not every output is an object


def test_split_output_of_a_windowed_job_compares_the_open_windows_and_checks_the_closed_ones() -> None:
    exp, out = page_stats_fold()
    assert exp.states and set(out) < set(exp.output)  # every page keeps its open window; most windows closed
    assert all(k.split("@")[0] in exp.states for k in out)
    split = split_output(out, exp.output, expires=True, shape=lambda: OutputShape.learn(out.values()))
    assert set(split.to_compare) == set(out) and split.to_compare == out  # the state explains its open windows
    assert split.expired == sorted(set(exp.output) - set(out)) and split.malformed == []
    assert len(split.to_compare) + len(split.expired) == len(exp.output)
    assert compare("output", out, split.to_compare).ok

    explained, closed, broken = min(out), split.expired[0], split.expired[1]
    altered = {**exp.output, explained: {**exp.output[explained], "views": exp.output[explained]["views"] + 1},
               closed: {**exp.output[closed], "views": "12"}, broken: {"undecodable": "{not js"}}
    split = split_output(out, altered, expires=True, shape=OutputShape.learn(out.values()), undecodable=[broken])
    d = compare("output", out, split.to_compare)
    assert [k for k, _e, _a in d.different] == [explained] and not d.missing and not d.extra
    assert split.malformed == sorted([(closed, "field 'views' is a JSON string, the job emits number"),
                                      (broken, "not valid JSON")])
    assert len(split.expired) == len(exp.output) - len(out) - 2


def test_split_output_learns_the_shape_only_when_something_expired() -> None:
    calls: list[int] = []

    def learn() -> OutputShape | None:
        calls.append(1)
        return None  # nothing to learn from

    split = split_output({"a": 1}, {"a": 1}, expires=True, shape=learn)
    assert (split.to_compare, split.expired, calls) == ({"a": 1}, [], [])
    split = split_output({"a": 1}, {"a": 1, "b": {"x": 1}, "c": [2]}, expires=True, shape=learn)
    assert (split.expired, split.malformed, split.shape, calls) == (["b", "c"], [], None, [1])  # JSON only


def test_split_output_of_a_job_without_expire_compares_every_key() -> None:
    split = split_output({"a": 1}, {"a": 2, "zz": 3}, expires=False, shape=lambda: pytest.fail("not learned"))
    assert split.to_compare == {"a": 2, "zz": 3} and split.expired == split.malformed == []
    d = compare("output", {"a": 1}, split.to_compare)
    assert (d.extra, [k for k, *_ in d.different]) == (["zz"], ["a"])


class Sessions(Job):
    """A job whose state explains none of its output: a session is emitted once it has ended (a
    gap of ``GAP`` ms before the user's next event) and then forgotten."""

    key_name = "user"
    GAP = 1_000

    def parse(self, record: Record):
        obj = json_object(record.value)
        return obj if isinstance(obj, Reject) or is_int(obj.get("ts"), 0, 2**53) else Reject("bad_ts")

    def key(self, event) -> str:
        return event["user"]

    def initial(self, key: str):
        return {"open": None, "ended": []}

    def update(self, key: str, state, events):
        s = {"open": state["open"], "ended": list(state["ended"])}
        for e in events:
            if s["open"] is not None and e["ts"] - s["open"]["last"] > self.GAP:
                s["ended"].append(s["open"])
                s["open"] = None
            o = s["open"] or {"start": e["ts"], "last": e["ts"], "events": 0}
            s["open"] = {**o, "last": e["ts"], "events": o["events"] + 1}
        return s

    def emit(self, key: str, state):
        return {f"{key}@{x['start']}": {"user": key, "start": x["start"], "end": x["last"], "events": x["events"]}
                for x in state["ended"]}

    def expire(self, key: str, state):
        return {"open": state["open"], "ended": []}

    def generate(self, events: int, seed: int):
        for i in range(events):
            user = f"u{i % 3}"
            yield user.encode(), json.dumps({"user": user, "ts": i * 400 + (i // 12) * 5_000}).encode()


def test_sample_outputs_take_pairs_and_topic_triples() -> None:
    class SessionsOnTopics(Sessions):
        def generate(self, events: int, seed: int):
            return (("clicks", k, val) for k, val in super().generate(events, seed))

    pairs = sample_outputs(Sessions, "clicks", events=60)
    assert pairs and all(set(x) == {"user", "start", "end", "events"} for x in pairs)
    assert sample_outputs(SessionsOnTopics, "other", events=60) == pairs

    class NoSample(Sessions):
        generate = Job.generate

    assert sample_outputs(NoSample, "clicks") == []
