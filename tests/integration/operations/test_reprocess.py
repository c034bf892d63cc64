"""``streamops reprocess`` and ``promote`` on a real broker + Spark, beside the live app (both on
in-process Spark: the cluster's executor start-up would only add minutes): the range folds exactly into ``user-profiles.v2``, a rerun is identical, a following
range continues the state, the live app is never disturbed, and ``promote`` moves its output."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from streamops.checkpoints import layout
from streamops.kafka.admin import client_config, end_offsets
from streamops.kafka.read import latest_per_key, read_topic
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.platform import manager
from streamops.spark.query.records import dlq_entry
from streamops.spec import default_spec_path, get_app, load_job, load_specs
from streamops.state.oracle import fold_input, record_of

APP = "user_activity"


def _json(r) -> dict:
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return json.loads(r.stdout)


def _now() -> str:
    time.sleep(1.2)
    at = datetime.now(UTC).isoformat()
    time.sleep(1.2)
    return at


def _fold(app, since: str, until: str | None) -> tuple[dict, dict]:
    """The oracle: the job's plain-Python fold over the input records with since <= timestamp < until."""
    job_cls = load_job(get_app(load_specs(default_spec_path(app.settings.repo)), APP), app.settings.repo)
    lo = int(datetime.fromisoformat(since).timestamp() * 1000)
    hi = int(datetime.fromisoformat(until).timestamp() * 1000) if until else None
    msgs = [m for m in read_topic(app.settings.kafka_bootstrap, "user-events")
            if m.timestamp()[1] >= lo and (hi is None or m.timestamp()[1] < hi)]
    folded = fold_input(job_cls, map(record_of, msgs))
    return folded.output, folded.rejected


def _dlq(app, topic: str) -> list:
    return [dlq_entry(m.headers()) for m in read_topic(app.settings.kafka_bootstrap, topic)]


def _total(app, topic: str) -> int:
    return sum(hi for _lo, hi in end_offsets(app.settings.kafka_bootstrap, topic).values())


def test_reprocess_a_range_into_v2_beside_the_live_app_then_promote(app_factory) -> None:
    app = app_factory("ua-reprocess", master="local[2]")
    manager.up(app.settings, only=["supervisor"])
    b = app.settings.kafka_bootstrap
    app.produce(3_000, users=400, seed=91)
    t1 = _now()
    app.produce(3_000, users=400, seed=92)
    t2 = _now()
    app.produce(2_000, users=400, seed=93)

    r = app.cli("deploy", APP, "--parallelism", "1", "--json", timeout=420)
    assert r.returncode == 0, r.stderr[-3000:]
    deadline = time.time() + 300
    while sum(layout.committed_offsets(app.checkpoint).get("user-events", {}).values()) < 8_000:
        assert time.time() < deadline, driver.log_tail(app.settings, APP, 40)
        time.sleep(1)
    pid, live_batch = driver.running(app.settings, APP).pid, layout.last_committed_batch(app.checkpoint)
    live_out = _total(app, "user-profiles")

    plan = _json(app.cli("reprocess", APP, "--from", t1, "--to", t2, "--output-version", "v2", "--dry-run", "--json"))
    assert plan["records"] == 3_000 and plan["output_topic"] == "user-profiles.v2" and not plan["continues"]
    r = app.cli("reprocess", APP, "--from", t1, "--to", t2, "--output-version", "v1", "--json")
    assert r.returncode == 2 and "writes user-profiles now" in r.stderr  # the live output is refused

    out = _json(app.cli("reprocess", APP, "--from", t1, "--to", t2, "--output-version", "v2",
                        "--master", "local[2]", "--json", timeout=900))
    assert out["records"] == 3_000 and out["records_per_second"] > 0
    expected, invalid = _fold(app, t1, t2)
    v2 = latest_per_key(b, "user-profiles.v2")
    assert v2 == expected
    dlq = _dlq(app, "user-events.dlq.v2")
    assert sorted(w for w, _r in dlq) == sorted(invalid) and dict(dlq) == invalid  # each invalid record once
    # the live app ran on, undisturbed, writing its own output
    assert driver.running(app.settings, APP).pid == pid and _total(app, "user-profiles") == live_out
    assert latest_per_key(b, "user-profiles") != v2

    # a rerun of the same range: identical per key, nothing twice in the DLQ
    again = _json(app.cli("reprocess", APP, "--from", t1, "--to", t2, "--output-version", "v2",
                          "--master", "local[2]", "--json", timeout=900))
    assert not again["continues"] and latest_per_key(b, "user-profiles.v2") == v2
    assert sorted(w for w, _r in _dlq(app, "user-events.dlq.v2")) == sorted(invalid)

    # the next range continues the state: v2 is then the fold over [t1, end)
    nxt = _json(app.cli("reprocess", APP, "--from", t2, "--to", "latest", "--output-version", "v2",
                        "--master", "local[2]", "--json", timeout=900))
    assert nxt["continues"] and nxt["records"] == 2_000
    expected, invalid = _fold(app, t1, None)
    assert latest_per_key(b, "user-profiles.v2") == expected
    assert sorted(w for w, _r in _dlq(app, "user-events.dlq.v2")) == sorted(invalid)
    assert layout.last_committed_batch(app.checkpoint) >= live_batch

    # promote: the live app writes v2 from its next batch on (stopped here, so no restart is needed)
    r = app.cli("stop", APP, "--json", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    plan = _json(app.cli("promote", APP, "--output-version", "v2", "--dry-run", "--json"))
    assert plan["dry_run"] and plan["output_topic_after"] == "user-profiles.v2" and not plan["running"]
    out = _json(app.cli("promote", APP, "--output-version", "v2", "--json"))
    ledger = Ledger.open(app.settings.ledger_db_url)
    try:
        assert ledger.output_version(APP) == "v2"
        assert ledger.operations(APP, limit=1)[0]["kind"] == "promote"
    finally:
        ledger.close()
    base, before = _total(app, "user-profiles"), _total(app, "user-profiles.v2")
    app.produce(500, users=400, seed=94)
    app.run_to_end()
    assert _total(app, "user-profiles") == base and _total(app, "user-profiles.v2") > before
    report = app.check()  # check reads the promoted output: keys the live app touched since are exact
    views = {v["view"]: v for v in report["views"]}
    assert views["state"]["ok"] and views["changelog"]["ok"] and views["dlq"]["ok"]


def test_a_range_that_starts_in_records_the_broker_deleted_is_planned_with_a_warning(app_factory) -> None:
    """Retention deletes a topic's oldest records; a range from before them is reprocessed from the
    oldest one kept, and the plan says which partitions may miss records (Kafka's ``DeleteRecords``
    stands for the retention that would take days here)."""
    app = app_factory("ua-retention", master="local[2]")
    b = app.settings.kafka_bootstrap
    t0 = _now()
    app.produce(2_000, users=200, seed=95)
    t1 = _now()
    before = end_offsets(b, "user-events")
    admin = AdminClient(client_config(b))  # kept: the futures complete only while the client lives
    for f in admin.delete_records([TopicPartition("user-events", 0, 50)]).values():
        f.result(30)
    assert end_offsets(b, "user-events")[0] == (50, before[0][1])

    plan = _json(app.cli("reprocess", APP, "--from", t0, "--to", t1, "--dry-run", "--json"))
    assert plan["warnings"] == [("the range may start in records the broker has deleted (retention): "
                                 "user-events[0]: the records before offset 50, the oldest kept; they are not "
                                 "reprocessed")]
    assert [(o["partition"], o["from"], o["to"]) for o in plan["offsets"]] == [
        (p, 50 if p == 0 else 0, hi) for p, (_lo, hi) in sorted(before.items())]
    assert plan["records"] == 2_000 - 50
    r = app.cli("reprocess", APP, "--from", t0, "--to", t1, "--dry-run")
    assert r.returncode == 0 and "  warning: the range may start in records the broker has deleted" in r.stdout

    # a range from after the oldest kept record, or from offsets kept, or from 'earliest': no warning
    offsets = json.dumps({"user-events": {"0": 60}})
    for frm in (offsets, "earliest"):
        plan = _json(app.cli("reprocess", APP, "--from", frm, "--to", t1, "--dry-run", "--json"))
        assert plan["warnings"] == [] and plan["records"] == 2_000 - (60 if frm == offsets else 50)
    plan = _json(app.cli("reprocess", APP, "--from", json.dumps({"user-events": {"0": 10}}), "--to", t1,
                         "--dry-run", "--json"))
    assert len(plan["warnings"]) == 1 and plan["offsets"][0]["from"] == 50
