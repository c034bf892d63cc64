"""A handed-over reprocess whose waiter is gone is ended as its waiter would have ended it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.outputs import reprocess_spec
from streamops.checkpoints import layout
from streamops.host.process import start_ticks
from streamops.ledger import Ledger, OperationInProgress
from streamops.reset.reprocess import chain_dir, settle_lost_run, waiting_run
from streamops.reset.reprocess_results import WaitingRun
from streamops.settings import Settings
from streamops.spec import AppSpec

SPEC = AppSpec(name="ua", job="jobs.x", input_topics=("in",), output_topic="out", changelog_topic="cl",
               dlq_topic="dlq")
PLAN = {"output_version": "v2", "records": 300, "output_topic": "out.v2", "checkpoint": "",
        "start": {"in": {"0": 0, "1": 100}}, "stop": {"in": {"0": 100, "1": 300}}}


def _ended_process() -> tuple[int, int | None]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    ticks = start_ticks(proc.pid)
    proc.kill()
    proc.wait()
    return proc.pid, ticks


def _handed_over(ledger: Ledger, pid: int, ticks: int | None) -> int:
    """What ``reprocess`` leaves when its task defers: the run launched, the lease without a holder."""
    derived = reprocess_spec(SPEC, "v2")
    op = ledger.begin(derived.name, "reprocess", {"app": "ua"}, who="airflow:d/backfill__1/reprocess")
    ledger.step(op, "launched", pid=pid, ticks=ticks, at=time.time(), plan=PLAN, marker=7)
    ledger.hand_over(op, {"kind": "reprocess", "deadline": time.time() + 3600}, after=None)
    return op.id


def _committed(settings: Settings, offsets: dict) -> None:
    ckpt = checkpoint_dir(settings, reprocess_spec(SPEC, "v2"))
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "commits").mkdir()
    (ckpt / "offsets" / "0").write_text("\n".join(["v1", "{}", json.dumps(offsets)]))
    (ckpt / "commits" / "0").write_text("v1\n{}")


@pytest.mark.parametrize(("offsets", "outcome"), [
    ({"in": {"0": 100, "1": 300}}, "succeeded"),
    ({"in": {"0": 160, "1": 300}}, "succeeded"),  # a batch planned past the end; the driver killed before it clamped
    ({"in": {"0": 100, "1": 250}}, "failed")])
def test_a_lost_waiters_run_is_ended_by_what_its_driver_committed(tmp_path: Path, offsets, outcome) -> None:
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        op_id = _handed_over(ledger, *_ended_process())
        _committed(settings, offsets)
        derived = reprocess_spec(SPEC, "v2")
        with pytest.raises(OperationInProgress):  # what the next range ran into for up to an hour
            ledger.begin(derived.name, "reprocess", who="airflow:d/backfill__2/reprocess")
        assert waiting_run(ledger, SPEC, "v2") == WaitingRun(operation_id=op_id,
                                                            requested_by="airflow:d/backfill__1/reprocess")
        assert waiting_run(ledger, SPEC, "v3") is None  # another version: its own lease

        assert settle_lost_run(settings, SPEC, ledger, op_id, why="the task that waited for it is failed") == outcome
        row = ledger.get_operation(op_id)
        assert row["outcome"] == outcome and row["journal"][-1]["step"] == "settled"
        assert ledger.lease(derived.name) is None
        # succeeded: the next range (starting at this one's end) continues its state
        assert chain_dir(settings, derived, PLAN["stop"]).is_dir() == (outcome == "succeeded")
        if outcome == "succeeded":
            assert row["after"]["committed"] == 300 and "failed" in row["after"]["settled"]
            kept = chain_dir(settings, derived, PLAN["stop"])
            assert layout.committed_offsets(kept) == {"in": {0: 100, 1: 300}}  # the next range starts at the end
        else:
            assert "stopped before the end of the range: in[1] 250 < 300" in row["error"]
        ledger.begin(derived.name, "reprocess", who="airflow:d/backfill__2/reprocess")  # no longer refused
        with pytest.raises(Exception, match="not a reprocess run waiting"):
            settle_lost_run(settings, SPEC, ledger, op_id, why="again")
    finally:
        ledger.close()


def test_a_run_held_by_a_process_is_not_waiting(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        ledger.begin(reprocess_spec(SPEC, "v2").name, "reprocess", who="cli", pid=None)
        assert waiting_run(ledger, SPEC, "v2") is None  # running in a process (no launched step, not handed over)
    finally:
        ledger.close()
