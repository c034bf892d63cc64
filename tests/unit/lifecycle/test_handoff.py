"""``ledger.handoff``: an operation on a running app hands its two waits over (as an Airflow task
does) and is resumed between them: one ledger entry, its lease held throughout (by no process
while a waiter has it), the stop journaled once, ``after`` kept for the end. Real ledger and lock;
the supervisor's convergence (``operations.poll``) is replaced by a switch."""

from __future__ import annotations

import json
import os
import time

import pytest

from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger, handoff
from streamops.ledger.store import OperationInProgress
from streamops.lifecycle import operations as ops
from streamops.lifecycle.replace import Replacement
from streamops.settings import Settings
from streamops.spec import AppSpec

SPEC = AppSpec(name="app1", job="jobs.x", input_topics=("in",), output_topic="o", changelog_topic="c",
               dlq_topic="d", input_partitions=6, state_partitions=4)


#: the app's Kafka clients (none is made here)
KAFKA = KafkaConfig.plaintext("127.0.0.1:1")


def no_broker(_kafka: KafkaConfig, _app: str) -> None:
    """No broker here: there is no transaction to abort."""


def operation(settings: Settings, ledger: Ledger) -> dict:
    """The shape of restore/reset/rebuild: stop, replace, restart, ``after``."""
    with ledger.operation("app1", "rebuild-state", {}, who="t") as rec, \
            Replacement(settings, SPEC, ledger, rec.op, kafka=KAFKA,
                        running=ledger.desired("app1")["status"] == "running", who="t", timeout=60,
                        abort_open=no_broker) as swap:
        parallelism = swap.stop()
        swap.step("install")
        swap.restart(parallelism, batch_before=0)
        rec.after = {"keys": 7}
    return {"operation_id": rec.id, "parallelism": parallelism}


@pytest.fixture
def setup(tmp_path, monkeypatch):
    settings = Settings(home=tmp_path)
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "supervisor.json").write_text(json.dumps({"heartbeat": time.time() + 3600}))
    converged = {"now": False}
    monkeypatch.setattr(ops, "poll", lambda *_a: {} if converged["now"] else None)
    ledger = Ledger.open(settings.ledger_db_url)
    ledger.set_desired("app1", status="running", parallelism=3)
    yield settings, ledger, converged
    ledger.close()


def test_both_waits_are_handed_over_and_the_operation_resumed_between_them(setup) -> None:
    settings, ledger, converged = setup
    with pytest.raises(handoff.OperationDeferred) as waiting, handoff.deferrable():
        operation(settings, ledger)
    pending = waiting.value.pending
    op_id = pending["operation_id"]
    assert pending["kind"] == "stop" and ledger.desired("app1")["status"] == "stopped"
    row, lease = ledger.get_operation(op_id), ledger.lease("app1")
    assert row["outcome"] == "running" and [s["step"] for s in row["journal"]] == ["stop", "handed-off"]
    assert lease["operation_id"] == op_id and lease["pid"] is None  # held, by the waiter
    with pytest.raises(OperationInProgress):  # nobody else gets the app meanwhile
        ledger.begin("app1", "reset", who="other")

    # resumed before the app stopped: handed over again, nothing more done
    with pytest.raises(handoff.OperationDeferred), handoff.deferrable(resume=op_id):
        operation(settings, ledger)
    assert [s["step"] for s in ledger.get_operation(op_id)["journal"]] == ["stop", "handed-off", "handed-off"]

    converged["now"] = True  # stopped
    with handoff.deferrable(resume=op_id) as mode:
        out = operation(settings, ledger)
    assert out == {"operation_id": op_id, "parallelism": 3}
    assert mode.handed_off[op_id]["kind"] == "deploy" and mode.handed_off[op_id]["parallelism"] == 3
    row = ledger.get_operation(op_id)
    assert [s["step"] for s in row["journal"]] == ["stop", "handed-off", "handed-off", "install", "restart",
                                                   "handed-off"]
    assert row["outcome"] == "running" and row["after"] == {"keys": 7}  # not finished: the start is awaited
    assert ledger.desired("app1")["status"] == "running" and ledger.lease("app1")["pid"] is None

    ledger.finish_handed_off(op_id, "succeeded")
    row = ledger.get_operation(op_id)
    assert (row["outcome"], row["after"], ledger.lease("app1")) == ("succeeded", {"keys": 7}, None)


def test_without_deferrable_the_operation_waits_itself(setup) -> None:
    """The CLI's way, unchanged: one call, finished, no hand-over in the journal."""
    settings, ledger, converged = setup
    converged["now"] = True
    out = operation(settings, ledger)
    row = ledger.get_operation(out["operation_id"])
    assert row["outcome"] == "succeeded" and [s["step"] for s in row["journal"]] == ["stop", "install", "restart"]


def test_an_operation_finished_meanwhile_is_not_resumed(setup) -> None:
    settings, ledger, _converged = setup
    with pytest.raises(handoff.OperationDeferred) as waiting, handoff.deferrable():
        operation(settings, ledger)
    op_id = waiting.value.pending["operation_id"]
    ledger.finish_handed_off(op_id, "failed", error="did not stop")
    with pytest.raises(OperationInProgress, match="can no longer be resumed"), handoff.deferrable(resume=op_id):
        operation(settings, ledger)


def test_a_resumed_operation_holds_its_lease_by_its_process(setup) -> None:
    """Between the waits the work runs in a process again: killed there, the lease is released
    and the operation recorded failed (as for any operation whose process died)."""
    settings, ledger, _converged = setup
    with pytest.raises(handoff.OperationDeferred) as waiting, handoff.deferrable():
        operation(settings, ledger)
    op_id = waiting.value.pending["operation_id"]
    child = os.fork()
    if child == 0:  # the resuming task, killed right after it took the operation back
        try:
            Ledger.open(settings.ledger_db_url).take_back(op_id, "app1", "rebuild-state")
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    assert ledger.lease("app1")["pid"] == child
    other = ledger.begin("app1", "reset", who="other")  # the dead holder's lease is broken at once
    row = ledger.get_operation(op_id)
    assert row["outcome"] == "failed" and "steps done: stop, handed-off" in row["error"]
    ledger.finish(other, "succeeded")
