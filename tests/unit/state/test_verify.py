"""``streamops verify`` without services: categories, topic folding, checksums, GX suites, CLI."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pandas as pd
import pytest

from streamops.cli import main
from streamops.job import Job, Record, Reject, is_int, json_object
from streamops.settings import Settings
from streamops.spec import default_spec_path, get_app, load_specs
from streamops.state import quality as q
from streamops.state import verify as v
from streamops.state.check import NothingCommittedError, compare

REPO = Path(__file__).resolve().parents[3]
SUITES = q.suites_dir(REPO)


def profile(uid: str, **kw) -> dict:
    return {"user_id": uid, "last_login_ts": 1_767_225_600_000, "purchases": 1, "total_amount": 2.5,
            "events": 3, **kw}


STATE = {u: profile(u) for u in ("u1", "u2", "u3")}


def view(name: str, values: dict, **kw) -> v.ViewResult:
    return v.ViewResult(compare(name, STATE, values), v.TopicRead(name, f"{name}-topic", values, **kw))


# -- categories, frames, report --------------------------------------------------------------------
def test_clean_views_have_no_categories() -> None:
    views = [view("changelog", dict(STATE)), view("output", dict(STATE))]
    state = v.StateRead(values=STATE, rows=3)
    assert v.categorize(state, views, None) == []
    frame = v.result_frame(views)
    assert list(frame["view"]) == ["changelog", "output"]
    assert frame[["missing", "extra", "different", "undecodable"]].to_numpy().sum() == 0
    assert list(frame["state_keys"]) == [3, 3]


def test_each_fault_gets_its_category() -> None:
    changed = {**STATE, "u2": profile("u2", purchases=9)}
    deleted = {k: p for k, p in STATE.items() if k != "u3"}
    extra = {**STATE, "zz": profile("zz")}
    views = [view("changelog", changed), view("output", deleted)]
    state = v.StateRead(values=STATE, rows=3, corrupt_files=["state/0/0/3.changelog"])
    assert v.categorize(state, views, None) == ["state_checksum", "changelog.different", "output.missing"]
    assert v.categorize(v.StateRead(error="boom"), [], None) == ["state_unreadable"]
    assert v.categorize(v.StateRead(values=STATE), [view("output", extra)], None) == ["output.extra"]
    s = views[0].summary()
    assert (s["state_keys"], s["topic_keys"], s["different"], s["missing"]) == (3, 3, 1, 0)
    assert s["samples"]["different"][0]["key"] == "u2"
    assert views[1].summary()["samples"]["missing"] == ["u3"]


def test_report_text_json_and_failure() -> None:
    views = [view("changelog", dict(STATE)), view("output", {k: p for k, p in STATE.items() if k != "u1"},
                                                 records=7, tombstones=1)]
    report = v.VerifyReport("user_activity", 4, v.StateRead(values=STATE, rows=3), views, None,
                            seconds=1.5, timings={"topics": 0.5})
    assert not report.ok and report.categories == ["output.missing"]
    text = v.render(report)
    assert "FAILED (output.missing) as of batch 4" in text
    assert "missing: u1" in text and "1 tombstones" in text
    d = json.loads(json.dumps(report.to_dict(), default=str))
    assert d["ok"] is False and d["views"][1]["missing"] == 1 and d["report_html"] is None
    led = report.ledger_summary()
    assert led["views"]["output"]["missing"] == 1 and led["categories"] == ["output.missing"]
    with pytest.raises(v.VerifyFailedError, match="output.missing"):
        report.raise_if_failed()


def test_unreadable_state_report() -> None:
    report = v.VerifyReport("a", 2, v.StateRead(error="[CANNOT_LOAD_STATE_STORE.X] bad",
                                                corrupt_files=["state/0/1/3.changelog"]), [], None)
    text = v.render(report)
    assert "UNREADABLE: [CANNOT_LOAD_STATE_STORE.X] bad" in text
    assert "checksum mismatch: state/0/1/3.changelog" in text
    assert report.to_dict()["state"]["readable"] is False


def test_progress_line() -> None:
    assert v.progress_line("x:", 250, 1000, width=8) == "x: [##------]  25% 250/1,000"
    assert v.progress_line("x:", 5, None) == "x: 5"
    assert "100%" in v.progress_line("x:", 12, 10)


JAVA_TRACE = """An error occurred while calling o52.getResult.
: org.apache.spark.SparkException: Exception thrown in awaitResult:
\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:70)
Caused by: org.apache.spark.SparkException: [CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during \
loading state.  SQLSTATE: 58030
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotLoadStore(QueryExecutionErrors.scala:2846)
Caused by: java.io.IOException: Stream is corrupted
\tat net.jpountz.lz4.LZ4BlockInputStream.refill(LZ4BlockInputStream.java:250)
"""


def test_unreadable_reason_names_error_class_and_root_cause() -> None:
    reason = v.unreadable_reason(RuntimeError(JAVA_TRACE))
    assert reason.startswith("[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during loading state.")
    assert reason.endswith("(root cause: java.io.IOException: Stream is corrupted)")
    assert v.unreadable_reason(FileNotFoundError("no such dir")) == "FileNotFoundError: no such dir"


# -- reading state through the declared job -----------------------------------------------------------
def test_read_state_gives_states_and_the_emitted_rows_for_the_quality_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs.user_activity import UserActivity
    from streamops.state import store

    states = {"u1": {"last_login_ts": None, "purchases": 2, "total_cents": 1235, "events": 7},
              "u2": {"last_login_ts": 5, "purchases": 0, "total_cents": 0, "events": 1}}
    monkeypatch.setattr(store, "read_states", lambda spark, job_cls, ckpt, batch: dict(states))
    st = v.read_state(UserActivity, None, Path("/nowhere"), 3)
    assert st.readable and st.values == states and st.rows == 2
    frame = v.state_frame(st.table)
    assert list(frame.columns) == ["user_id", "last_login_ts", "purchases", "total_amount", "events"]
    assert str(frame["last_login_ts"].dtype) == "Int64"
    assert frame.set_index("user_id").loc["u1", "total_amount"] == 12.35
    assert v.emitted(UserActivity, states)["u2"] == {"user_id": "u2", "last_login_ts": 5, "purchases": 0,
                                                     "total_amount": 0.0, "events": 1}


def test_read_state_of_an_empty_store(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs.user_activity import UserActivity
    from streamops.state import store

    monkeypatch.setattr(store, "read_states", lambda *a: {})
    st = v.read_state(UserActivity, None, Path("/nowhere"), 0)
    assert st.readable and st.values == {} and st.table is None and st.rows == 0


def test_read_state_failure_is_a_result_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs.user_activity import UserActivity
    from streamops.state import store

    def broken(*a):
        raise RuntimeError(JAVA_TRACE)

    monkeypatch.setattr(store, "read_states", broken)
    st = v.read_state(UserActivity, None, Path("/nowhere"), 3)
    assert not st.readable and "Stream is corrupted" in st.error and st.values == {}


# -- output keys of jobs that expire state (the pure rule) -------------------------------------------
def page_stats_fold(events: int = 20_000, seed: int = 1):
    """page_stats folded over its own sample as the app would have: (expected, what its state emits now)."""
    from jobs.page_stats import PageStats, generate
    from streamops.job import Record
    from streamops.state.oracle import fold_input

    recs = [Record("page-views", 0, i, k, val) for i, (k, val) in enumerate(generate(events, seed=seed))]
    exp = fold_input(PageStats, recs)
    return exp, v.emitted(PageStats, exp.states)


def test_json_kinds() -> None:
    assert [v.json_kind(x) for x in (None, True, 3, 2.5, "s", [1], {"a": 1})] == \
        ["null", "boolean", "number", "number", "string", "array", "object"]


def test_output_shape_learns_what_emit_gives_and_names_what_does_not_fit() -> None:
    assert v.OutputShape.learn([]) is None
    shape = v.OutputShape.learn([{"page": "/a", "views": 2, "avg": 1.5, "end": None, "tag": "x"},
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
    assert v.OutputShape.learn([3, 4.5]).problem(7) is None  # not every output is an object


def test_split_output_of_a_windowed_job_compares_the_open_windows_and_checks_the_closed_ones() -> None:
    exp, out = page_stats_fold()
    assert exp.states and set(out) < set(exp.output)  # every page keeps its open window; most windows closed
    assert all(k.split("@")[0] in exp.states for k in out)
    split = v.split_output(out, exp.output, expires=True, shape=lambda: v.OutputShape.learn(out.values()))
    assert set(split.to_compare) == set(out) and split.to_compare == out  # the state explains its open windows
    assert split.expired == sorted(set(exp.output) - set(out)) and split.malformed == []
    assert len(split.to_compare) + len(split.expired) == len(exp.output)
    assert compare("output", out, split.to_compare).ok

    explained, closed, broken = min(out), split.expired[0], split.expired[1]
    altered = {**exp.output, explained: {**exp.output[explained], "views": exp.output[explained]["views"] + 1},
               closed: {**exp.output[closed], "views": "12"}, broken: {"undecodable": "{not js"}}
    split = v.split_output(out, altered, expires=True, shape=v.OutputShape.learn(out.values()), undecodable=[broken])
    d = compare("output", out, split.to_compare)
    assert [k for k, _e, _a in d.different] == [explained] and not d.missing and not d.extra
    assert split.malformed == sorted([(closed, "field 'views' is a JSON string, the job emits number"),
                                      (broken, "not valid JSON")])
    assert len(split.expired) == len(exp.output) - len(out) - 2


def test_split_output_learns_the_shape_only_when_something_expired() -> None:
    calls: list[int] = []

    def learn() -> v.OutputShape | None:
        calls.append(1)
        return None  # nothing to learn from

    split = v.split_output({"a": 1}, {"a": 1}, expires=True, shape=learn)
    assert (split.to_compare, split.expired, calls) == ({"a": 1}, [], [])
    split = v.split_output({"a": 1}, {"a": 1, "b": {"x": 1}, "c": [2]}, expires=True, shape=learn)
    assert (split.expired, split.malformed, split.shape, calls) == (["b", "c"], [], None, [1])  # JSON only


def test_split_output_of_a_job_without_expire_compares_every_key() -> None:
    split = v.split_output({"a": 1}, {"a": 2, "zz": 3}, expires=False, shape=lambda: pytest.fail("not learned"))
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

    pairs = v.sample_outputs(Sessions, "clicks", events=60)
    assert pairs and all(set(x) == {"user", "start", "end", "events"} for x in pairs)
    assert v.sample_outputs(SessionsOnTopics, "other", events=60) == pairs

    class NoSample(Sessions):
        generate = Job.generate

    assert v.sample_outputs(NoSample, "clicks") == []


def sessions_report(output: dict | None = None) -> v.VerifyReport:
    from streamops.state.oracle import fold_input

    records = [Record("t", 0, i, k, val) for i, (k, val) in enumerate(Sessions().generate(60, 1))]
    exp = fold_input(Sessions, records)
    out = v.emitted(Sessions, exp.states)
    assert exp.states and not out and exp.output  # the state explains nothing; sessions were emitted
    output = exp.output if output is None else output
    notes: list[str] = []
    split = v.split_job_output(Sessions, out, v.TopicRead("output", "out", output), notes)
    views = [v.ViewResult(compare("changelog", exp.states, exp.states),
                          v.TopicRead("changelog", "cl", dict(exp.states))),
             v.ViewResult(compare("output", out, split.to_compare), v.TopicRead("output", "out", output), split)]
    return v.VerifyReport("sessions", 3, v.StateRead(values=exp.states, rows=len(exp.states)), views, None, notes)


def test_a_job_whose_state_explains_no_output_says_nothing_to_compare() -> None:
    report = sessions_report()
    n = len(report.views[1].read.values)
    assert report.ok and report.output_keys == v.KeyCounts(compared=0, expired=n, malformed=0)
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
    assert report.output_keys == v.KeyCounts(compared=0, expired=len(good) - 1, malformed=1)
    text = v.render(report)
    assert "FAILED (output.malformed) as of batch 3" in text and "nothing to compare" not in report.headline()
    assert f"output keys: 0 compared, {len(good) - 1} expired (well-formed), 1 malformed" in text
    assert f"malformed: {key}  field 'events' is a JSON null, the job emits number" in text
    assert "checked for form only" in text
    s = report.to_dict()["views"][1]
    assert (s["compared"], s["expired"], s["malformed"], s["topic_keys"]) == (0, len(good) - 1, 1, len(good))
    assert s["samples"]["malformed"] == [{"key": key, "why": "field 'events' is a JSON null, the job emits number"}]
    frame = v.result_frame(report.views).set_index("view")
    assert frame.loc["output", ["compared", "expired", "malformed"]].tolist() == [0, len(good) - 1, 1]


def test_an_empty_state_says_nothing_to_compare() -> None:
    views = [v.ViewResult(compare("changelog", {}, {}), v.TopicRead("changelog", "cl", {})),
             v.ViewResult(compare("output", {}, {}), v.TopicRead("output", "out", {}), v.OutputSplit())]
    report = v.VerifyReport("a", 0, v.StateRead(), views, None)
    assert report.ok and report.headline() == \
        "verify a: OK as of batch 0, but nothing to compare: the state store at batch 0 holds no key"
    assert report.to_dict()["output_keys"] == {"compared": 0, "expired": 0, "malformed": 0, "extra": 0}


# -- checksums ------------------------------------------------------------------------------------
def write_with_crc(path: Path, data: bytes, chunk: int = 512) -> None:
    """A file plus its Hadoop ChecksumFileSystem sidecar (``.NAME.crc``: magic, chunk, CRC32s)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    sums = b"".join(struct.pack(">I", zlib.crc32(data[i:i + chunk])) for i in range(0, len(data), chunk))
    path.with_name(f".{path.name}.crc").write_bytes(b"crc\x00" + struct.pack(">i", chunk) + sums)


def test_checksum_failures_name_the_changed_file(tmp_path: Path) -> None:
    state = tmp_path / "ckpt" / "state"
    write_with_crc(state / "0" / "0" / "1.changelog", bytes(range(256)) * 5)
    write_with_crc(state / "0" / "1" / "1.changelog", b"")
    write_with_crc(state / "0" / "_metadata" / "metadata", b'{"operatorId":0}')
    assert v.checksum_failures(state) == []
    target = state / "0" / "0" / "1.changelog"
    data = bytearray(target.read_bytes())
    data[700] ^= 0xFF
    target.write_bytes(bytes(data))
    assert v.checksum_failures(state) == ["state/0/0/1.changelog"]
    target.write_bytes(bytes(data[:-1]))  # truncated: the chunk count no longer matches either
    assert v.checksum_failures(state) == ["state/0/0/1.changelog"]
    assert v.checksum_failures(tmp_path / "missing") == []


# -- topic scans (Kafka faked) ---------------------------------------------------------------------
class Msg:
    def __init__(self, key, value, batch=None):
        self._k, self._v = key, value
        self._h = None if batch is None else [("streamops.batch_id", str(batch).encode())]

    def key(self):
        return self._k

    def value(self):
        return self._v

    def headers(self):
        return self._h


def test_scan_topic_latest_per_key_as_of_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamops.kafka import admin, read
    from streamops.spark.query.records import batch_of

    msgs = [
        Msg(b"a", b'{"n": 1}', batch=1), Msg(b"b", b'{"n": 1}', batch=1), Msg(b"c", b'{"n": 1}', batch=1),
        Msg(b"a", b'{"n": 2}', batch=2), Msg(b"b", None),  # tombstone (no header: not the job's)
        Msg(b"c", b'{"n": 3}', batch=3),  # a batch after the verified one: ignored
        Msg(None, b'{"n": 9}', batch=1), Msg(b"d", b"{not json", batch=2), Msg(b"\xff", b'{"n": 5}'),
    ]
    monkeypatch.setattr(read, "read_topic", lambda bootstrap, topic, **kw: iter(msgs))
    monkeypatch.setattr(admin, "end_offsets", lambda bootstrap, topic, **kw: {0: (0, len(msgs))})
    lines: list[str] = []
    r = v.scan_topic("x:1", "t", view="changelog", max_batch=2, batch_of=batch_of, progress=lines.append)
    assert r.values == {"a": {"n": 2}, "c": {"n": 1}, "d": {"undecodable": "{not json"}, "\\xff": {"n": 5}}
    assert (r.records, r.tombstones, r.later, r.undecodable) == (9, 1, 1, ["d"])
    assert "100%" in lines[-1] and "later batches ignored" in lines[-1]
    # without a batch hook every record counts
    assert v.scan_topic("x:1", "t", view="output").values["c"] == {"n": 3}


# -- Great Expectations suites (the real files in include/expectations) -----------------------------
def good_state() -> pd.DataFrame:
    return pd.DataFrame({
        "user_id": ["u1", "u2", "u3"],
        "last_login_ts": pd.array([1_767_225_600_000, None, 1_767_225_700_000], dtype="Int64"),
        "purchases": [0, 2, 1], "total_amount": [0.0, 12.5, 0.01], "events": [1, 5, 1],
    })


@pytest.fixture(scope="module")
def gx_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, q.QualityReport]:
    """GX is slow to import: run the clean and the broken inputs once for the tests below."""
    clean_views = [view("changelog", dict(STATE)), view("output", dict(STATE))]
    bad = good_state()
    bad.loc[1, "user_id"] = "u1"  # duplicate key
    bad.loc[2, "purchases"] = -1
    bad.loc[0, "last_login_ts"] = 1_900_000_000_000  # after now_ms below
    bad.loc[0, "events"] = 0
    bad.loc[1, "purchases"] = 6  # more purchases than events
    bad_views = [view("changelog", {**STATE, "u2": profile("u2", events=4)}),
                 view("output", {k: p for k, p in STATE.items() if k != "u1"})]
    now = {"now_ms": 1_800_000_000_000}
    docs = tmp_path_factory.mktemp("gx") / "report"
    return {
        "clean": q.run_checks([q.Check("state", SUITES / "user_activity_state.json", good_state()),
                               q.Check("result", SUITES / v.RESULT_SUITE, v.result_frame(clean_views))],
                              parameters=now, docs_dir=docs, run_name="t-batch1"),
        "bad": q.run_checks([q.Check("state", SUITES / "user_activity_state.json", bad),
                             q.Check("result", SUITES / v.RESULT_SUITE, v.result_frame(bad_views))],
                            parameters=now),
    }


def test_suites_pass_on_clean_state_and_write_html(gx_runs) -> None:
    r = gx_runs["clean"]
    assert r.ok, r.summary_lines()
    assert [x.suite for x in r.results] == ["user_activity_state", "verify_result"]
    assert all(x.evaluated >= 5 and not x.failures for x in r.results)
    assert r.report_html and Path(r.report_html).is_file()
    assert all(x.page and Path(x.page).is_file() for x in r.results)
    assert "t-batch1" in r.results[0].page


def test_suites_report_each_violation_readably(gx_runs) -> None:
    r = gx_runs["bad"]
    assert not r.ok and r.report_html is None
    state, result = r.results
    failed = {(f.expectation, f.kwargs.get("column")) for f in state.failures}
    assert failed == {
        ("expect_column_values_to_be_unique", "user_id"),
        ("expect_column_values_to_be_between", "purchases"),
        ("expect_column_values_to_be_between", "events"),
        ("expect_column_values_to_be_between", "last_login_ts"),
        ("expect_column_pair_values_a_to_be_greater_than_b", None),
    }
    assert {f.kwargs["column"] for f in result.failures} == {"missing", "different"}
    text = "\n".join(r.summary_lines())
    assert "state (user_activity_state): 4/9 expectations passed" in text
    assert 'expect_column_values_to_be_between(column="purchases", min_value=0.0): 1 of 3 rows unexpected, ' \
           "e.g. [-1]" in text
    assert "1900000000000" in text  # the future last login is shown
    json.dumps(r.to_dict())  # JSON-safe (no numpy scalars)


def test_suite_file_errors(tmp_path: Path) -> None:
    from streamops.exceptions import ConfigError

    with pytest.raises(ConfigError, match="no expectation suite"):
        q.load_suite(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text('{"name": "x"}')
    with pytest.raises(ConfigError, match="expected a GX suite"):
        q.load_suite(tmp_path / "bad.json")
    assert q.load_suite(SUITES / v.RESULT_SUITE)["name"] == "verify_result"


# -- entry points -----------------------------------------------------------------------------------
def test_cli_unknown_app_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "no_such_app"]) == 2
    assert "unknown app 'no_such_app'" in capsys.readouterr().err


def test_cli_missing_app_argument_exits_2() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["verify"])
    assert exc.value.code == 2


def test_verify_needs_a_committed_batch(tmp_path: Path) -> None:
    settings = Settings(repo=REPO, home=tmp_path)
    spec = get_app(load_specs(default_spec_path(REPO)), "user_activity")
    with pytest.raises(NothingCommittedError, match="no committed batch"):
        v.verify(spec, settings, record=False)


@pytest.mark.parametrize("raw", [
    b'{"a":1}', b' {"a": 1} ', b'{"a":1}x', b"[1,2]", b"nul", b"", b"\xff", b'{"a":NaN}',
    '{"é":"ü"}'.encode(), b'\xef\xbb\xbf{"a":1}', '{"a":1}'.encode("utf-16"),
])
def test_decode_json_agrees_with_json_loads(raw: bytes) -> None:
    def outcome(f):
        try:
            return repr(f(raw))
        except ValueError as exc:
            return type(exc).__name__

    assert outcome(v.decode_json) == outcome(json.loads)


def test_report_folders_are_pruned_to_the_newest(tmp_path) -> None:
    from streamops.settings import Settings
    from streamops.state import verify as v

    settings = Settings(home=tmp_path)
    root = settings.state_dir / "reports" / "verify" / "app"
    for i in range(v.REPORTS_KEPT + 5):
        (root / f"20260101T0000{i:02d}.000000Z-batch{i}").mkdir(parents=True)
    new = v._report_dir(settings, "app", 99)
    new.mkdir()
    kept = sorted(p.name for p in root.iterdir())
    assert len(kept) == v.REPORTS_KEPT and kept[-1] == new.name
    assert kept[0].endswith(f"-batch{6}")  # the 6 oldest went


def test_the_sessions_output_suite_judges_closed_sessions() -> None:
    """A job that writes windows only once they close: verify's output suite takes its output
    records (no state explains them), here the fold's output of the sessions sample."""
    import pyarrow as pa

    from jobs.sessions import Sessions, generate
    from streamops.state.lint import sample_records
    from streamops.state.oracle import fold_input

    out = fold_input(Sessions, sample_records(Sessions, "clicks", 3, generate(400, seed=5, users=12,
                                                                              step_ms=20_000))).output
    frame = v.state_frame(pa.Table.from_pylist(list(out.values())))
    bad = frame.copy()
    bad.loc[0, "pages"] = bad.loc[0, "clicks"] + 1  # more distinct pages than clicks
    bad.loc[1, "end"] = bad.loc[1, "start"]
    now = {"now_ms": 1_800_000_000_000}
    (clean,) = q.run_checks([q.Check("output", SUITES / "sessions_output.json", frame)], parameters=now).results
    (broken,) = q.run_checks([q.Check("output", SUITES / "sessions_output.json", bad)], parameters=now).results
    assert len(frame) > 5 and not clean.failures and clean.evaluated == 7
    assert {f.expectation for f in broken.failures} == {"expect_column_pair_values_a_to_be_greater_than_b"}
    assert len(broken.failures) == 2
