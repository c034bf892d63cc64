"""The compact and rebuild-state tasks log their typed result by its attributes and return its
document (``to_dict``, what ``--json`` prints) as XCom; a rebuild handed to the triggerer until
the app runs again carries its result's document and type, and reports it the same way after."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))

CONTEXT = {"ti": SimpleNamespace(dag_id="d", run_id="r", task_id="t")}


class Log:
    """The lines an operator logs at info, formatted (Airflow's own warnings, about a task run
    outside its task runner, are kept apart)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.warnings: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)

    def warning(self, msg: str, *args: Any) -> None:
        self.warnings.append(msg % args)


@pytest.fixture
def operators(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The maintenance operators' module, its app session faked (no settings, ledger or Kafka)."""
    from streamops_airflow.operators import maintenance

    @contextmanager
    def session(app: str, what: str | None):
        yield SimpleNamespace(app=app)

    monkeypatch.setattr(maintenance, "app_session", session)
    return maintenance


def _with_log(op: Any, monkeypatch: pytest.MonkeyPatch) -> Log:
    log = Log()
    monkeypatch.setattr(type(op), "log", property(lambda _self: log))
    return log


def _compacted() -> Any:
    from streamops.lifecycle.maintenance import CompactPlan, CompactResult
    from streamops.results import extend

    plan = CompactPlan(app="ua", batch_id=9, running=True, bytes_before=4096, checkpoint="/c", state_version=10,
                       live=True, install_snapshots=["0/0"], delete_files=3, delete_bytes=300,
                       chains_before={"0/0": {"snapshot": 5, "changelogs": 4}},
                       chains_after={"0/0": {"snapshot": 10, "changelogs": 0}}, savepoints_beyond_retention=["sp1"])
    return plan, extend(plan, CompactResult, operation_id=7, installed=["0/0"], freed_bytes=300, bytes_after=3796,
                        restore_seconds_before=2.5, restore_seconds_after=0.5, savepoints_removed=["sp1"], seconds=4.0)


def _rebuilt() -> Any:
    from streamops.lifecycle.maintenance import RebuildPlan, RebuildResult
    from streamops.results import extend

    plan = RebuildPlan(app="ua", running=True, marker_batch=4, query_sources=1, stream_time=None, checkpoint_batch=4,
                       state_partitions_before=2, state_partitions_after=3, changelog_topic="ua-changelog",
                       changelog_keys=None, offsets=[{"topic": "in", "partition": 0, "checkpoint": 5, "start_at": 6}],
                       checkpoint="/c", set_aside_to="/aside/<time>-op<id>", actions=["read"], spec_note=None)
    return plan, extend(plan.but(changelog_keys=12, running=False), RebuildResult, operation_id=8, aside="/aside/x",
                        seconds=3.0)


@pytest.mark.parametrize("dry_run", [True, False])
def test_compact_logs_its_result_and_returns_its_document(operators, monkeypatch, dry_run: bool) -> None:
    import streamops.lifecycle.maintenance as core
    from streamops.lifecycle.maintenance import CompactResult
    from streamops.results import extend

    plan, ran = _compacted()
    out = extend(plan, CompactResult, dry_run=True) if dry_run else ran
    monkeypatch.setattr(core, "compact", lambda ctx, **kw: out)
    op = operators.CompactOperator(task_id="compact", app="ua", dry_run=dry_run)
    log = _with_log(op, monkeypatch)
    xcom = op.execute(CONTEXT)
    assert xcom == out.to_dict() and isinstance(xcom, dict)
    assert log.lines[0] == "state 0/0: snapshot 5 + 4 changelogs before"
    assert log.lines[1] == ("would compact ua at batch 9: install ['0/0'], delete 3 files (300 bytes), savepoints "
                            "beyond retention ['sp1']" if dry_run else
                            "compacted ua at batch 9: 4096 -> 3796 bytes, restore 2.5 s -> 0.5 s, savepoints removed "
                            "['sp1']")


def test_rebuild_state_logs_its_result_and_returns_its_document(operators, monkeypatch) -> None:
    import streamops.lifecycle.maintenance as core
    from streamops.lifecycle.waits import Done

    _plan, out = _rebuilt()
    monkeypatch.setattr(core, "rebuild_state_step", lambda ctx, **kw: Done(out))
    op = operators.RebuildStateOperator(task_id="rebuild_state", app="ua", dry_run=False)
    log = _with_log(op, monkeypatch)
    assert op.execute(CONTEXT) == out.to_dict()
    assert log.lines == ["in[0]: checkpoint 5 -> start at 6",
                         "rebuilt ua from ua-changelog (12 keys): 2 -> 3 state partitions"]


def test_a_rebuild_waiting_for_the_app_to_run_again_carries_its_result_through_the_deferral(
        operators, monkeypatch) -> None:
    from airflow.sdk.exceptions import TaskDeferred

    import streamops.lifecycle.maintenance as core
    from streamops.lifecycle.waits import Waiting

    _plan, out = _rebuilt()
    pending = {"kind": "start", "app": "ua", "operation_id": 8, "deadline": time.time() + 60}
    monkeypatch.setattr(core, "rebuild_state_step", lambda ctx, **kw: Waiting(pending, out))
    op = operators.RebuildStateOperator(task_id="rebuild_state", app="ua", dry_run=False)
    log = _with_log(op, monkeypatch)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(CONTEXT)
    kwargs = deferred.value.kwargs
    assert kwargs == {"result": out.to_dict(), "result_type": "streamops.lifecycle.maintenance:RebuildResult"}
    finished = []
    monkeypatch.setattr(op, "_finish", lambda pending, outcome, error=None: finished.append(outcome))
    log.lines.clear()
    assert op.finish_after_restart(CONTEXT, {"status": "converged", "pending": pending}, **kwargs) == out.to_dict()
    assert finished == ["succeeded"]
    assert log.lines[-1] == "rebuilt ua from ua-changelog (12 keys): 2 -> 3 state partitions"
