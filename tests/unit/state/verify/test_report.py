"""``streamops verify``'s report: categories, the result frame, the text, JSON and ledger summary,
and "nothing to compare" when the state explains no output key."""

from __future__ import annotations

import json

import pytest

from streamops.job import Record
from streamops.state.check import compare
from streamops.state.verify.expectations import result_frame
from streamops.state.verify.outputs import OutputSplit, emitted, split_job_output
from streamops.state.verify.report import (
    KeyCounts,
    VerifyFailedError,
    VerifyReport,
    ViewResult,
    categorize,
    render,
)
from streamops.state.verify.state_read import StateRead
from streamops.state.verify.topics import TopicRead
from tests.unit.state.verify.test_outputs import Sessions


def profile(uid: str, **kw) -> dict:
    return {"user_id": uid, "last_login_ts": 1_767_225_600_000, "purchases": 1, "total_amount": 2.5,
            "events": 3, **kw}


STATE = {u: profile(u) for u in ("u1", "u2", "u3")}


def view(name: str, values: dict, **kw) -> ViewResult:
    return ViewResult(compare(name, STATE, values), TopicRead(name, f"{name}-topic", values, **kw))


# -- categories, frames, report --------------------------------------------------------------------
def test_clean_views_have_no_categories() -> None:
    views = [view("changelog", dict(STATE)), view("output", dict(STATE))]
    state = StateRead(values=STATE, rows=3)
    assert categorize(state, views, None) == []
    frame = result_frame(views)
    assert list(frame["view"]) == ["changelog", "output"]
    assert frame[["missing", "extra", "different", "undecodable"]].to_numpy().sum() == 0
    assert list(frame["state_keys"]) == [3, 3]


def test_each_fault_gets_its_category() -> None:
    changed = {**STATE, "u2": profile("u2", purchases=9)}
    deleted = {k: p for k, p in STATE.items() if k != "u3"}
    extra = {**STATE, "zz": profile("zz")}
    views = [view("changelog", changed), view("output", deleted)]
    state = StateRead(values=STATE, rows=3, corrupt_files=["state/0/0/3.changelog"])
    assert categorize(state, views, None) == ["state_checksum", "changelog.different", "output.missing"]
    assert categorize(StateRead(error="boom"), [], None) == ["state_unreadable"]
    assert categorize(StateRead(values=STATE), [view("output", extra)], None) == ["output.extra"]
    s = views[0].summary()
    assert (s["state_keys"], s["topic_keys"], s["different"], s["missing"]) == (3, 3, 1, 0)
    assert s["samples"]["different"][0]["key"] == "u2"
    assert views[1].summary()["samples"]["missing"] == ["u3"]


def test_report_text_json_and_failure() -> None:
    views = [view("changelog", dict(STATE)), view("output", {k: p for k, p in STATE.items() if k != "u1"},
                                                 records=7, tombstones=1)]
    report = VerifyReport("user_activity", 4, StateRead(values=STATE, rows=3), views, None,
                            seconds=1.5, timings={"topics": 0.5})
    assert not report.ok and report.categories == ["output.missing"]
    text = render(report)
    assert "FAILED (output.missing) as of batch 4" in text
    assert "missing: u1" in text and "1 tombstones" in text
    d = json.loads(json.dumps(report.to_dict(), default=str))
    assert d["ok"] is False and d["views"][1]["missing"] == 1 and d["report_html"] is None
    led = report.ledger_summary()
    assert led["views"]["output"]["missing"] == 1 and led["categories"] == ["output.missing"]
    with pytest.raises(VerifyFailedError, match="output.missing"):
        report.raise_if_failed()


def test_unreadable_state_report() -> None:
    report = VerifyReport("a", 2, StateRead(error="[CANNOT_LOAD_STATE_STORE.X] bad",
                                                corrupt_files=["state/0/1/3.changelog"]), [], None)
    text = render(report)
    assert "UNREADABLE: [CANNOT_LOAD_STATE_STORE.X] bad" in text
    assert "checksum mismatch: state/0/1/3.changelog" in text
    assert report.to_dict()["state"]["readable"] is False


def sessions_report(output: dict | None = None) -> VerifyReport:
    from streamops.state.oracle import fold_input

    records = [Record("t", 0, i, k, val) for i, (k, val) in enumerate(Sessions().generate(60, 1))]
    exp = fold_input(Sessions, records)
    out = emitted(Sessions, exp.states)
    assert exp.states and not out and exp.output  # the state explains nothing; sessions were emitted
    output = exp.output if output is None else output
    notes: list[str] = []
    split = split_job_output(Sessions, out, TopicRead("output", "out", output), notes)
    views = [ViewResult(compare("changelog", exp.states, exp.states),
                          TopicRead("changelog", "cl", dict(exp.states))),
             ViewResult(compare("output", out, split.to_compare), TopicRead("output", "out", output), split)]
    return VerifyReport("sessions", 3, StateRead(values=exp.states, rows=len(exp.states)), views, None, notes)


def test_a_job_whose_state_explains_no_output_says_nothing_to_compare() -> None:
    report = sessions_report()
    n = len(report.views[1].read.values)
    assert report.ok and report.output_keys == KeyCounts(compared=0, expired=n, malformed=0)
    assert report.views[1].split.shape.learned_from > 0  # from the job's own sample: the state emits nothing
    why = f"the state store's 3 keys emit no output key; output keys: 0 compared, {n} expired (well-formed), 0 malformed"
    assert report.nothing_to_compare == why
    assert report.headline() == f"verify sessions: OK as of batch 3, but nothing to compare: {why}"
    d = json.loads(json.dumps(report.to_dict()))
    assert d["nothing_to_compare"] == why and d["output_keys"] == {"compared": 0, "expired": n, "malformed": 0,
                                                                  "extra": 0}
    assert report.ledger_summary()["nothing_to_compare"] == why


def test_a_malformed_expired_record_fails_and_is_named() -> None:
    good = sessions_report().views[1].read.values
    key = sorted(good)[1]
    report = sessions_report({**good, key: {**good[key], "events": None}})
    assert not report.ok and report.categories == ["output.malformed"]
    assert report.output_keys == KeyCounts(compared=0, expired=len(good) - 1, malformed=1)
    text = render(report)
    assert "FAILED (output.malformed) as of batch 3" in text and "nothing to compare" not in report.headline()
    assert f"output keys: 0 compared, {len(good) - 1} expired (well-formed), 1 malformed" in text
    assert f"malformed: {key}  field 'events' is a JSON null, the job emits number" in text
    assert "checked for form only" in text
    s = report.to_dict()["views"][1]
    assert (s["compared"], s["expired"], s["malformed"], s["topic_keys"]) == (0, len(good) - 1, 1, len(good))
    assert s["samples"]["malformed"] == [{"key": key, "why": "field 'events' is a JSON null, the job emits number"}]
    frame = result_frame(report.views).set_index("view")
    assert frame.loc["output", ["compared", "expired", "malformed"]].tolist() == [0, len(good) - 1, 1]


def test_an_empty_state_says_nothing_to_compare() -> None:
    views = [ViewResult(compare("changelog", {}, {}), TopicRead("changelog", "cl", {})),
             ViewResult(compare("output", {}, {}), TopicRead("output", "out", {}), OutputSplit())]
    report = VerifyReport("a", 0, StateRead(), views, None)
    assert report.ok and report.headline() == \
        "verify a: OK as of batch 0, but nothing to compare: the state store at batch 0 holds no key"
    assert report.to_dict()["output_keys"] == {"compared": 0, "expired": 0, "malformed": 0, "extra": 0}
