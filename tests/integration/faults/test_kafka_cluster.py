"""A Kafka cluster of three KRaft nodes (``platform.kafka_cluster``) as the app's external cluster,
under load: the leader of an input partition SIGKILLed and restarted, then the commits topic's
leader, then one node stopped for good (the app goes on with two). After each the app is exact
(``check``), with nothing lost or counted twice and no repair step, and each pause is printed (the
table in docs/benchmarks.md). Then, with the node still down, a savepoint and a restore to it. Also alone: ``pytest -m cluster``."""

from __future__ import annotations

import json
import time

import pytest

from streamops.kafka.admin import TopicSpec, end_offsets, ensure_topics
from streamops.platform.kafka_cluster import LocalKafkaCluster, Node
from tests.fixtures.apps import AppHarness
from tests.fixtures.ports import free_ports

pytestmark = pytest.mark.cluster
APP = "user_activity"


def _input_records(app: AppHarness) -> int:
    return sum(hi for _lo, hi in end_offsets(app.kafka, "user-events").values())


def _pause_after(app: AppHarness, fault, what: str) -> float:
    """Run ``fault`` while batches commit; the seconds from it until the next batch committed
    (no timed assert: the table is the measurement)."""
    before = app.committed_batch()
    app.wait_for(lambda: app.committed_batch() > before, what=f"a batch before {what}", timeout=180)
    seen = app.committed_batch()
    t0 = time.monotonic()
    fault()
    app.wait_for(lambda: app.committed_batch() > seen, what=f"a batch after {what}", timeout=300)
    return time.monotonic() - t0


def test_the_app_stays_exact_through_leaders_killed_and_a_broker_lost(platform_factory, spark, tmp_path) -> None:
    ports = free_ports(6)
    cluster = LocalKafkaCluster(tmp_path / "kafka-cluster", [Node(i + 1, ports[2 * i], ports[2 * i + 1]) for i in range(3)])
    s = platform_factory("on-cluster")
    s = s.model_copy(update={"bootstrap_servers": cluster.bootstrap, "spark_master": "local[2]"})
    app = AppHarness(s, "local[2]", APP)
    app.spark = spark
    pauses: list[tuple[str, float]] = []
    try:
        cluster.start(s)
        # a topic made before by something else, with two copies: used as it is, and said aloud (with
        # one, the node stopped for good below would take some of its partitions with it, and every
        # transaction that wrote to them could then never end: what the note warns of)
        ensure_topics(app.kafka, [TopicSpec(name="user-events.dlq", partitions=6, replication_factor=2,
                                            config={"min.insync.replicas": "1"})])
        app.produce(30_000, users=800, seed=41)
        app.start("--max-offsets-per-trigger", "1500")
        app.wait_for(lambda: app.committed_batch() >= 1, what="the first batches", timeout=300)

        def coordinates(node: int) -> str:  # the app's group coordinator: librdkafka 5511 (benchmarks.md)
            return ", the group coordinator" if cluster.group_coordinator(APP) == node else ""

        def kill_and_restart(topic: str, partition: int) -> None:
            leader = cluster.leader(topic, partition)
            assert cluster.crash(leader)
            time.sleep(5)  # down while the app goes on: its partitions move to another leader
            cluster.start(s, [leader])

        spec_commits = f"_streamops-{APP}-commits"
        node = cluster.leader("user-events", 0)
        pauses.append((f"input partition leader (node {node}{coordinates(node)}) SIGKILLed, back 5 s later",
                       _pause_after(app, lambda: kill_and_restart("user-events", 0), "the input leader's kill")))
        app.produce(6_000, users=800, seed=42)
        node = cluster.leader(spec_commits, 0)
        pauses.append((f"commits topic leader (node {node}{coordinates(node)}) SIGKILLed, back 5 s later",
                       _pause_after(app, lambda: kill_and_restart(spec_commits, 0), "the commits leader's kill")))
        app.produce(6_000, users=800, seed=43)
        gone = cluster.leader("user-events", 1)
        pauses.append((f"node {gone}{coordinates(gone)} stopped for good",
                       _pause_after(app, lambda: cluster.stop(gone, timeout=30), "a broker stopped")))
        app.produce(6_000, users=800, seed=44)  # acks=all with 2 of 3 in sync: taken
        total = _input_records(app)
        assert total == 48_000
        assert app.stop(timeout=180) == 0, app.log_tail()
        app.run_to_end(timeout=400)  # whatever the stop left: the next driver goes on, no repair step
        report = app.check()
        assert report["ok"] and report["input_records"] == total, report
        # the other topics got three copies; the one made with one is a note of `platform status`
        r = app.cli("platform", "status", "--only", "kafka", "--json")
        status = json.loads(r.stdout)
        assert r.returncode == 0 and [e["kind"] for e in status["external"]] == ["kafka"], r.stdout + r.stderr
        assert status["notes"] == [("topic user-events.dlq has 2 replica(s) per partition where the platform creates 3 "
                                    "(STREAMOPS_TOPIC_REPLICATION); it is used as it is: reassign its partitions "
                                    "(kafka-reassign-partitions) or set the setting to match")], status["notes"]

        # a savepoint and a restore to it on the cluster, one node still down: the batches after
        # the savepoint are written again, and nothing is counted twice
        r = app.cli("savepoint", APP, "--json")
        assert r.returncode == 0, r.stderr[-3000:]
        sp = json.loads(r.stdout)
        app.produce(3_000, users=800, seed=45)
        app.run_to_end(timeout=400)
        plan = json.loads(app.cli("restore", APP, sp["id"], "--dry-run", "--json").stdout)
        assert plan["dry_run"] and plan["batch_id"] == sp["batch_id"] and plan["records_to_reprocess"] == 3_000, plan
        r = app.cli("restore", APP, sp["id"], "--json", timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        app.run_to_end(timeout=400)
        report = app.check()
        assert report["ok"] and report["input_records"] == total + 3_000, report
    finally:
        app.close()
        cluster.stop()
    print("\npauses on a 3-node KRaft cluster (user_activity, local[2], 1,500 records per batch):")
    print(f"{'fault':<78} {'pause s':>8}")
    for what, secs in pauses:
        print(f"{what:<78} {secs:8.1f}")
