"""Savepoint while running, keep running, restore: exact state, no DLQ record twice, audited."""

from __future__ import annotations

import json
import threading
import time

from streamops.checkpoints import layout
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.platform import manager

APP = "user_activity"


def _committed(app) -> int:
    return sum(layout.committed_offsets(app.checkpoint).get("user-events", {}).values())


def _wait_committed(app, n: int, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while _committed(app) < n:
        assert time.time() < deadline, driver.log_tail(app.settings, APP, 40)
        time.sleep(1)


def test_savepoint_while_running_then_restore_is_exact(app_factory) -> None:
    app = app_factory("ua-savepoint", master="local[2]")  # the cluster adds nothing under test here
    app.produce(20_000, seed=31)
    manager.up(app.settings, only=["supervisor"])
    try:
        r = app.cli("deploy", APP, "--parallelism", "1", "--json", timeout=420)
        assert r.returncode == 0, r.stderr[-3000:]
        _wait_committed(app, 20_000)
        pid = driver.running(app.settings, APP).pid

        # events keep arriving while the savepoint is taken
        feeder = threading.Thread(target=lambda: [app.produce(2_000, seed=40 + i) for i in range(5)])
        feeder.start()
        r = app.cli("savepoint", APP, "--json")
        assert r.returncode == 0, r.stderr[-3000:]
        sp = json.loads(r.stdout)
        feeder.join()
        assert sp["batch_id"] >= 0 and sp["files"] > 0 and len(sp["sha256"]) == 64
        _wait_committed(app, 30_000)
        assert layout.last_committed_batch(app.checkpoint) > sp["batch_id"]  # it kept running
        assert driver.running(app.settings, APP).pid == pid

        r = app.cli("savepoints", APP, "--json")
        assert [s["id"] for s in json.loads(r.stdout)] == [sp["id"]]

        # a reset of the running app is refused (it would replace the checkpoint under it)
        aside = app.settings.state_dir / "checkpoints-aside"
        r = app.cli("reset", APP, "--to-earliest", "--json")
        assert r.returncode == 2 and "is running" in r.stderr and "--stop-first" in r.stderr, r.stderr
        assert driver.running(app.settings, APP).pid == pid and not aside.exists()
        assert layout.start_offsets(app.checkpoint) is None

        ledger = Ledger.open(app.settings.ledger_db_url)
        ops_before = len(ledger.operations(APP, limit=100))
        r = app.cli("restore", APP, sp["id"], "--dry-run", "--json")
        assert r.returncode == 0, r.stderr[-3000:]
        plan = json.loads(r.stdout)
        assert plan["dry_run"] and plan["batch_id"] == sp["batch_id"] and plan["state_version"] == sp["batch_id"] + 1
        assert {(p["topic"], str(p["partition"])): p["restore_to"] for p in plan["offsets"]} == {
            ("user-events", p): o for p, o in sp["offsets"]["user-events"].items()}
        assert plan["records_to_reprocess"] == 30_000 - sum(sp["offsets"]["user-events"].values())
        assert len(ledger.operations(APP, limit=100)) == ops_before  # the dry run changed nothing
        assert driver.running(app.settings, APP).pid == pid
        assert not (app.settings.state_dir / "checkpoints-aside").exists()

        r = app.cli("restore", APP, sp["id"], "--json", timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads(r.stdout)
        aside = out["aside"]
        assert layout.last_committed_batch(app.checkpoint) is not None
        assert driver.running(app.settings, APP).pid != pid
        _wait_committed(app, 30_000)
        assert layout.last_committed_batch(app.checkpoint) > sp["batch_id"]

        r = app.cli("stop", APP, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        report = app.check()
        assert report["ok"] and report["input_records"] == 30_000, report  # DLQ: no duplicates either

        restore_op = next(o for o in ledger.operations(APP, limit=100) if o["kind"] == "restore")
        assert restore_op["outcome"] == "succeeded" and restore_op["params"] == {"savepoint": sp["id"]}
        assert restore_op["after"]["aside"] == aside and restore_op["after"]["rewind_marker"]["rewind"] is True
        from pathlib import Path

        assert (Path(aside) / "commits").is_dir()  # the replaced checkpoint is kept
        ledger.close()
    finally:
        manager.down(app.settings, only=["supervisor"])
