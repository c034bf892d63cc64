"""The reset operator logs a reset's or an undo's result by its attributes, returns its document as
XCom, and a result carried through a deferral (by its type's name) comes back as that type."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))

MOVE = {"topic": "in", "partition": 0, "current": 500, "target": 400, "low": 0, "high": 800, "clamped": False,
        "reprocess": 100, "skip": 0, "to_process": 400}


def _reset_result(**more: Any) -> Any:
    from streamops.reset.tool import ResetResult

    return ResetResult(app="ua", target="shift-by -100", params={"shift_by": -100}, timestamp_ms=None, state="wipe",
                       running=False, checkpoint="/c", batch_id=13, state_partitions=4, offsets=[MOVE],
                       records_to_reprocess=100, records_to_skip=0, records_to_process=400, clamped=0,
                       changelog_topic="c", output_topic_before="o", output_topic_after="o",
                       output_version_before=None, output_version_after=None, set_aside_to="/aside/<time>-op<id>",
                       actions=["recreate c empty (it mirrors the state)"], **more)


def _undo_result(**more: Any) -> Any:
    from streamops.lifecycle.undo import UndoResult

    return UndoResult(app="ua", undo=7, kind="reset", outcome="failed", error="abandoned", params={"shift_by": -100},
                      steps=["stop", "set-aside"], running=False, restart=True, checkpoint_before="/aside/op7",
                      checkpoint="/c", current_batch=None, restore_batch=13,
                      offsets=[{"topic": "in", "partition": 0, "current": None, "restore_to": 500}],
                      output_version_after=None, saved={}, actions=["start the app again at its parallelism"],
                      **more)


class Log:
    """The task's log lines (``info``); the warning that ``execute`` runs outside a task runner is dropped."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)

    def warning(self, msg: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize(("result", "lines"), [
    (_reset_result(dry_run=True), ["in[0]: 500 -> 400", "would recreate c empty (it mirrors the state)"]),
    (_undo_result(operation_id=8, set_aside="/aside/op8", written={}, seconds=1.5),
     ["in[0]: None -> 500", "did: start the app again at its parallelism"]),
])
def test_the_log_of_a_result_and_its_xcom(result: Any, lines: list[str], monkeypatch) -> None:
    from streamops_airflow.operators import ResetOperator

    from streamops.lifecycle.waits import Done

    op = ResetOperator(task_id="reset", app="ua", target="earliest")
    log = Log()
    monkeypatch.setattr(ResetOperator, "log", log)
    monkeypatch.setattr(ResetOperator, "run_core", lambda _self, _context, _resume: Done(result))
    assert op.execute({}) == result.to_dict()
    assert log.lines == lines


@pytest.mark.parametrize("result", [_reset_result(dry_run=False, operation_id=3, aside="/aside/op3",
                                                  saved={"changelog": {"topic": "c", "keys": 5}}, seconds=2.0),
                                    _undo_result(operation_id=8, set_aside="/aside/op8", written={}, seconds=1.5)])
def test_a_result_carried_through_a_deferral_comes_back_as_its_type(result: Any) -> None:
    from streamops_airflow.operators.handoff import _result_type, _type_name

    assert _result_type(_type_name(result)).from_dict(result.to_dict()) == result
