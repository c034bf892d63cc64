"""``observe.events`` (what the output asset's watcher announces) and the DLQ asset's watcher:
batches by commit time, a cursor that survives a restart and a rewind, one event per new DLQ
records."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from streamops.app.dir import AppDir
from streamops.observe import dlq, events
from streamops.settings import Settings

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def progress(settings: Settings, batch: int, at: datetime, rows: int) -> None:
    AppDir.of(settings, "app1").append_progress({
        "batch_id": batch, "timestamp": at.isoformat().replace("+00:00", "Z"), "input_rows": rows,
        "end_offsets": [json.dumps({"in": {"0": batch * 10}})], "start_offsets": ["null"],
        "latest_offsets": [json.dumps({"in": {"0": batch * 10}})]})


def ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def test_the_batches_after_the_cursor_and_the_cursor_moves(tmp_path) -> None:
    s = Settings(home=tmp_path)
    assert events.start_cursor(s, "app1") is None and events.committed_after(s, "app1", None) is None
    for b in range(3):
        progress(s, b, T0 + timedelta(seconds=2 * b), rows=10 + b)
    # a watcher that starts now announces only what commits after its start
    start = events.start_cursor(s, "app1")
    assert start == ms(T0 + timedelta(seconds=4)) and events.committed_after(s, "app1", start) is None
    progress(s, 3, T0 + timedelta(seconds=6), rows=7)
    progress(s, 4, T0 + timedelta(seconds=8), rows=5)
    got = events.committed_after(s, "app1", start)
    assert got.to_dict() == {"app": "app1", "first_batch": 3, "last_batch": 4, "batches": 2, "input_records": 12,
                             "after_ms": start, "committed_at_ms": ms(T0 + timedelta(seconds=8))}
    events.announced(s, got)
    assert events.cursor(s, "app1") == events.start_cursor(s, "app1") == ms(T0 + timedelta(seconds=8))
    assert events.committed_after(s, "app1", events.cursor(s, "app1")) is None


def test_a_rewind_is_announced_by_commit_time(tmp_path) -> None:
    """A restore takes the batch ids back: the batches after it are news, though their ids are not higher."""
    s = Settings(home=tmp_path)
    for b in range(5):
        progress(s, b, T0 + timedelta(seconds=b), rows=1)
    events.announced(s, events.committed_after(s, "app1", None))
    progress(s, 2, T0 + timedelta(seconds=60), rows=3)  # restored to batch 1: batch 2 runs again
    got = events.committed_after(s, "app1", events.cursor(s, "app1"))
    assert (got.first_batch, got.last_batch, got.batches, got.input_records) == (2, 2, 1, 3)


def test_the_batch_trigger_fires_once_per_interval_with_every_batch_since(tmp_path, monkeypatch) -> None:
    """``BatchCommitTrigger`` in an event loop, on a spec file with ``events.batch_every_s``."""
    pytest.importorskip("airflow")
    from streamops_airflow.triggers import BatchCommitTrigger

    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "streams.yaml").write_text(
        "apps:\n  app1:\n    job: jobs.orders\n    input_topics: [in]\n    output_topic: out\n"
        "    events: {batch_every_s: 1}\n")
    monkeypatch.setenv("STREAMOPS_REPO", str(tmp_path))
    monkeypatch.setenv("STREAMOPS_HOME", str(tmp_path / "home"))
    s = Settings.from_env()
    progress(s, 0, T0, rows=4)
    events.announced(s, events.committed_after(s, "app1", None))  # batch 0: announced before

    async def watch() -> list[dict]:
        got: list[dict] = []
        run = BatchCommitTrigger(app="app1", poll_interval=0.05).run()
        for b in (1, 2, 3):
            progress(s, b, T0 + timedelta(seconds=b), rows=b)
        got.append((await anext(run)).payload)
        progress(s, 4, T0 + timedelta(seconds=4), rows=40)
        t = asyncio.get_running_loop().time()
        got.append((await anext(run)).payload)
        got.append(round(asyncio.get_running_loop().time() - t, 1))
        await run.aclose()
        return got

    first, second, waited = asyncio.run(watch())
    # 1-3 in one event; 4 in the next, a second later
    assert (first["first_batch"], first["last_batch"], first["input_records"]) == (1, 3, 6)
    assert (second["first_batch"], second["last_batch"], second["input_records"]) == (4, 4, 40)
    assert waited >= 0.9
    assert events.cursor(s, "app1") == ms(T0 + timedelta(seconds=3))  # the cursor moves after each event


def _dlq_events(n: int) -> list[dict]:
    """The first ``n`` events' payloads of app1's ``DlqRecordsTrigger``, polling every 10 ms."""
    from streamops_airflow.triggers import DlqRecordsTrigger

    async def watch() -> list[dict]:
        run = DlqRecordsTrigger(app="app1", poll_interval=0.01, every_s=0).run()
        got = [(await anext(run)).payload for _ in range(n)]
        await run.aclose()
        return got

    return asyncio.run(watch())


def test_the_dlq_trigger_fires_for_records_beyond_those_it_fired_for(monkeypatch) -> None:
    """``DlqRecordsTrigger`` over a scripted ``new_records`` (the topic's end offsets against the
    digest's cursor): once per new records, again only for records beyond, and after a digest."""
    pytest.importorskip("airflow")

    polls = iter([None, *(dlq.DlqNews("app1", "d", n, {"0": n}) for n in (3, 3, 5)), None,
                  dlq.DlqNews("app1", "d", 6, {"0": 6})])
    monkeypatch.setattr(dlq, "new_records", lambda _s, _spec: next(polls))

    # 3 records: one event; the same 3 again: none; 5: one; a digest counted them (None); 6: one
    got = _dlq_events(3)
    assert [e["ends"]["0"] for e in got] == [3, 5, 6]
    assert got[0] == {"app": "app1", "topic": "d", "records": 3, "ends": {"0": 3}}  # the event: the news' document


def test_the_dlq_trigger_reads_the_spec_file_only_when_it_changed(tmp_path, monkeypatch) -> None:
    """Each app's DLQ watcher polls every 2 s for as long as Airflow runs: parsing the spec file on
    every poll made each poll cost 28.6 ms of the triggerer's CPU instead of 3.7 (bench/dlq_poll.py).
    It parses it once, and again only after the file changed (a renamed DLQ topic is then the one
    it asks about)."""
    pytest.importorskip("airflow")

    import streamops.kafka.admin
    import streamops.specfile

    spec_path = tmp_path / "include" / "streams.yaml"
    spec_path.parent.mkdir()
    spec = "apps:\n  app1:\n    job: jobs.orders\n    input_topics: [in]\n    output_topic: out\n    dlq_topic: {}\n"
    spec_path.write_text(spec.format("dead-1"))
    monkeypatch.setenv("STREAMOPS_REPO", str(tmp_path))
    monkeypatch.setenv("STREAMOPS_HOME", str(tmp_path / "home"))
    parsed: list[str] = []
    parse = streamops.specfile.parse_specs
    monkeypatch.setattr(streamops.specfile, "parse_specs", lambda text, path: parsed.append(text) or parse(text, path))
    asked: list[str] = []

    def end_offsets(_kafka, topic: str, **_kw) -> dict[int, tuple[int, int]]:
        asked.append(topic)
        if len(asked) == 4:  # the file changes between two polls
            spec_path.write_text(spec.format("dead-2"))
        return {0: (0, len(asked))}

    monkeypatch.setattr(streamops.kafka.admin, "end_offsets", end_offsets)

    got = _dlq_events(7)
    assert [e["topic"] for e in got] == ["dead-1"] * 4 + ["dead-2"] * 3
    assert asked == ["dead-1"] * 4 + ["dead-2"] * 3
    assert len(parsed) == 2 and "dead-2" in parsed[1]  # once at the start, once after the change
