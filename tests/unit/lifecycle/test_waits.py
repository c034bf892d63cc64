"""``lifecycle.waits``: an operation on a running app ends its step at each of its two waits and is
resumed between them, whoever waits (an Airflow task's trigger, the CLI's ``wait_here``): one
ledger entry, its lease held throughout (by no process while a trigger has it, by the CLI's
process while it waits), the stop journaled once, ``after`` kept for the end. Real ledger and
lock; the supervisor's convergence (``operations.poll``) is replaced by a switch."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

import pytest

from streamops.app.context import AppContext
from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger
from streamops.ledger.store import HandOver, OperationInProgress
from streamops.lifecycle import operations as ops
from streamops.lifecycle import waits
from streamops.lifecycle.replace import Replacement
from streamops.results import Result
from streamops.settings import Settings
from streamops.spec import AppSpec

SPEC = AppSpec(name="app1", job="jobs.x", input_topics=("in",), output_topic="o", changelog_topic="c",
               dlq_topic="d", input_partitions=6, state_partitions=4)


@dataclass(frozen=True)
class Rebuilt(Result):
    """The operation's result, typed as the real ones are (``streamops.results``)."""

    operation_id: int
    parallelism: int


#: the app's Kafka clients (none is made here)
KAFKA = KafkaConfig.plaintext("127.0.0.1:1")


def no_broker(_kafka: KafkaConfig, _app: str) -> None:
    """No broker here: there is no transaction to abort."""


def operation(settings: Settings, ledger: Ledger, resume: int | None = None) -> waits.Step:
    """The shape of restore/reset/rebuild's step: stop, replace, restart, ``after``."""
    try:
        with ledger.operation("app1", "rebuild-state", {}, who="t", resume=resume) as rec, \
                Replacement(AppContext(settings, SPEC, ledger, KAFKA), rec,
                            running=ledger.desired("app1")["status"] == "running", who="t", timeout=60,
                            abort_open=no_broker) as swap:
            parallelism = swap.stop()
            swap.step("install")
            swap.restart(parallelism, batch_before=0)
            rec.after = {"keys": 7}
    except HandOver as wait:
        return waits.Waiting(wait.pending)
    return waits.ended(rec, Rebuilt(operation_id=rec.id, parallelism=parallelism))


def deferred(step: waits.Step) -> dict:
    """The wait an operation's step ended with (an Airflow task defers on it)."""
    assert isinstance(step, waits.Waiting) and not step.last, step
    return step.pending


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
    pending = deferred(operation(settings, ledger))
    op_id = pending["operation_id"]
    assert pending["kind"] == "stop" and ledger.desired("app1")["status"] == "stopped"
    row, lease = ledger.get_operation(op_id), ledger.lease("app1")
    assert row["outcome"] == "running" and [s["step"] for s in row["journal"]] == ["stop", "handed-off"]
    assert lease["operation_id"] == op_id and lease["pid"] is None  # held, by the waiter
    with pytest.raises(OperationInProgress):  # nobody else gets the app meanwhile
        ledger.begin("app1", "reset", who="other")

    # resumed before the app stopped: handed over again, nothing more done
    deferred(operation(settings, ledger, resume=op_id))
    assert [s["step"] for s in ledger.get_operation(op_id)["journal"]] == ["stop", "handed-off", "handed-off"]

    converged["now"] = True  # stopped
    last = operation(settings, ledger, resume=op_id)
    assert isinstance(last, waits.Waiting) and last.last
    assert last.result == Rebuilt(operation_id=op_id, parallelism=3)
    assert last.pending["kind"] == "deploy" and last.pending["parallelism"] == 3
    row = ledger.get_operation(op_id)
    assert [s["step"] for s in row["journal"]] == ["stop", "handed-off", "handed-off", "install", "restart",
                                                   "handed-off"]
    assert row["outcome"] == "running" and row["after"] == {"keys": 7}  # not finished: the start is awaited
    assert ledger.desired("app1")["status"] == "running" and ledger.lease("app1")["pid"] is None

    ledger.finish_handed_off(op_id, "succeeded")
    row = ledger.get_operation(op_id)
    assert (row["outcome"], row["after"], ledger.lease("app1")) == ("succeeded", {"keys": 7}, None)


def test_waiting_here_the_cli_advances_the_same_steps_and_holds_the_lease(setup) -> None:
    """The CLI's way: one call that waits in its process between the same steps; while it waits,
    the lease is its process's (killed, it is freed at once), and the operation ends succeeded."""
    settings, ledger, converged = setup
    holders = []

    def poll_of(pending: dict) -> waits.Poll:
        def poll() -> bool:
            holders.append((pending["kind"], ledger.lease("app1")["pid"]))
            converged["now"] = len(holders) % 2 == 0  # each wait polled twice
            return converged["now"]
        return poll

    out = waits.wait_here(ledger, lambda resume: operation(settings, ledger, resume), poll_of, interval=0.01)
    row = ledger.get_operation(out.operation_id)
    assert out == Rebuilt(operation_id=row["id"], parallelism=3)
    assert holders == [("stop", os.getpid())] * 2 + [("deploy", os.getpid())] * 2
    assert row["outcome"] == "succeeded" and row["after"] == {"keys": 7}
    assert [s["step"] for s in row["journal"]] == ["stop", "handed-off", "install", "restart", "handed-off"]
    assert ledger.lease("app1") is None and ledger.desired("app1")["status"] == "running"


def test_waiting_here_a_wait_that_fails_fails_the_operation(setup) -> None:
    """A wait that cannot end well (the app does not stop in time) records the operation failed with
    the reason, frees the lease, and ends what was waited for (``abandon``)."""
    settings, ledger, _converged = setup
    abandoned = []

    def never(_pending: dict) -> waits.Poll:
        def poll() -> bool:
            raise ops.NotConverged("app1 still running after 60 s")
        return poll

    with pytest.raises(ops.NotConverged):
        waits.wait_here(ledger, lambda resume: operation(settings, ledger, resume), never,
                        abandon=abandoned.append)
    row = ledger.operations("app1", limit=1)[0]
    assert row["outcome"] == "failed" and row["error"] == "NotConverged: app1 still running after 60 s"
    assert [p["kind"] for p in abandoned] == ["stop"] and ledger.lease("app1") is None


def test_convergence_polls_one_pending_per_wait(setup, monkeypatch) -> None:
    """``convergence`` polls ``operations.poll`` with one Pending per wait (it remembers when it
    renewed the lease), for the context's app."""
    settings, ledger, _converged = setup
    seen = []
    monkeypatch.setattr(ops, "poll", lambda ctx, pending: seen.append((ctx.app, id(pending))) or None)
    poll = waits.convergence(AppContext(settings, SPEC, ledger, KAFKA))(
        ops.Pending(app="app1", kind="stop", operation_id=1, requested_by="t", t0=0, deadline=1, before={}).to_dict())
    assert poll() is False and poll() is False
    assert seen[0] == seen[1] and seen[0][0] == "app1"


def test_an_operation_finished_meanwhile_is_not_resumed(setup) -> None:
    settings, ledger, _converged = setup
    op_id = deferred(operation(settings, ledger))["operation_id"]
    ledger.finish_handed_off(op_id, "failed", error="did not stop")
    with pytest.raises(OperationInProgress, match="can no longer be resumed"):
        operation(settings, ledger, resume=op_id)


def test_a_resumed_operation_holds_its_lease_by_its_process(setup) -> None:
    """Between the waits the work runs in a process again: killed there, the lease is released
    and the operation recorded failed (as for any operation whose process died)."""
    settings, ledger, _converged = setup
    op_id = deferred(operation(settings, ledger))["operation_id"]
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
