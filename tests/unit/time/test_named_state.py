"""Named state (``streamops.named_state``): what is written for a change, the changelog's parts
and their reassembly, the TTL as a timer, and the declaration's errors."""

from __future__ import annotations

import json

import pytest

from jobs.recent_pages import TTL_MS, RecentPages, generate
from streamops import named_state as ns
from streamops.job import Job, JobDeclarationError, validate_job
from streamops.spark.query.named import NamedStore
from streamops.state.lint import sample_records
from streamops.state.oracle import fold_input
from tests.fixtures.named_jobs import BlobRecentPages
from tests.fixtures.tws_state import Handle, KeyState

pytestmark = pytest.mark.unit

VALUES = {"v": ns.Value(), "l": ns.ListOf(), "m": ns.MapOf()}


def state(v=None, lst=(), m=None) -> dict:
    return {"v": v, "l": list(lst), "m": dict(m or {})}


@pytest.mark.parametrize(("old", "new", "writes"), [
    (None, state(), []),  # nothing stored, nothing to store
    (state(1, [1], {"a": 1}), state(1, [1], {"a": 1}), []),
    (None, state(1), [("v", "set", None, 1)]),
    (state(1), state(2), [("v", "set", None, 2)]),
    (state(1), state(), [("v", "clear", None, None)]),
    (state(lst=[1, 2]), state(lst=[1, 2, 3, 4]), [("l", "append", None, [3, 4])]),  # only the tail
    (state(lst=[1, 2]), state(lst=[0, 1, 2]), [("l", "set", None, [0, 1, 2])]),  # the head changed
    (state(lst=[1, 2]), state(lst=[1]), [("l", "set", None, [1])]),
    (state(lst=[1, 2]), state(), [("l", "clear", None, None)]),
    (state(m={"a": 1, "b": 2}), state(m={"a": 1, "b": 3, "c": 4}), [("m", "put", "b", 3), ("m", "put", "c", 4)]),
    (state(m={"a": 1, "b": 2}), state(m={"b": 2}), [("m", "remove", "a", None)]),
    (state(1, [1], {"a": 1}), None, [("v", "clear", None, None), ("l", "clear", None, None), ("m", "remove", "a", None)]),
])
def test_only_what_changed_is_written(old, new, writes) -> None:
    assert [(c.name, c.op, c.entry, c.value) for c in ns.changes(VALUES, old, new)] == writes


def test_the_changelog_parts_put_every_state_back_together() -> None:
    """Each step's changelog records, applied to a compacted topic (latest per Kafka key), give
    the state of every key at every step; a deleted key leaves tombstones only."""
    steps = [("k1", state(1, [1], {"a": 1})), ("k2", state(lst=["x"])), ("k1", state(2, [1, 2], {"b": 2})),
             ("k2", None), ("k1", state(m={"b": 3})), ("k3", state(v={"nested": [1]}))]
    topic: dict[str, bytes | None] = {}
    now: dict[str, dict] = {}
    for key, new in steps:
        done = ns.changes(VALUES, now.get(key), new)
        for ckey, value in ns.changelog_records(VALUES, key, new, done):
            topic[ckey] = value
            assert json.loads(ckey)[:2] == [key, json.loads(ckey)[1]]
        if new is None:
            now.pop(key, None)
        else:
            now[key] = new
        assert ns.assemble(VALUES, topic) == now
    assert all(v is None for k, v in topic.items() if json.loads(k)[0] == "k2")


def test_the_store_holds_the_parts_and_one_timer() -> None:
    """``NamedStore`` (what Spark's processor runs) over the stand-in state API: the map entry that
    changed is the one write; the next timer is the only one registered."""
    ks = KeyState()
    handle = Handle().bind(ks)
    job = RecentPages()
    store = NamedStore(RecentPages, handle.variables(RecentPages.state_values), handle, 0)
    assert store.load() is None
    rows: list = []
    store.save("u1", {"pages": {f"/p{i}": 1_000 + i for i in range(50)}, "visits": 50}, rows)
    store.set_timer(1_000 + TTL_MS + 1, None)
    assert ks.writes == 51 and ks.timers == {1_000 + TTL_MS + 1}
    assert len(rows) == 51 and {r[0] for r in rows} == {"changelog"}
    loaded = store.load()
    loaded = job.update("u1", loaded, [{"user": "u1", "page": "/p7", "ts": 5_000}])
    rows = []
    store.save("u1", loaded, rows)
    assert ks.writes == 51 + 2  # the page's entry and the visits, not the other 49 pages
    assert [json.loads(r[1]) for r in rows] == [["u1", "pages", "/p7"], ["u1", "visits"]]
    store.set_timer(2_000 + TTL_MS, None)
    assert ks.timers == {2_000 + TTL_MS}
    with pytest.raises(ns.StateShapeError, match="pages"):
        store.save("u1", {"visits": 3}, [])


def test_the_ttl_drops_pages_an_hour_of_stream_time_old_also_for_users_who_went_quiet() -> None:
    records = sample_records(RecentPages, "page-visits", 3, generate(3000, seed=2, users=30, pages=80,
                                                                            step_ms=5_000))
    named = fold_input(RecentPages, records)
    by_hand = fold_input(BlobRecentPages, records)  # the same TTL written as a timer over one blob
    assert named.output == by_hand.output and named.states == by_hand.states
    visited: dict[str, set] = {}
    for r in records:
        ev = RecentPages().parse(r)
        if isinstance(ev, dict):
            visited.setdefault(ev["user"], set()).add(ev["page"])
    dropped = {u: len(visited[u]) - len(s["pages"]) for u, s in named.states.items()}
    assert sum(dropped.values()) > 100
    quiet = [u for u, s in named.states.items() if not s["pages"]]  # users who stopped half way
    assert quiet and all(named.output[u]["recent_pages"] == 0 for u in quiet)
    clocks: dict = {}
    for r in records:
        ev = RecentPages().parse(r)
        if isinstance(ev, dict):
            clocks[r.partition] = max(clocks.get(r.partition, 0), ev["ts"])
    wm = min(clocks.values())  # the watermark at the end: every TTL timer up to it has fired
    for s in named.states.values():
        assert all(ts + TTL_MS >= wm for ts in s["pages"].values())
    assert any(ts + TTL_MS < wm + 10 * 60_000 for s in named.states.values() for ts in s["pages"].values())


class _Base(Job):
    key_name = "user"

    def parse(self, record):
        return json.loads(record.value)

    def key(self, event) -> str:
        return event["user"]

    def update(self, key, state, events):
        return state


@pytest.mark.parametrize(("attrs", "error"), [
    ({"state_values": {}}, "non-empty mapping"),
    ({"state_values": {"a": dict}}, "Value\\(\\)/ListOf\\(\\)/MapOf\\(\\)"),
    ({"state_values": {"not ok": ns.Value()}}, "identifiers"),
    ({"state_values": {"m": ns.MapOf(ttl_ms=10, time=lambda e, v: v)}}, "no stream time"),
    ({"state_values": {"m": ns.MapOf(ttl_ms=10)}, "grace_ms": 0}, "time\\(entry, value\\)"),
    ({"state_values": {"m": ns.MapOf(time=lambda e, v: v)}}, "time without ttl_ms"),
])
def test_a_bad_declaration_is_named_at_load(attrs: dict, error: str) -> None:
    job = type("J", (_Base,), dict(attrs))
    with pytest.raises(JobDeclarationError, match=error):
        validate_job(job)


def test_a_named_state_job_needs_no_initial_and_keeps_json() -> None:
    job = type("J", (_Base,), {"state_values": {"a": ns.Value(), "b": ns.MapOf()}})
    assert validate_job(job) is job and job().initial("k") == {"a": None, "b": {}}
    from streamops.job import Serde

    class Pickled(Serde):
        def dumps(self, value):
            return b""

        def loads(self, data):
            return None

    with pytest.raises(JobDeclarationError, match="drop state_serde"):
        validate_job(type("K", (job,), {"state_serde": Pickled()}))
