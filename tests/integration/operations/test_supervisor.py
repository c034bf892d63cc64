"""deploy / kill -9 / supervisor restart / stop on real broker + Spark cluster, audited in the ledger."""

from __future__ import annotations

import json
import subprocess
import time

import psutil

from streamops.checkpoints import layout
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.platform import manager
from tests.fixtures.apps import CLI


def _assert_spark_kafka_connector_loaded(app, cluster) -> None:
    """The deployed driver has Spark's own Kafka connector on its classpath (its environment, as the
    Spark UI shows it), and each executor that ran a batch fetched it into its work dir."""
    import pyspark

    from streamops.spark import ui

    jar = f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar"
    from streamops.app.dir import AppDir

    hb = json.loads(AppDir.of(app.settings, "user_activity").heartbeat.read_text())
    env = ui.environment(hb["ui_url"], hb["app_id"])  # read again if a busy driver's UI misses one
    assert any(jar in path for path, _src in env["classpathEntries"]), env["classpathEntries"]
    # the cluster's workers (the session's platform) keep each executor's work dir
    fetched = sorted(cluster.state_dir.glob(f"spark/worker-*/{hb['app_id']}/*/{jar}"))
    assert len(fetched) >= 2, fetched  # parallelism 2: at least the two executors that ran its batches


def test_deploy_then_kill_9_is_restarted_by_the_supervisor_exact(app_factory, spark_cluster) -> None:
    app = app_factory("ua-supervise")
    app.produce(20_000, seed=7)
    r = app.cli("deploy", "user_activity")
    assert r.returncode == 1 and "supervisor is not running" in r.stderr  # refused, nothing changed
    probe = Ledger.open(app.settings.ledger_db_url)
    assert probe.desired("user_activity") is None
    probe.close()
    manager.up(app.settings, only=["supervisor"])  # as `platform up` starts it
    try:
        r = app.cli("deploy", "user_activity", "--parallelism", "2", "--json", timeout=420)
        assert r.returncode == 0, r.stderr[-3000:] + manager.log_path(app.settings, "supervisor").read_text()[-3000:]
        out = json.loads(r.stdout)
        assert out["parallelism"] == 2 and out["after"]["batch"] is not None
        _assert_spark_kafka_connector_loaded(app, spark_cluster)

        # a concurrent operation on the same app is refused while one holds the lease
        ledger = Ledger.open(app.settings.ledger_db_url)
        op = ledger.begin("user_activity", "resize", who="test:holder")
        r2 = app.cli("stop", "user_activity")
        assert r2.returncode == 1 and "operation resize" in r2.stderr and "asked by test:holder" in r2.stderr
        ledger.finish(op, "succeeded")

        first = driver.running(app.settings, "user_activity")
        assert first is not None
        # the driver is killed -9 while a compaction holds the app's lease: the supervisor must
        # not launch a driver into the checkpoint the compaction is changing, only after it
        compact = subprocess.Popen([*CLI, "compact", "user_activity", "--json"], env=app.env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while (ledger.lease("user_activity") or {}).get("kind") != "compact":
            assert compact.poll() is None and time.time() < deadline, compact.communicate()
            time.sleep(0.1)
        victims = [first.process(), *first.process().children(recursive=True)]
        for p in victims:
            p.kill()
        psutil.wait_procs(victims, timeout=10)
        out, err = compact.communicate(timeout=600)
        assert compact.returncode == 0, out + err
        compacted = ledger.get_operation(json.loads(out)["operation_id"])
        deadline = time.time() + 120
        while not [o for o in ledger.operations("user_activity", limit=10)
                   if o["kind"] == "supervisor-launch" and o["id"] > compacted["id"]]:
            assert time.time() < deadline, manager.log_path(app.settings, "supervisor").read_text()[-3000:]
            time.sleep(0.5)
        launches = [o for o in ledger.operations("user_activity", limit=20) if o["kind"] == "supervisor-launch"]
        assert [o["started_at"] >= compacted["ended_at"] for o in launches[:1]] == [True]
        assert "holds user_activity's lease" in manager.log_path(app.settings, "supervisor").read_text()

        app.produce(10_000, seed=8)
        deadline = time.time() + 400
        while sum(layout.committed_offsets(app.checkpoint).get("user-events", {}).values()) < 30_000:
            assert time.time() < deadline, driver.log_tail(app.settings, "user_activity", 40)
            time.sleep(1)
        second = driver.running(app.settings, "user_activity")
        assert second is not None and second.pid != first.pid

        # already at 2: a no-op resize (the restart and live resizes themselves: test_resize.py)
        r = app.cli("resize", "user_activity", "--parallelism", "2", "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["noop"] is True, r.stderr[-2000:]
        assert driver.running(app.settings, "user_activity").pid == second.pid
        # no scale window is active: the schedule wants the default (2), which it has
        r = app.cli("scale-windows", "user_activity", "--dry-run", "--json")
        assert r.returncode == 0, r.stderr[-2000:]
        assert {k: json.loads(r.stdout)[k] for k in ("action", "current", "target")} == {
            "action": "none", "current": 2, "target": 2}
        r = app.cli("resize", "user_activity", "--parallelism", "5")
        assert r.returncode == 2 and "outside the spec's range [1, 4]" in r.stderr
        assert ledger.desired("user_activity")["parallelism"] == 2
        deadline = time.time() + 30
        while ledger.observed("user_activity")["executors"] != 2:  # reported with the batch's commit
            assert time.time() < deadline, ledger.observed("user_activity")
            time.sleep(0.5)
        assert ledger.observed("user_activity")["parallelism"] == 2

        r = app.cli("stop", "user_activity", "--json", timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert driver.running(app.settings, "user_activity") is None
        report = app.check()
        assert report["ok"] and report["input_records"] == 30_000, report

        ops = list(reversed(ledger.operations("user_activity", limit=50)))
        kinds = [(o["kind"], o["outcome"]) for o in ops]
        assert kinds[0] == ("deploy", "succeeded")
        assert ("supervisor-launch", "succeeded") in kinds and ("driver-exit", "failed") in kinds
        assert kinds.count(("supervisor-launch", "succeeded")) == 2
        cli_resizes = [o for o in ops if o["kind"] == "resize" and o["requested_by"].startswith("cli:")]
        assert [(o["outcome"], o["after"].get("noop")) for o in cli_resizes] == [("succeeded", True)]
        assert ("stop", "refused") in kinds and kinds[-1][0] in ("stop", "supervisor-stop")
        assert any(k == ("stop", "succeeded") for k in kinds)
        assert ledger.observed("user_activity")["status"] == "stopped"
        ledger.close()
    finally:
        manager.down(app.settings, only=["supervisor"])  # also stops any driver it launched
        assert driver.running(app.settings, "user_activity") is None


def test_a_supervisor_of_another_host_is_waited_for_until_its_lease_lapses(platform_factory) -> None:
    """Supervisor A runs as if on another machine (its own hostname, in a UTS namespace), so that
    nothing on this host can tell whether it still runs: once it is killed, supervisor B waits for
    A's lease to lapse (``STREAMOPS_SUPERVISOR_LEASE_S``, 5 s here) and only then takes it over. A
    second supervisor beside a live A is refused by the state dir's lock; B's clean stop lets the
    lease go at once."""
    import os
    import signal
    import sys

    from streamops.ledger import supervisor_lease
    from streamops.lifecycle.supervisor import heartbeat_file
    from tests.fixtures.apps import until

    s = platform_factory("lease-hosts")
    env = {**os.environ, **s.env(), "STREAMOPS_SUPERVISOR_LEASE_S": "5"}
    s.state_dir.mkdir(parents=True, exist_ok=True)
    beat = heartbeat_file(s)

    def started(name: str, argv: list[str]) -> subprocess.Popen:
        log = open(s.state_dir / f"{name}.log", "wb")  # noqa: SIM115 - the process's, while it runs
        return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    # unshare(1) execs in place: A's pid is the supervisor's
    a = started("a", ["unshare", "--user", "--map-root-user", "--uts", "sh", "-c",
                      'hostname machine-a && exec "$0" -m streamops.cli supervise', sys.executable])
    b = None
    ledger = Ledger.open(s.ledger_db_url)
    try:
        until("A's heartbeat naming its lease", lambda: beat.exists()
              and json.loads(beat.read_text()).get("lease") == f"machine-a:{a.pid}, term 1", timeout=60, every=0.2)
        second = subprocess.run([*CLI, "supervise"], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert second.returncode == 1 and "Only one supervisor may run per state dir" in second.stderr, second.stderr

        os.kill(a.pid, signal.SIGKILL)
        a.wait(timeout=10)
        held = supervisor_lease.current(ledger)
        assert (held.holder, held.host, held.term) == (f"machine-a:{a.pid}", "machine-a", 1)
        b = started("b", [*CLI, "supervise"])
        until("B's heartbeat naming its lease", lambda: json.loads(beat.read_text()).get("lease", "").endswith(
            f":{b.pid}, term 2"), timeout=60, every=0.2)
        takes = ledger.operations(supervisor_lease.PLATFORM, kind="supervisor-lease")
        assert [(o["params"]["term"], o["params"]["reason"], o["params"]["previous"]) for o in reversed(takes)] == [
            (1, "free", None), (2, "expired", f"machine-a:{a.pid}")], takes
        assert takes[0]["started_at"] >= held.expires_at, "B took the lease before A's had lapsed"
        assert "another supervisor holds the lease: machine-a:" in (s.state_dir / "b.log").read_text()

        b.send_signal(signal.SIGTERM)
        assert b.wait(timeout=60) == 0
        assert supervisor_lease.current(ledger).expired  # a clean stop hands it on at once
    finally:
        ledger.close()
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=10)
