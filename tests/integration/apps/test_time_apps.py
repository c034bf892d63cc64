"""A job with stream time (``jobs.sessions``) as a deployed app on Apache Kafka and Spark's
connector: in small batches with a kill -9 between them, ``check`` is exact (state store,
changelog, output, DLQ with its ``late`` records) as of every committed batch's watermark; once
the input stops, the ticks carry the last watermark into Spark and the sessions of users who went
quiet close by timer, with no more input."""

from __future__ import annotations

import json
import zlib

import pytest
from confluent_kafka import Producer

from jobs import sessions
from streamops.checkpoints import layout
from streamops.kafka.admin import TopicSpec, end_offsets, ensure_topics, partitions
from streamops.kafka.read import latest_per_key, read_topic
from streamops.spark.query.records import dlq_entry
from streamops.spec import default_spec_path, get_app, load_job, load_specs
from streamops.state.oracle import fold_input, record_of
from tests.fixtures.apps import repo_with

LOCAL = "local[2]"


def _exact(app) -> dict:
    report = app.check()
    views = {v["view"]: v for v in report["views"]}
    assert report["ok"], json.dumps(views, indent=1)[:3000]
    return views


@pytest.mark.timeout(900)
def test_sessions_app_is_exact_and_closes_quiet_users_sessions_by_timer(app_factory) -> None:
    app = app_factory("app-sessions", master=LOCAL, app="sessions")
    spec = get_app(load_specs(default_spec_path(app.settings.repo)), "sessions")
    job_cls = load_job(spec, app.settings.repo)
    b = app.settings.kafka_bootstrap
    r = app.cli("produce", "sessions", "--events", "6000", "--seed", "2", "--json")
    assert r.returncode == 0, r.stderr[-2000:]

    # small batches; kill -9 after two, then on to the end of the input
    app.start("--max-offsets-per-trigger", "700", "--trigger-interval", "1 second")
    app.wait_for(lambda: app.committed_batch() >= 1, what="two batches")
    app.kill()
    _exact(app)  # as of that batch's watermark
    app.start("--trigger-interval", "1 second")
    records = [record_of(m) for m in read_topic(b, "clicks")]
    parts = [("clicks", p) for p in partitions(b, "clicks")]
    final = fold_input(job_cls, records, parts)
    expected_wm = _watermark(job_cls, records, parts)

    def caught_up() -> bool:  # the ticks carried the last watermark in: batches with no input ran
        batch = app.committed_batch()
        return batch >= 0 and layout.batch_watermark(app.checkpoint, batch) == expected_wm

    app.wait_for(caught_up, timeout=300, what=f"the app's watermark to reach {expected_wm}")
    assert app.stop() == 0
    views = _exact(app)
    assert views["dlq"]["expected"] == views["dlq"]["actual"] > 0
    assert "late" in {dlq_entry(m.headers())[1] for m in read_topic(b, spec.dlq_topic)}

    # every session the fold closed is in the output, and the users who went quiet have no state
    # left: their last sessions were closed by the watermark, not by a click of theirs
    assert latest_per_key(b, spec.live_output_topic) == final.output
    quiet = {k.split("@")[0] for k in final.output} - set(final.states)
    assert quiet, "the sample has users who went quiet"
    last: dict[str, bytes | None] = {}
    for m in read_topic(b, spec.changelog_topic):
        last[m.key().decode()] = m.value()
    assert quiet <= set(last) and all(last[u] is None for u in quiet)  # state written, then deleted


def _times(job_cls, records) -> dict:
    from streamops import stream_time
    from streamops.job import Reject

    job = job_cls()
    out = {}
    for r in records:
        ev = job.parse(r)
        if not isinstance(ev, Reject) and (ts := stream_time.event_time(job, ev, r.timestamp_ms)) is not None:
            out[(r.topic, r.partition, r.offset)] = ts
    return out


def _watermark(job_cls, records, parts) -> int:
    """The smallest over the partitions of their largest event time."""
    times = _times(job_cls, records)
    return min(max(ts for (t, p, _o), ts in times.items() if (t, p) == part) for part in parts)


#: the apps with stream time, with their output topic
TIME_APPS = {"sessions": "user-sessions", "enriched_orders": "orders-enriched", "recent_pages": "user-recent-pages"}


def _inputs(app, name: str) -> list[str]:
    return list(get_app(load_specs(default_spec_path(app.settings.repo)), name).input_topics)


@pytest.mark.timeout(900)
# extended (``make test-all``): enriched_orders and recent_pages resize as sessions does (the same
# supervisor handover and warm-up; their state kinds survive the restarts of test_apps' kill -9
# and restore); test_airflow_operations resizes orders and sessions through the DAGs
@pytest.mark.parametrize("name", [n if n == "sessions" else pytest.param(n, marks=pytest.mark.extended)
                                  for n in TIME_APPS])
def test_a_time_app_resized_live_and_by_restart_is_exact(app_factory, name: str) -> None:
    """On the shared Spark cluster, through the supervisor: a live resize 1 -> 2 (new executors
    warmed up on the job's parse stage and a streaming batch), then a restart resize 2 -> 1, with
    input arriving between them; then check exact once the watermark settled."""
    from streamops.ledger import Ledger
    from streamops.lifecycle import driver
    from streamops.platform import manager
    from streamops.spark.driver.loop import time_settled

    app = app_factory(f"{name}-resize", app=name)
    b = app.settings.kafka_bootstrap
    topics = _inputs(app, name)
    assert app.cli("produce", name, "--events", "3000", "--seed", "4").returncode == 0
    manager.up(app.settings, only=["supervisor"])
    ledger = Ledger.open(app.settings.ledger_db_url)
    try:
        r = app.cli("deploy", name, "--parallelism", "1", "--json", timeout=420)
        assert r.returncode == 0, r.stderr[-3000:]
        for strategy, n, seed in (("live", 2, 5), ("restart", 1, 6)):
            r = app.cli("resize", name, "--parallelism", str(n), "--strategy", strategy, "--json", timeout=420)
            assert r.returncode == 0, r.stderr[-3000:] + driver.log_tail(app.settings, name, 40)
            assert json.loads(r.stdout)["parallelism"] == n
            assert app.cli("produce", name, "--events", "1500", "--seed", str(seed)).returncode == 0
        total = sum(hi for t in topics for _lo, hi in end_offsets(b, t).values())
        assert total == 6000

        def settled() -> bool:
            offsets = layout.committed_offsets(app.checkpoint)
            done = sum(sum(offsets.get(t, {}).values()) for t in topics)
            return done == total and time_settled(app.checkpoint)

        app.wait_for(settled, timeout=300, what="the input and its watermark")
        r = app.cli("stop", name, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        report = app.check()
        assert report["ok"] and report["input_records"] == total, report
        kinds = [(o["kind"], o["outcome"]) for o in ledger.operations(name, limit=100)]
        assert ("supervisor-resize-live", "succeeded") in kinds and ("supervisor-resize", "succeeded") in kinds, kinds
    finally:
        ledger.close()
        manager.down(app.settings, only=["supervisor"])


@pytest.mark.timeout(900)
# recent_pages: reset to the earliest offsets + undo in test_apps; sessions is extended (``make
# test-all``): enriched_orders' reset to a datetime is the same steps with stream time, and a join
@pytest.mark.parametrize("name", [pytest.param("sessions", marks=pytest.mark.extended), "enriched_orders"])
def test_a_time_app_reset_to_a_datetime_is_exact(app_factory, name: str) -> None:
    """Reset to a datetime into a new output version: the new checkpoint starts with no clocks
    at the first records at or after T, and state, changelog, output and DLQ equal the fold over
    those records (for enriched_orders, two topics in event-time order)."""
    import time
    from datetime import UTC, datetime

    app = app_factory(f"{name}-reset", master=LOCAL, app=name)
    b = app.settings.kafka_bootstrap
    assert app.cli("produce", name, "--events", "3000", "--seed", "1").returncode == 0
    time.sleep(1.5)
    since = datetime.now(UTC).isoformat(timespec="milliseconds")
    time.sleep(1.5)
    assert app.cli("produce", name, "--events", "2000", "--seed", "2").returncode == 0
    app.run_to_end("--max-offsets-per-trigger", "1500", "--trigger-interval", "1 second")
    _exact(app)
    r = app.cli("reset", name, "--to-datetime", since, "--output-version", "v2", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert layout.read_clocks(app.checkpoint, 10**9) is None  # a new checkpoint: stream time starts over
    app.run_to_end("--max-offsets-per-trigger", "700", "--trigger-interval", "1 second")
    report = app.check(since=since)
    views = {v["view"]: v for v in report["views"]}
    assert report["ok"] and report["input_records"] == 2000, json.dumps(views, indent=1)[:3000]
    assert views["output"]["expected"] > 20 and latest_per_key(b, f"{TIME_APPS[name]}.v2")


@pytest.mark.timeout(900)
def test_a_quiet_partition_stops_holding_the_watermark_after_its_idle_timeout(app_factory, tmp_path) -> None:
    """sessions with ``idle_timeouts: {clicks: 3 seconds}``, its clicks in two of three partitions:
    once the third has been quiet 3 s the watermark is the others' and the quiet users' sessions
    close; clicks it shows later are judged against the raised stream time (behind it by more than
    the grace: late), and ``check`` is exact with the raise."""
    app = app_factory("app-idle", master=LOCAL, app="sessions")
    app.settings = app.settings.model_copy(update={"repo": repo_with(tmp_path, "sessions",
                                                                      idle_timeouts={"clicks": "3 seconds"})})
    spec = get_app(load_specs(default_spec_path(app.settings.repo)), "sessions")
    job_cls = load_job(spec, app.settings.repo)
    assert spec.idle_timeout_ms == {"clicks": 3000}
    ensure_topics(app.kafka, [TopicSpec(name="clicks", partitions=3)])
    items = list(sessions.generate(3000, seed=4, users=60))
    producer = Producer({"bootstrap.servers": app.settings.kafka_bootstrap})
    for key, value in items:  # partitions 0 and 1 only: 2 stays quiet
        producer.produce("clicks", key=key, value=value, partition=zlib.crc32(key) % 2)
    producer.flush(30)

    app.start("--trigger-interval", "500 milliseconds")
    parts = [("clicks", p) for p in range(3)]
    records = [record_of(m) for m in read_topic(app.settings.kafka_bootstrap, "clicks")]
    held = fold_input(job_cls, records, parts)  # without idleness: no watermark, nothing closed by it
    assert held.output == fold_input(job_cls, records, parts, watermark=None).output

    def released() -> layout.Clocks | None:
        batch = app.committed_batch()
        clocks = layout.read_clocks(app.checkpoint, batch) if batch >= 0 else None
        return clocks if clocks is not None and ("clicks", 2) in clocks.idle and clocks.watermark is not None \
            and layout.batch_watermark(app.checkpoint, batch) == clocks.watermark else None

    app.wait_for(released, timeout=300, what="partition 2 released and Spark's watermark at the others'")
    clocks = released()
    assert clocks.watermark == min(clocks.partitions[("clicks", 0)], clocks.partitions[("clicks", 1)])
    views = _exact(app)
    assert len(latest_per_key(app.settings.kafka_bootstrap, spec.live_output_topic)) > len(held.output)

    # partition 2 shows clicks: one far behind the raised stream time (late), one at it
    wm = clocks.watermark
    late = json.dumps({"user": "zz-late", "page": "/x", "ts": wm - 2 * 3600_000}).encode()
    ontime = json.dumps({"user": "zz-now", "page": "/x", "ts": wm}).encode()
    for key, value in ((b"zz-late", late), (b"zz-now", ontime)):
        producer.produce("clicks", key=key, value=value, partition=2)
    producer.flush(30)
    app.wait_for(lambda: (c := layout.read_clocks(app.checkpoint, max(app.committed_batch(), 0))) is not None
                 and c.raises.get(("clicks", 2)), timeout=120, what="partition 2's raise recorded")
    assert app.stop() == 0
    clocks = layout.read_clocks(app.checkpoint, app.committed_batch())
    assert clocks.raises[("clicks", 2)][0][0] == 0  # from its first record on
    views = _exact(app)
    assert views["dlq"]["expected"] == views["dlq"]["actual"]
    reasons = {m.value(): dlq_entry(m.headers())[1] for m in read_topic(app.settings.kafka_bootstrap, spec.dlq_topic)}
    assert reasons.get(late) == "late" and ontime not in reasons
