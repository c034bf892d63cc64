"""The reprocess operator takes over a handed-over run only when the task that deferred for it is
no longer waiting (Airflow ended it outside the operator, or it is this task run again)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

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
    got = ReprocessOperator._lost_waiter({"ti": ti}, {"id": 4, "requested_by": WAITER})
    assert ti.asked == [("streamops_reprocess__ua", [run], ["reprocess"])]
    assert got == ((4, f"the task that waited for it ({WAITER}) is {state or 'gone'}") if lost else None)


def test_this_task_run_again_takes_over_its_earlier_tries_run_without_asking() -> None:
    from streamops_airflow.operators import ReprocessOperator

    ti = FakeTI("backfill__2026-11-24T00:00:00+00:00", {})
    assert ReprocessOperator._lost_waiter({"ti": ti}, {"id": 4, "requested_by": WAITER}) == (
        4, f"the task that waited for it ({WAITER}) was run again")
    assert ti.asked == []


@pytest.mark.parametrize("row", [None, {"id": 4, "requested_by": "cli:alice"}, {"id": 4, "requested_by": "airflow:x"}])
def test_a_run_not_started_by_an_airflow_task_is_never_taken_over(row) -> None:
    from streamops_airflow.operators import ReprocessOperator

    assert ReprocessOperator._lost_waiter({"ti": FakeTI("r", {})}, row) is None
