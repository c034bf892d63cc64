"""A Kafka cluster of three KRaft nodes (``platform.kafka_cluster``) as the app's external cluster,
under load: the leader of an input partition SIGKILLed and restarted, then the commits topic's
leader, then one node stopped for good (the app goes on with two). After each the app is exact
(``check``), with nothing lost or counted twice and no repair step, and each pause is printed (the
table in docs/benchmarks.md). Then, with the node still down, a savepoint and a restore to it.

On the same kind of cluster with the rest of the topology (the ledger on PostgreSQL, the platform's
Spark standalone master and two workers, the supervisor), the app deployed by the supervisor at
parallelism 2 under a steady load: a Spark worker SIGKILLed with its executor, the supervisor
SIGKILLed and a new one started, and a live resize in and out. Also alone: ``pytest -m cluster``."""

from __future__ import annotations

import json
import os
import signal
import time

import psutil
import pytest

from streamops.host.process import read_pid
from streamops.kafka.admin import TopicSpec, end_offsets, ensure_topics
from streamops.ledger import Ledger, supervisor_lease
from streamops.lifecycle import driver
from streamops.lifecycle.supervisor import heartbeat_file
from streamops.platform import manager
from streamops.platform.kafka_cluster import LocalKafkaCluster, Node
from streamops.spark import ui
from tests.fixtures.apps import AppHarness, Feeder, until
from tests.fixtures.ports import free_ports
from tests.fixtures.postgres import create_database

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


def _three_nodes(tmp_path) -> LocalKafkaCluster:
    ports = free_ports(6)
    return LocalKafkaCluster(tmp_path / "kafka-cluster", [Node(i + 1, ports[2 * i], ports[2 * i + 1]) for i in range(3)])


def _print_pauses(title: str, pauses: list[tuple[str, float]]) -> None:
    print(f"\n{title}:")
    print(f"{'fault':<78} {'pause s':>8}")
    for what, secs in pauses:
        print(f"{what:<78} {secs:8.1f}")


def test_the_app_stays_exact_through_leaders_killed_and_a_broker_lost(platform_factory, spark, tmp_path) -> None:
    cluster = _three_nodes(tmp_path)
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
    _print_pauses("pauses on a 3-node KRaft cluster (user_activity, local[2], 1,500 records per batch)", pauses)


def _cmdline(proc: psutil.Process) -> list[str]:
    """A process's command line; none for one that ended meanwhile (a zombie not yet reaped)."""
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def _executors(ledger: Ledger) -> int | None:
    return (ledger.observed(APP) or {}).get("executors")


def test_a_worker_lost_the_supervisor_killed_and_a_live_resize_on_the_cluster_topology(
        platform_factory, postgres, spark, tmp_path) -> None:
    """Everything external but Spark and the supervisor, which the platform runs pointed at them:
    after a worker's loss, the supervisor's and a resize in and out, ``check`` is exact, the
    supervisor never restarted the driver (a new supervisor adopts it, and takes the state dir's
    lock and the ledger's supervisor lease at once) and the ledger on PostgreSQL holds every change."""
    cluster = _three_nodes(tmp_path)
    s = platform_factory("cluster-topology", workers=2)
    s = s.model_copy(update={"bootstrap_servers": cluster.bootstrap,
                             "ledger_url": create_database(postgres, "streamops_cluster_topology")})
    app = AppHarness(s, s.spark_master_url, APP)
    app.spark = spark
    feeder = Feeder(app, seed=7_000)
    pauses: list[tuple[str, float]] = []
    ledger = None
    total = 0
    try:
        cluster.start(s)
        app.produce(10_000, users=800, seed=61)
        manager.up(s, only=["spark", "supervisor"])  # the master and two workers of 2 cores each, here
        ledger = Ledger.open(s.ledger_db_url)
        r = app.cli("deploy", APP, "--parallelism", "2", "--json", timeout=420)
        assert r.returncode == 0, r.stderr[-3000:]
        pid = driver.running(s, APP).pid
        until("two executors", lambda: _executors(ledger) == 2, timeout=180)
        feeder.start()

        # a worker lost with its executor: the query's tasks run again on the other one, and the
        # other worker's free core takes a new executor; the worker comes back afterwards
        hb = app.heartbeat
        where = (hb["ui_url"], hb["app_id"])
        before = set(ui.executors(*where))
        worker = read_pid(manager.pid_path(s, "spark-worker-1")).process()
        assert any("CoarseGrainedExecutorBackend" in " ".join(_cmdline(p)) for p in worker.children(recursive=True)), \
            "the master put no executor of the app on worker 1"
        pauses.append(("a Spark worker SIGKILLed with its executor (its tasks rerun elsewhere)",
                       _pause_after(app, lambda: manager.crash(s, "spark-worker-1"), "a worker's loss")))
        now = until("a new executor in the lost one's place",
                    lambda: (got := set(ui.executors(*where))) - before and len(got) == 2 and got, timeout=180)
        assert len(now & before) == 1, (before, now)
        manager.up(s, only=["spark"])

        # the supervisor SIGKILLed alone (as the kernel's OOM killer ends one process): its driver
        # is a session of its own and runs on; a new supervisor takes the state dir's lock and
        # adopts the driver instead of launching another
        sup = read_pid(manager.pid_path(s, "supervisor"))
        assert sup is not None and sup.alive
        t0 = time.monotonic()
        os.kill(sup.pid, signal.SIGKILL)
        until("the supervisor gone", lambda: not sup.alive, timeout=10, every=0.1)
        seen = app.committed_batch()
        app.wait_for(lambda: app.committed_batch() > seen, what="a batch with no supervisor", timeout=120)
        down_s = time.monotonic() - t0
        restarted = time.time()
        manager.up(s, only=["supervisor"])
        until("the new supervisor's heartbeat",
              lambda: json.loads(heartbeat_file(s).read_text())["heartbeat"] > restarted, timeout=60)
        assert driver.running(s, APP).pid == pid, "the new supervisor restarted the driver"
        assert read_pid(manager.pid_path(s, "supervisor")).pid != sup.pid
        # ... taking the ledger's supervisor lease at once: its holder is gone from this host
        takes = [o["params"] for o in ledger.operations(supervisor_lease.PLATFORM, kind="supervisor-lease")]
        assert [(p["term"], p["reason"]) for p in reversed(takes)] == [(1, "free"), (2, "holder gone")], takes
        assert json.loads(heartbeat_file(s).read_text())["lease"].endswith(", term 2")
        lease = json.loads(app.cli("platform", "status", "--only", "supervisor", "--json").stdout)["supervisor_lease"]
        new_pid = read_pid(manager.pid_path(s, "supervisor")).pid
        assert (lease["term"], lease["holder"].rsplit(":", 1)[1], lease["expired"]) == (2, str(new_pid), False), lease
        pauses.append((f"the supervisor SIGKILLed (a batch committed {down_s:.1f} s later, with none running)", 0.0))

        # a live resize in and out, through the new supervisor: the driver stays, executors follow
        for n in (1, 2):
            before = app.committed_batch()
            t0 = time.monotonic()
            r = app.cli("resize", APP, "--parallelism", str(n), "--strategy", "live", "--json", timeout=420)
            assert r.returncode == 0, r.stderr[-3000:] + driver.log_tail(s, APP, 40)
            out = json.loads(r.stdout)
            assert (out["parallelism"], out["noop"], out["strategy"]) == (n, False, "live"), out
            until(f"{n} executor(s)", lambda n=n: _executors(ledger) == n, timeout=120)
            app.wait_for(lambda b=before: app.committed_batch() > b, what=f"a batch after the resize to {n}", timeout=180)
            pauses.append((f"a live resize to {n} (the CLI's call until it converged)", time.monotonic() - t0))
        assert driver.running(s, APP).pid == pid, "a live resize must not restart the driver"

        feeder.halt.set()
        feeder.join()
        total = 10_000 + feeder.sent
        assert _input_records(app) == total
        app.caught_up(total, timeout=400)
        r = app.cli("stop", APP, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        report = app.check()
        assert report["ok"] and report["input_records"] == total, report
        kinds = [(o["kind"], o["outcome"]) for o in ledger.operations(APP, limit=100)]
        assert kinds.count(("supervisor-resize-live", "succeeded")) == 2, kinds
        assert kinds.count(("supervisor-launch", "succeeded")) == 1 and not any(
            k in ("supervisor-restart", "supervisor-resize") for k, _o in kinds), kinds
    finally:
        feeder.halt.set()
        if ledger is not None:
            ledger.close()
        app.close()
        manager.down(s)
        cluster.stop()
    _print_pauses(f"on the cluster topology (user_activity on 2 workers, about 1,000 records/s; {total:,} records, "
                  f"batches 0..{app.committed_batch()}, check exact)", pauses)
