"""State maintenance on a real broker + Spark cluster: compaction (stopped and while running),
restores after it, and rebuilding the checkpoint from the changelog with other state partitions.
Every step ends with `check`: state, changelog, output and DLQ equal the plain-Python fold."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from streamops.checkpoints import compact as cc
from streamops.checkpoints import layout
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


def _json(r) -> dict:
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return json.loads(r.stdout)


@pytest.mark.timeout(1800)
def test_compaction_stopped_and_running_then_restores_are_exact(app_factory) -> None:
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
            savepoints.append(_json(app.cli("savepoint", APP, "--json")))
        finally:
            done.set()
            feeder.join()
        assert live["running"] and live["installed"], live
        assert driver.running(app.settings, APP).pid == pid
        assert layout.last_committed_batch(ckpt) > live["batch_id"]  # batches went on meanwhile
        r = app.cli("stop", APP, "--json", timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        app.produce(1_000, users=1500, seed=90)
        app.run_to_end()  # restarts from the live-compacted checkpoint
        _assert_exact(app)

        # the savepoint from before the compactions is intact (restore's dry run re-hashes every
        # file: compaction must not touch savepoints); the one taken of the live-compacted
        # checkpoint restores and runs on exactly
        plan = _json(app.cli("restore", APP, savepoints[0]["id"], "--dry-run", "--json"))
        assert plan["dry_run"] and plan["verified"] and plan["batch_id"] == savepoints[0]["batch_id"], plan
        r = app.cli("restore", APP, savepoints[1]["id"], "--json", timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        app.run_to_end()
        _assert_exact(app)
    finally:
        ledger.close()


@pytest.mark.timeout(1200)
def test_rebuild_from_changelog_into_other_state_partitions(app_factory) -> None:
    app = app_factory("ua-rebuild", master=LOCAL)
    app.produce(6_000, users=1500, seed=61)
    app.run_to_end()
    ckpt = app.checkpoint
    keys = {v["view"]: v["expected"] for v in _assert_exact(app)["views"]}["changelog"]

    # dry run first: the plan, and nothing changes
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
    ledger = Ledger.open(app.settings.ledger_db_url)
    try:
        op = ledger.operations(APP, limit=1)[0]
        assert op["kind"] == "rebuild-state" and op["outcome"] == "succeeded" and op["after"]["keys"] == keys
    finally:
        ledger.close()

    # the app continues from the rebuilt checkpoint, with 2 state partitions
    app.produce(3_000, users=2500, seed=95)
    app.run_to_end()
    _assert_exact(app)
    assert sorted(p for _o, p in cc.partitions(ckpt)) == [0, 1]

    r = app.cli("rebuild-state", APP, "--state-partitions", "2")  # --from-changelog is required
    assert r.returncode == 2 and "--from-changelog" in r.stderr
