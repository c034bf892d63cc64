"""Resize 1 -> 2 by restart (to a warm standby), then 2 -> 1 -> 2 live, while events arrive at a
steady rate, then live again with no input at all (an idle query runs no batch), then `check` exact once input resumes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from streamops.app.dir import AppDir
from streamops.checkpoints import layout
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.lifecycle.supervisor import heartbeat_file
from streamops.platform import manager
from streamops.spark import ui
from streamops.spark.driver.loop import REFUSED
from tests.fixtures.apps import Feeder

APP = "user_activity"


class _Heartbeats(threading.Thread):
    """The oldest age of the supervisor's heartbeat seen, and the apps it said were busy."""

    def __init__(self, settings) -> None:
        super().__init__(daemon=True)
        self.path, self.halt, self.oldest, self.busy = heartbeat_file(settings), threading.Event(), 0.0, set()

    def run(self) -> None:
        while not self.halt.wait(0.5):
            beat = json.loads(self.path.read_text())
            self.oldest = max(self.oldest, time.time() - beat["heartbeat"])
            self.busy |= set(beat.get("busy", []))


def _executors_seen(ledger: Ledger, n: int, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while (ledger.observed(APP) or {}).get("executors") != n:
        assert time.time() < deadline, ledger.observed(APP)
        time.sleep(0.5)


def _driver_ui(app) -> tuple[str, str]:
    hb = json.loads(AppDir.of(app.settings, APP).heartbeat.read_text())
    return hb["ui_url"], hb["app_id"]


def _state_moves_to(app, new_executors: set[str], after_stage: int, state_partitions: int,
                    timeout: float = 90) -> dict[int, set[str]]:
    """Wait for a stateful stage (one task per state partition) run partly on a new executor."""
    deadline = time.time() + timeout
    while True:
        stages = ui.stage_executors(*_driver_ui(app), num_tasks=state_partitions, after_stage=after_stage)
        if any(ex & new_executors for ex in stages.values()):
            return stages
        assert time.time() < deadline, f"new executors {new_executors} ran no stateful task: {stages}"
        time.sleep(1)


def test_resize_each_strategy_under_steady_load_is_exact(app_factory) -> None:
    app = app_factory("ua-resize")
    app.produce(5_000, seed=1)
    manager.up(app.settings, only=["supervisor"])
    ledger = Ledger.open(app.settings.ledger_db_url)
    feeder = Feeder(app)
    try:
        r = app.cli("deploy", APP, "--parallelism", "1", "--json", timeout=420)
        assert r.returncode == 0, r.stderr[-3000:]
        # a second driver started by hand beside the supervisor's is refused before it does anything
        running = driver.running(app.settings, APP)
        t0 = time.monotonic()
        second = subprocess.run([sys.executable, "-m", "streamops.spark.driver", "--app", APP],
                                check=False, env=app.env, capture_output=True, text=True, timeout=120)
        assert second.returncode == REFUSED, second.stderr[-3000:]
        assert f"is in use by pid {running.pid}" in second.stderr and f"streamops stop {APP}" in second.stderr
        assert time.monotonic() - t0 < 60  # refused at once: no Spark session was started
        assert driver.running(app.settings, APP).pid == running.pid
        feeder.start()
        pids = {driver.running(app.settings, APP).pid}
        # a restart resize out, then live in and out (a restart resize is the same handover either
        # way; test_airflow_operations resizes restart and live through the DAGs as well)
        for strategy, n in (("restart", 2), ("live", 1), ("live", 2)):
            before = layout.last_committed_batch(app.checkpoint)
            pid = driver.running(app.settings, APP).pid
            where = _driver_ui(app)
            old_executors, first_stage = set(ui.executors(*where)), ui.last_stage(*where)
            beats = _Heartbeats(app.settings)  # the supervisor's, while the resize runs
            beats.start()
            try:
                r = app.cli("resize", APP, "--parallelism", str(n), "--strategy", strategy, "--json", timeout=420)
            finally:
                beats.halt.set()
                beats.join()
            assert r.returncode == 0, r.stderr[-3000:] + driver.log_tail(app.settings, APP, 40)
            # the handover (a standby's start, minutes) runs beside the loop: it beats all along
            assert beats.oldest < 10, f"the supervisor's heartbeat was {beats.oldest:.0f} s old during the resize"
            if strategy == "restart":
                assert APP in beats.busy, "the handover ran in the loop, not beside it"
            out = json.loads(r.stdout)
            assert (out["parallelism"], out["noop"], out["strategy"]) == (n, False, strategy)
            assert layout.last_committed_batch(app.checkpoint) > before
            _executors_seen(ledger, n)
            now = driver.running(app.settings, APP).pid
            if strategy == "live":
                assert now == pid, "a live resize must not restart the driver"
                deadline = time.time() + 60  # a removed executor leaves the UI's list a bit later
                while len(active := set(ui.executors(*where))) != n:
                    assert time.time() < deadline, ui.executors(*where)
                    time.sleep(0.5)
                if n == 2:  # the new executor really takes state partitions over
                    stages = _state_moves_to(app, active - old_executors, first_stage, 4)
                    assert all(ex <= active for ex in stages.values()), stages
                    # ... after its warm-up: the plugin held it until the warm-up job was queued
                    (new,) = active - old_executors
                    assert ui.first_job_on(*where, new, first_stage) == f"streamops warm-up of executor {new}"
            else:
                assert now not in pids, "a restart resize runs a new driver"
            pids.add(now)
        feeder.halt.set()
        feeder.join()
        total = 5_000 + feeder.sent
        app.caught_up(total)
        # idle: no input arrives, so no batch runs and no batch boundary comes; a live resize must
        # converge anyway, in both directions, and without a batch
        idle_batch = layout.last_committed_batch(app.checkpoint)
        where = _driver_ui(app)
        for n in (1, 2):
            t0 = time.monotonic()
            r = app.cli("resize", APP, "--parallelism", str(n), "--strategy", "live", "--json", timeout=180)
            assert r.returncode == 0, r.stderr[-3000:] + driver.log_tail(app.settings, APP, 40)
            out = json.loads(r.stdout)
            assert (out["parallelism"], out["noop"], out["strategy"]) == (n, False, "live")
            print(f"idle live resize to {n}: converged in {time.monotonic() - t0:.1f} s")
            _executors_seen(ledger, n, timeout=90)
            deadline = time.time() + 60
            while len(ui.executors(*where)) != n:
                assert time.time() < deadline, ui.executors(*where)
                time.sleep(0.5)
            assert layout.last_committed_batch(app.checkpoint) == idle_batch, "converged without any batch"
        # input resumes: the resized app goes on exactly
        app.produce(2_000, seed=9_000)
        total += 2_000
        app.caught_up(total)
        r = app.cli("stop", APP, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        report = app.check()
        assert report["ok"] and report["input_records"] == total, report
        kinds = [(o["kind"], o["outcome"]) for o in ledger.operations(APP, limit=100)]
        assert kinds.count(("supervisor-resize-live", "succeeded")) == 4
        assert kinds.count(("supervisor-resize", "succeeded")) == 1
        # restart resizes hand over to a warm standby driver started before the old one stopped
        handovers = [o["params"].get("standby") for o in ledger.operations(APP, limit=100)
                     if o["kind"] == "supervisor-resize"]
        assert handovers == [True], handovers
    finally:
        feeder.halt.set()
        ledger.close()
        manager.down(app.settings, only=["supervisor"])
