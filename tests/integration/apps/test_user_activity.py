"""The demo app end to end on real Kafka protocol + Spark: exactly-once through stops, kill -9
of the driver mid-batch, and a broker restart. ``streamops check`` is the oracle."""

from __future__ import annotations

import json

import pytest

from jobs.demo.generator import generate_records
from streamops.checkpoints import layout
from streamops.platform import manager

# The driver runs on an in-process Spark (real Spark, real RocksDB state, the same commit protocol):
# the cluster's executor start-up adds minutes and nothing these tests look at. Drivers on the
# standalone cluster are covered by the supervisor, resize, savepoint and Airflow tests.
LOCAL = "local[2]"


def _assert_exact(report: dict, input_records: int) -> None:
    views = {v["view"]: v for v in report["views"]}
    assert report["ok"], views
    assert report["input_records"] == input_records
    for name in ("state", "changelog", "output", "dlq"):
        v = views[name]
        assert (v["missing"], v["extra"], v["different"], v["duplicates"]) == (0, 0, 0, 0), v


def test_100k_events_with_malformed_records_exact(app_factory) -> None:
    app = app_factory("ua-100k", master=LOCAL)
    app.produce(100_000, users=1000, bad_ratio=0.01, seed=1)
    app.run_to_end()
    report = app.check()
    _assert_exact(report, 100_000)
    bad = sum(1 for r in generate_records(100_000, 1000, seed=1, bad_ratio=0.01) if r.reason is not None)
    dlq = next(v for v in report["views"] if v["view"] == "dlq")
    assert dlq["expected"] == dlq["actual"] == bad and 800 < bad < 1200
    state = next(v for v in report["views"] if v["view"] == "state")
    assert state["actual"] == 1000

    # the driver reported what it did to the ledger; status reads it back with the lag
    r = app.cli("status", "user_activity", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    st = json.loads(r.stdout)
    obs = st["observed"]
    assert (obs["status"], obs["pid"], obs["last_batch"]) == ("stopped", None, app.committed_batch())
    assert obs["spark_app_id"] and obs["executors"] >= 1
    assert st["checkpoint"]["last_committed_batch"] == app.committed_batch()
    assert st["total_lag"] == 0 and len(st["lag"]["user-events"]) == 6
    assert sum(int(o) for o in st["checkpoint"]["committed_offsets"]["user-events"].values()) == 100_000

    # each batch's transaction committed its input offsets to the app's consumer group: Kafka's
    # own tool shows the checkpoint's offsets, and no lag
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    ckpt = layout.committed_offsets(app.checkpoint)["user-events"]
    admin = AdminClient({"bootstrap.servers": app.settings.kafka_bootstrap})
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "user_activity", [TopicPartition("user-events", p) for p in range(6)])])["user_activity"].result(30)
    assert {tp.partition: tp.offset for tp in got.topic_partitions} == ckpt
    r = app.cli("platform", "kafka-tool", "consumer-groups", "--describe", "--group", "user_activity")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("user_activity ")]
    assert {int(row[2]): (int(row[3]), int(row[4]), int(row[5])) for row in rows} == {
        p: (o, o, 0) for p, o in ckpt.items()}, r.stdout  # partition: (current offset, end offset, lag)


def test_graceful_stop_then_kill_9_mid_batch_then_restart_exact(app_factory) -> None:
    app = app_factory("ua-restart", master=LOCAL)
    app.produce(30_000, seed=2)
    app.start("--max-offsets-per-trigger", "4000", "--trigger-interval", "1 second")
    app.wait_for(lambda: app.committed_batch() >= 2, what="batch 2 committed")
    assert app.stop() == 0  # graceful
    stopped_at = app.committed_batch()
    assert sum(layout.committed_offsets(app.checkpoint)["user-events"].values()) < 30_000, "stopped too late"
    app.produce(30_000, seed=3)

    # the next run is killed (-9, driver and JVM) with a batch planned but not committed
    app.start("--max-offsets-per-trigger", "3000", "--trigger-interval", "1 second")

    def mid_batch() -> bool:
        planned = layout.last_planned_batch(app.checkpoint)
        return planned is not None and planned >= stopped_at + 2 and planned > app.committed_batch()

    app.wait_for(mid_batch, what="a batch planned but not committed")
    killed_batch = layout.last_planned_batch(app.checkpoint)
    pids = app.kill()
    assert len(pids) >= 2  # the Python driver and its JVM
    assert stopped_at < app.committed_batch() <= killed_batch
    app.run_to_end("--max-offsets-per-trigger", "20000")
    assert app.committed_batch() > killed_batch
    _assert_exact(app.check(), 60_000)


# extended (``make test-all``): test_chaos kills the broker (-9) under a running app and checks it
# exact, test_broker's broker killed with SIGKILL loses no acknowledged write
@pytest.mark.extended
def test_broker_restart_while_running_exact(app_factory) -> None:
    app = app_factory("ua-broker", master=LOCAL)
    app.produce(20_000, seed=5)
    app.start("--max-offsets-per-trigger", "2000", "--trigger-interval", "1 second")
    app.wait_for(lambda: app.committed_batch() >= 2, what="batch 2 committed")
    manager.down(app.settings, only=["kafka"])  # SIGTERM
    import time

    time.sleep(5)
    manager.up(app.settings, only=["kafka"])
    app.produce(10_000, seed=6)
    app.wait_for(
        lambda: sum(layout.committed_offsets(app.checkpoint).get("user-events", {}).values()) >= 30_000,
        timeout=300, what="all 30k events committed after the broker restart",
    )
    assert app.proc.poll() is None, "the job died instead of recovering"
    assert app.stop() == 0
    _assert_exact(app.check(), 30_000)
