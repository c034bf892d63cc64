"""Apps other than the demo, end to end on real Kafka protocol + Spark. Each is only a spec entry
plus a job file (``page_stats``: event-time windows, exact distinct users, late views screened;
``orders``: dedup by order id, then aggregate; ``sessions`` and ``enriched_orders``: stream time and
timers; ``recent_pages``: named state, a map with a TTL, stored part by part). Every operation runs on each, through the CLI or
(verify, compaction, rebuild-state: each CLI form is tested on the demo app) the core function the
CLI calls, and after every step ``check`` (the job's own update folded in plain Python) is exact: verify and
the three faults it must find, kill -9 mid-batch, savepoint and restore, compaction,
rebuild-state into other state partitions, reset (its dry run on each; the reset and its undo where
``RESET_HERE`` says), reprocess into a new output version and promote. (Deploy, live and restart resize and the Airflow DAGs take any app by name; they are
exercised on the demo app in test_resize, test_supervisor and test_airflow_*.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamops.checkpoints import compact as cc
from streamops.checkpoints import layout
from streamops.job import JsonSerde
from streamops.kafka.read import latest_per_key, read_topic
from streamops.named_state import decode_changelog
from streamops.spark.query.records import dlq_entry
from streamops.spec import default_spec_path, get_app, load_job, load_specs
from streamops.state.oracle import fold_input, record_of

LOCAL = "local[2]"
JSON = JsonSerde()
#: app -> (events per produce, a DLQ reason its sample must contain besides the parse ones)
APPS = {"page_stats": (5000, "late"), "orders": (5000, "late"), "sessions": (5000, "late"),
        "enriched_orders": (5000, "late"), "recent_pages": (5000, "late")}
#: extended (``make test-all``): sessions and enriched_orders are stream-time apps as recent_pages
#: is (its TTL runs on stream time, with named state); in ``make test`` their timers, resize, reset
#: to a datetime, join and a kill -9 of sessions are test_time_apps'
EXTENDED = {"sessions", "enriched_orders"}
#: the apps whose reset (recompute, undo) runs here: a reset is the same steps whatever the job
#: (test_reset and test_crash_safety run them on user_activity), and what the job adds, its
#: recompute from the earliest offsets, is the reprocess below; enriched_orders is reset to a
#: datetime in test_time_apps
RESET_HERE = {"recent_pages"}


def _corrupt(name: str, state: dict) -> dict:
    """Another state of the same shape (verify must find it different)."""
    if name == "orders":
        return {**state, "max_ts": (state["max_ts"] or 0) + 1}
    if name == "enriched_orders":  # another price in force
        ts, price = state["table"]
        return {**state, "table": [ts, {**price, "price_cents": price["price_cents"] + 1}]}
    start, end, acc = state["open"][0]  # windowed jobs: one more event in the first open window
    acc = [acc[0] + 1, acc[1]] if name == "sessions" else {**acc, "views": acc["views"] + 1}
    return {**state, "open": [[start, end, acc], *state["open"][1:]]}


def _json(r) -> dict:
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return json.loads(r.stdout)


def _exact(app, input_records: int | None = None) -> dict:
    report = app.check()
    views = {v["view"]: v for v in report["views"]}
    assert report["ok"], json.dumps(views, indent=1)[:3000]
    if input_records is not None:
        assert report["input_records"] == input_records
    for v in views.values():
        assert (v["missing"], v["extra"], v["different"], v["duplicates"]) == (0, 0, 0, 0), v
    return views


def _verify(app) -> dict:
    """What `streamops verify APP` runs, in this process on the session's Spark (a JVM start saved)."""
    from streamops.app.outputs import load_live_spec
    from streamops.state.verify.run import verify

    return verify(load_live_spec(app.settings, app.app), app.settings, app.kafka, spark=app.spark,
                  html=False).to_dict()


def _maintenance(app, operation: str, **kwargs) -> Any:
    """What `streamops rebuild-state` / `compact` run, in this process on the session's Spark
    (their CLI forms are test_maintenance's): a ``RebuildResult`` / ``CompactResult``."""
    from streamops.app.context import open_app
    from streamops.lifecycle import maintenance

    with open_app(app.settings, app.app) as ctx:
        return getattr(maintenance, operation)(ctx, spark=app.spark, **kwargs)


def _produce_record(app, topic: str, key: str, value: bytes | None) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": app.settings.kafka_bootstrap})
    p.produce(topic, key=key.encode(), value=value)
    assert p.flush(30) == 0


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.extended) if n in EXTENDED else n for n in APPS])
def test_every_operation_on_a_declared_app_is_exact(app_factory, name: str) -> None:
    events, reason = APPS[name]
    app = app_factory(f"app-{name}", master=LOCAL, app=name)
    spec = get_app(load_specs(default_spec_path(app.settings.repo)), name)
    job_cls = load_job(spec, app.settings.repo)
    b = app.settings.kafka_bootstrap
    out = _json(app.cli("produce", name, "--events", str(events), "--seed", "1", "--json"))
    assert out["events"] == events and set(out["topics"]) == set(spec.input_topics)
    assert all(t["partitions"] == spec.input_partitions for t in out["topics"].values())
    # small batches: windows close, repeats and late records are screened and state expires across
    # batches; kill -9 after two of them, keep a savepoint of that checkpoint, then run to the end
    app.start("--max-offsets-per-trigger", str(events // 8), "--trigger-interval", "1 second")
    app.wait_for(lambda: app.committed_batch() >= 1, what="two batches")
    app.kill()
    sp = _json(app.cli("savepoint", name, "--json"))
    app.run_to_end("--max-offsets-per-trigger", str(events // 4), "--trigger-interval", "1 second")
    assert app.committed_batch() >= 3
    total = events
    views = _exact(app, total)  # nothing lost, nothing counted twice across the kill
    assert views["dlq"]["expected"] == views["dlq"]["actual"] > 0
    reasons = {dlq_entry(m.headers())[1] for m in read_topic(b, spec.dlq_topic)}
    assert reason in reasons and len(reasons) >= 4, reasons

    # verify: clean, then each fault found with its category, then clean again once repaired (the
    # CLI form is test_verify's)
    assert _verify(app)["ok"]
    if job_cls.has_named_state():  # one changelog record per part: another count of visits for one user
        parts = latest_per_key(b, spec.changelog_topic, decode=lambda v: v)
        ckey = min(k for k in parts if json.loads(k)[1] == "visits")
        key, right = json.loads(ckey)[0], parts[ckey]
        wrong = JSON.dumps(json.loads(right) + 1)
        state = decode_changelog(job_cls, parts)[key]
    else:
        key, state = min((k, s) for k, s in latest_per_key(b, spec.changelog_topic,
                                                            decode=job_cls.state_serde.loads).items()
                         if name != "enriched_orders" or s["table"] is not None)
        ckey, right, wrong = key, job_cls.state_serde.dumps(state), job_cls.state_serde.dumps(_corrupt(name, state))
    _produce_record(app, spec.changelog_topic, ckey, wrong)
    report = _verify(app)
    assert report["categories"] == ["changelog.different", "quality.result"], report["categories"]
    _produce_record(app, spec.changelog_topic, ckey, right)
    emitted = job_cls().emit(key, state)
    if emitted:  # (a sessions state emits nothing: its output is the closed sessions, no state explains it)
        okey, value = min(emitted.items())
        _produce_record(app, spec.live_output_topic, okey, None)
        report = _verify(app)
        assert report["categories"] == ["output.missing", "quality.result"], report["categories"]
        _produce_record(app, spec.live_output_topic, okey, JSON.dumps(value))
    files = sorted((app.checkpoint / "state" / "0" / "0").glob(f"{app.committed_batch() + 1}.*"))
    saved = {f: f.read_bytes() for f in files}
    try:
        for f, data in saved.items():
            f.write_bytes(data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0xFF]) + data[len(data) // 2 + 1:])
        assert "state_unreadable" in _verify(app)["categories"]
    finally:
        for f, data in saved.items():
            f.write_bytes(data)
    assert _verify(app)["ok"]

    # restore the savepoint taken at the kill: the batches after it are written again, exactly once
    restored = _json(app.cli("restore", name, sp["id"], "--json", timeout=600))
    assert layout.last_committed_batch(app.checkpoint) == sp["batch_id"] == restored["batch_id"]
    app.run_to_end()
    _exact(app, total)

    # compaction (of the checkpoint the restored app ran on) seeds a snapshot through the same
    # serde and installs it
    comp = _maintenance(app, "compact")
    assert comp.installed, comp
    _exact(app, total)

    # rebuild-state from the changelog (the serialized state) into 2 state partitions, then go on
    rebuilt = _maintenance(app, "rebuild_state", state_partitions=2)
    assert rebuilt.state_partitions_after == 2 and rebuilt.query_sources == 1
    assert sorted(p for _o, p in cc.partitions(app.checkpoint)) == [0, 1]
    _exact(app, total)  # the rebuilt checkpoint runs on below, after the reset's undo and the promote

    # reset: the dry run changes nothing. Where the app's reset is not under test elsewhere
    # (RESET_HERE), the reset recomputes everything and the undo puts the rebuilt checkpoint back
    # (the app goes on from it after the promote)
    batch = app.committed_batch()
    plan = _json(app.cli("reset", name, "--to-earliest", "--dry-run", "--json"))
    assert plan["dry_run"] and plan["records_to_reprocess"] == total and app.committed_batch() == batch
    if name in RESET_HERE:
        reset = _json(app.cli("reset", name, "--to-earliest", "--json"))
        app.run_to_end("--max-offsets-per-trigger", str(events // 3))
        _exact(app, total)
        _json(app.cli("reset", name, "--undo", str(reset["operation_id"]), "--json"))
        assert app.committed_batch() == batch and sorted(p for _o, p in cc.partitions(app.checkpoint)) == [0, 1]
        _exact(app, total)

    # reprocess everything into v2 beside the live output: v2 is the fold of the input; promote it
    rep = _json(app.cli("reprocess", name, "--from", "earliest", "--to", "latest", "--output-version", "v2",
                        "--master", LOCAL, "--json", timeout=900))
    assert rep["records"] == total
    expected = fold_input(job_cls, [record_of(m) for t in spec.input_topics for m in read_topic(b, t)],
                          [(t, p) for t in spec.input_topics for p in range(spec.input_partitions)])
    assert latest_per_key(b, f"{spec.output_topic}.v2") == expected.output
    _json(app.cli("promote", name, "--output-version", "v2", "--json"))
    app.cli("produce", name, "--events", str(events // 5), "--seed", "3")
    total += events // 5
    app.run_to_end()
    views = _exact(app, total)  # check reads the promoted output
    assert views["output"]["expected"] > 0
    assert sorted(p for _o, p in cc.partitions(app.checkpoint)) == [0, 1]
