"""State maintenance on a real broker + Spark, one app through every step: compaction (stopped and
while running), savepoints (stopped and while running, events arriving), a running app's reset
refused, restore of the running app, and rebuilding the checkpoint from the changelog with other
state partitions. Every step ends with `check`: state, changelog, output and DLQ equal the
plain-Python fold. (One app for all: each new app costs a broker, a first run and a check.)"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from streamops.checkpoints import compact as cc
from streamops.checkpoints import layout
from streamops.kafka.admin import end_offsets
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.platform import manager

APP = "user_activity"
SMALL_BATCHES = ("--max-offsets-per-trigger", "700", "--trigger-interval", "1 second")
# The drivers (also the one the supervisor launches for the live compaction) use an in-process
# Spark (real Spark, real RocksDB state files): what is under test here is the checkpoint, and the
# cluster's executor start-up would only add minutes.
LOCAL = "local[2]"


def _files(ckpt: Path) -> dict[str, tuple[int, float]]:
    return {str(f.relative_to(ckpt)): (f.stat().st_size, f.stat().st_mtime) for f in ckpt.rglob("*") if f.is_file()}


def _assert_exact(app) -> dict:
    report = app.check()
    assert report["ok"], json.dumps(report["views"], indent=1)[:3000]
    return report


def _total_input(app) -> int:
    return sum(hi for _lo, hi in end_offsets(app.settings.kafka_bootstrap, "user-events").values())


def _wait_committed(app, n: int, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while sum(layout.committed_offsets(app.checkpoint).get("user-events", {}).values()) < n:
        assert time.time() < deadline, driver.log_tail(app.settings, APP, 40)
        time.sleep(1)


def _json(r) -> dict:
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return json.loads(r.stdout)


@pytest.mark.timeout(1800)
def test_compaction_savepoints_restore_and_rebuild_are_exact(app_factory) -> None:
    app = app_factory("ua-compact", master=LOCAL)
    manager.up(app.settings, only=["supervisor"])
    ledger = Ledger.open(app.settings.ledger_db_url)
    try:
        # a long changelog chain: many small batches over two driver runs (each reloads the stores)
        savepoints = []
        for i in range(2):
            app.produce(5_000, users=1500, seed=60 + i)
            app.run_to_end(*SMALL_BATCHES)
            if i == 0:
                savepoints.append(_json(app.cli("savepoint", APP, "--json")))
        ckpt = app.checkpoint
        batch = layout.last_committed_batch(ckpt)
        chains = {k: ps.chain(batch + 1) for k, ps in cc.partitions(ckpt).items()}
        assert len(chains) == 4 and max(n for _s, n in chains.values()) >= 5, chains

        # dry run: the plan, and not one file changed
        before = _files(ckpt)
        plan = _json(app.cli("compact", APP, "--dry-run", "--json"))
        assert plan["dry_run"] and plan["batch_id"] == batch and plan["state_version"] == batch + 1
        assert not plan["running"] and sorted(plan["install_snapshots"]) == ["0/0", "0/1", "0/2", "0/3"]
        assert plan["delete_files"] > 0
        assert _files(ckpt) == before

        # compact a stopped app: one snapshot per partition, nothing older left
        out = _json(app.cli("compact", APP, "--json", timeout=600))
        assert out["bytes_after"] < out["bytes_before"] and out["freed_bytes"] > 0
        assert out["restore_seconds_before"] > 0 and out["restore_seconds_after"] > 0
        for (_op, part), ps in cc.partitions(ckpt).items():
            assert sorted(ps.zips) == [batch + 1], (part, sorted(ps.zips), sorted(ps.changelogs))
            assert not [v for v in ps.changelogs if v <= batch + 1]
            assert {f.name for f in ps.ssts} == cc.zip_ssts(ps.zips[batch + 1])  # no orphan SST left
            assert ps.chain(batch + 1) == (batch + 1, 0)
        assert sorted(int(f.name) for f in (ckpt / "offsets").iterdir() if f.name.isdigit()) == [batch - 1, batch]
        _assert_exact(app)  # the state read back from the installed snapshots
        op = ledger.operations(APP, limit=1)[0]
        assert op["kind"] == "compact" and op["outcome"] == "succeeded" and op["after"]["installed"]

        # compaction while the app runs (from the compacted checkpoint) and events arrive: it keeps
        # running, nothing is lost
        r = app.cli("deploy", APP, "--parallelism", "1", "--json", timeout=420)
        assert r.returncode == 0, r.stderr[-3000:]
        pid = driver.running(app.settings, APP).pid
        deployed_at = layout.last_committed_batch(ckpt)
        done = threading.Event()

        def feed() -> None:  # events keep arriving, a few hundred per batch, until the compaction is over
            seed = 80
            while not done.is_set():
                app.produce(400, users=1500, seed=seed)
                seed += 1
                done.wait(1.0)

        feeder = threading.Thread(target=feed)
        feeder.start()
        # a few batches after the restart, so the chain since the store's last snapshot is not empty
        deadline = time.time() + 300
        while layout.last_committed_batch(ckpt) < deployed_at + 4:
            assert time.time() < deadline, driver.log_tail(app.settings, APP, 40)
            time.sleep(0.5)
        try:
            live = _json(app.cli("compact", APP, "--json", timeout=600))
            sp = _json(app.cli("savepoint", APP, "--json"))  # of the live-compacted checkpoint, events arriving
            savepoints.append(sp)
        finally:
            done.set()
            feeder.join()
        assert live["running"] and live["installed"], live
        assert driver.running(app.settings, APP).pid == pid
        assert layout.last_committed_batch(ckpt) > live["batch_id"]  # batches went on meanwhile
        assert sp["batch_id"] >= 0 and sp["files"] > 0 and len(sp["sha256"]) == 64
        assert [s["id"] for s in _json(app.cli("savepoints", APP, "--json"))] == [sp["id"], savepoints[0]["id"]]
        total = _total_input(app)
        _wait_committed(app, total)
        assert layout.last_committed_batch(ckpt) > sp["batch_id"]  # it kept running after the savepoint

        # a reset of the running app is refused (it would replace the checkpoint under it)
        aside = app.settings.state_dir / "checkpoints-aside"
        set_aside = sorted(aside.iterdir()) if aside.exists() else []
        r = app.cli("reset", APP, "--to-earliest", "--json")
        assert r.returncode == 2 and "is running" in r.stderr and "--stop-first" in r.stderr, r.stderr
        assert driver.running(app.settings, APP).pid == pid
        assert (sorted(aside.iterdir()) if aside.exists() else []) == set_aside
        assert layout.start_offsets(ckpt) is None

        # restore the running app to the savepoint: the dry run's plan changes nothing, then the
        # driver is replaced and the batches after the savepoint are written again, exactly once
        ops_before = len(ledger.operations(APP, limit=100))
        plan = _json(app.cli("restore", APP, sp["id"], "--dry-run", "--json"))
        assert plan["dry_run"] and plan["batch_id"] == sp["batch_id"] and plan["state_version"] == sp["batch_id"] + 1
        assert {(p["topic"], str(p["partition"])): p["restore_to"] for p in plan["offsets"]} == {
            ("user-events", p): o for p, o in sp["offsets"]["user-events"].items()}
        assert plan["records_to_reprocess"] == total - sum(sp["offsets"]["user-events"].values())
        assert len(ledger.operations(APP, limit=100)) == ops_before and driver.running(app.settings, APP).pid == pid
        out = _json(app.cli("restore", APP, sp["id"], "--json", timeout=600))
        assert driver.running(app.settings, APP).pid != pid
        _wait_committed(app, total)
        assert layout.last_committed_batch(ckpt) > sp["batch_id"]
        r = app.cli("stop", APP, "--json", timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert _assert_exact(app)["input_records"] == total  # the DLQ too: no record twice
        restore_op = next(o for o in ledger.operations(APP, limit=100) if o["kind"] == "restore")
        assert restore_op["outcome"] == "succeeded" and restore_op["params"] == {"savepoint": sp["id"]}
        assert restore_op["after"]["aside"] == out["aside"] and restore_op["after"]["rewind_marker"]["rewind"] is True
        assert (Path(out["aside"]) / "commits").is_dir()  # the replaced checkpoint is kept

        # the savepoint from before the compactions is intact (restore's dry run re-hashes every
        # file: compaction must not touch savepoints)
        plan = _json(app.cli("restore", APP, savepoints[0]["id"], "--dry-run", "--json"))
        assert plan["dry_run"] and plan["verified"] and plan["batch_id"] == savepoints[0]["batch_id"], plan

        # rebuild the checkpoint from the changelog into 2 state partitions (the aggregate path's
        # seeding; test_apps rebuilds update jobs)
        keys = {v["view"]: v["expected"] for v in _assert_exact(app)["views"]}["changelog"]
        before = _files(ckpt)
        plan = _json(app.cli("rebuild-state", APP, "--from-changelog", "--state-partitions", "2", "--dry-run", "--json"))
        assert plan["dry_run"] and plan["state_partitions_before"] == 4 and plan["state_partitions_after"] == 2
        assert plan["changelog_keys"] == keys
        end = layout.committed_offsets(ckpt)["user-events"]
        assert {o["partition"]: o["start_at"] for o in plan["offsets"]} == end
        assert _files(ckpt) == before
        out = _json(app.cli("rebuild-state", APP, "--from-changelog", "--state-partitions", "2", "--json", timeout=600))
        assert Path(out["aside"]).is_dir() and out["state_partitions_after"] == 2 and out["changelog_keys"] == keys
        assert sorted(p for _o, p in cc.partitions(ckpt)) == [0, 1]
        assert layout.last_committed_batch(ckpt) == 0 and layout.committed_offsets(ckpt)["user-events"] == end
        _assert_exact(app)  # state at batch 0 == the fold of everything consumed so far
        op = ledger.operations(APP, limit=1)[0]
        assert op["kind"] == "rebuild-state" and op["outcome"] == "succeeded" and op["after"]["keys"] == keys
        r = app.cli("rebuild-state", APP, "--state-partitions", "2")  # --from-changelog is required
        assert r.returncode == 2 and "--from-changelog" in r.stderr

        # the app continues from the rebuilt checkpoint, with 2 state partitions
        app.produce(3_000, users=2500, seed=95)
        app.run_to_end()
        _assert_exact(app)
        assert sorted(p for _o, p in cc.partitions(ckpt)) == [0, 1]
    finally:
        ledger.close()
