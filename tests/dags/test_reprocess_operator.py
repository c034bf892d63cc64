"""The reprocess operator takes over a handed-over run only when the task that deferred for it is
no longer waiting (Airflow ended it outside the operator, or it is this task run again)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from streamops.reset.reprocess_results import PromoteResult, ReprocessResult, WaitingRun

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))

WAITER = "airflow:streamops_reprocess__ua/backfill__2026-11-24T00:00:00+00:00/reprocess"


class FakeTI:
    """What the operator reads of its own task instance: its ids, and other tasks' states."""

    def __init__(self, run_id: str, states: dict) -> None:
        self.dag_id, self.run_id, self.task_id = "streamops_reprocess__ua", run_id, "reprocess"
        self.states, self.asked = states, []

    def get_task_states(self, dag_id: str, run_ids: list[str], task_ids: list[str]) -> dict:
        self.asked.append((dag_id, run_ids, task_ids))
        return self.states


@pytest.mark.parametrize(("state", "lost"), [
    ("deferred", False), ("running", False), ("queued", False), ("scheduled", False), ("up_for_retry", False),
    ("failed", True), ("success", True), ("skipped", True), (None, True)])
def test_another_tasks_run_is_taken_over_once_that_task_no_longer_waits(state, lost) -> None:
    from streamops_airflow.operators import ReprocessOperator

    run = "backfill__2026-11-24T00:00:00+00:00"
    ti = FakeTI("backfill__2026-11-25T00:00:00+00:00", {run: {"reprocess": state}} if state else {})
    got = ReprocessOperator._lost_waiter({"ti": ti}, WaitingRun(operation_id=4, requested_by=WAITER))
    assert ti.asked == [("streamops_reprocess__ua", [run], ["reprocess"])]
    assert got == ((4, f"the task that waited for it ({WAITER}) is {state or 'gone'}") if lost else None)


def test_this_task_run_again_takes_over_its_earlier_tries_run_without_asking() -> None:
    from streamops_airflow.operators import ReprocessOperator

    ti = FakeTI("backfill__2026-11-24T00:00:00+00:00", {})
    assert ReprocessOperator._lost_waiter({"ti": ti}, WaitingRun(operation_id=4, requested_by=WAITER)) == (
        4, f"the task that waited for it ({WAITER}) was run again")
    assert ti.asked == []


@pytest.mark.parametrize("run", [None, WaitingRun(operation_id=4, requested_by="cli:alice"),
                                 WaitingRun(operation_id=4, requested_by="airflow:x"),
                                 WaitingRun(operation_id=4, requested_by=None)])
def test_a_run_not_started_by_an_airflow_task_is_never_taken_over(run) -> None:
    from streamops_airflow.operators import ReprocessOperator

    assert ReprocessOperator._lost_waiter({"ti": FakeTI("r", {})}, run) is None


PROMOTED = PromoteResult(app="ua", output_version_before=None, output_version_after="v2", output_topic_before="out",
                         output_topic_after="out.v2", records_in_topic=300, running=True, noop=False,
                         actions=["record in the ledger that ua writes out.v2",
                                  "restart ua at a batch boundary so it writes out.v2"],
                         dry_run=False, operation_id=7)
REPROCESSED = ReprocessResult(
    app="ua", run_as="ua__reprocess_v2", output_version="v2", frm="earliest", to="latest", output_topic="out.v2",
    changelog_topic="cl.v2", dlq_topic="dlq.v2",
    offsets=[{"topic": "in", "partition": 0, "from": 10, "to": 110, "records": 100}], records=100,
    start={"in": {"0": 10}}, stop={"in": {"0": 110}}, checkpoint="/c", continues=False, live_output_topic="out",
    max_offsets_per_trigger=None, warnings=["in[0]: deleted"], dry_run=False, operation_id=8, seconds=1.5,
    records_per_second=66.7, batches=0)


class Logged:
    """Stands in for an operator whose ``report`` is called: what it logs."""

    def __init__(self) -> None:
        self.log, self.lines = self, []

    def info(self, msg: str, *args: object) -> None:
        self.lines.append(msg % args)

    def warning(self, msg: str, *args: object) -> None:
        self.lines.append("warning: " + msg % args)


def test_the_operators_log_their_results_by_attribute() -> None:
    from streamops_airflow.operators import PromoteOperator, ReprocessOperator

    logged = Logged()
    PromoteOperator.report(logged, PROMOTED)  # type: ignore[arg-type]
    ReprocessOperator.report(logged, REPROCESSED)  # type: ignore[arg-type]
    assert logged.lines == ["did: record in the ledger that ua writes out.v2",
                            "did: restart ua at a batch boundary so it writes out.v2",
                            "in[0]: 10 .. 110 (100 records)", "warning: in[0]: deleted"]


@pytest.mark.parametrize("result", [PROMOTED, REPROCESSED])
def test_a_result_comes_back_from_the_document_a_deferral_carries(result) -> None:
    from streamops_airflow.operators.handoff import _result_type, _type_name

    document = json.loads(json.dumps(result.to_dict()))  # a deferral's kwargs are JSON
    assert "frm" not in document  # a reprocess's ``frm`` is its document's ``from``
    assert _result_type(_type_name(result)).from_dict(document) == result


def test_a_promote_ending_with_the_restart_returns_its_document_once_the_app_runs(monkeypatch) -> None:
    """Its result goes to the triggerer as a document and comes back typed for the report."""
    from airflow.sdk.exceptions import TaskDeferred
    from streamops_airflow.operators import PromoteOperator
    from streamops_airflow.operators.handoff import HandsOffWaits

    from streamops.lifecycle import waits

    pending = {"app": "ua", "kind": "deploy", "operation_id": 7, "requested_by": "t", "t0": time.time(),
               "deadline": time.time() + 60, "before": {}, "parallelism": 1, "batch_before": None}
    reported, finished = [], []
    monkeypatch.setattr(PromoteOperator, "run_core", lambda _self, _context, _resume: waits.Waiting(pending, PROMOTED))
    monkeypatch.setattr(PromoteOperator, "report", lambda _self, out: reported.append(out))
    monkeypatch.setattr(HandsOffWaits, "_finish", staticmethod(lambda p, outcome, error=None: finished.append(outcome)))
    op = PromoteOperator(task_id="promote", app="ua", output_version="v2", dry_run=False)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute({})
    assert deferred.value.method_name == "finish_after_restart"
    kwargs = json.loads(json.dumps(deferred.value.kwargs))
    out = op.finish_after_restart({}, {"status": "converged", "pending": pending}, **kwargs)
    assert out == PROMOTED.to_dict() and reported == [PROMOTED] and finished == ["succeeded"]
