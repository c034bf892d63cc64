"""The documents a reset and an undo print with --json (and return as XCom): their keys, in their
order, for every variant, pinned as they were when these were dicts. Run for real on a local
checkpoint and ledger; what would reach a broker (watermarks, the batch marker, the topics saved and
written back) is stubbed."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.context import AppContext
from streamops.checkpoints import layout
from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger
from streamops.lifecycle import replace
from streamops.lifecycle import undo as undo_mod
from streamops.reset import tool
from streamops.reset.targets import make_target
from streamops.results import Result
from streamops.settings import Settings
from streamops.spec import AppSpec

SPEC = AppSpec(name="app1", job="jobs.x", input_topics=("in",), output_topic="o", changelog_topic="c",
               dlq_topic="d", input_partitions=2, state_partitions=4)
KAFKA = KafkaConfig.plaintext("127.0.0.1:1")  # no client is made

RESET_PLAN = ["app", "target", "params", "timestamp_ms", "state", "running", "checkpoint", "batch_id",
              "state_partitions", "offsets", "records_to_reprocess", "records_to_skip", "records_to_process",
              "clamped", "changelog_topic", "output_topic_before", "output_topic_after", "output_version_before",
              "output_version_after", "set_aside_to", "actions"]
RESET_DRY_RUN = [*RESET_PLAN, "dry_run"]
RESET_DONE = [*RESET_PLAN, "dry_run", "operation_id", "aside", "saved", "seconds"]
UNDO_PLAN = ["app", "undo", "kind", "outcome", "error", "params", "steps", "running", "restart",
             "checkpoint_before", "checkpoint", "current_batch", "restore_batch", "offsets", "output_version_after",
             "saved", "actions"]
UNDO_DRY_RUN = [*UNDO_PLAN, "dry_run"]
UNDO_DONE = [*UNDO_PLAN, "dry_run", "operation_id", "set_aside", "written", "seconds"]


def doc(result: Result) -> dict[str, Any]:
    """The --json document of a result."""
    return result.to_dict()


@pytest.fixture
def ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A stopped app with a checkpoint committed at batch 13 (offsets in/0: 500, in/1: 300)."""
    settings = Settings(home=tmp_path)
    ckpt = checkpoint_dir(settings, SPEC)
    (ckpt / "commits").mkdir(parents=True)
    (ckpt / "offsets").mkdir()
    (ckpt / "metadata").write_text(json.dumps({"id": "ck-1"}))
    (ckpt / "commits" / "13").write_text("v1\n{}")
    (ckpt / "offsets" / "13").write_text('v1\n{"batchWatermarkMs":0}\n{"in":{"0":500,"1":300}}')
    monkeypatch.setattr(tool, "_watermarks", lambda _k, _s: {("in", 0): (0, 800), ("in", 1): (100, 600)})
    monkeypatch.setattr(replace, "abort_open_transaction", lambda _k, _a, **_kw: None)
    monkeypatch.setattr(replace, "rewind_marker", lambda _s, _sp, _k, batch: {"batch_id": batch})
    monkeypatch.setattr(replace.Replacement, "_marker", lambda _self: None)
    saved = {"changelog": {"topic": "c", "keys": 5}}

    def save_topics(_k, _s, _folder, *, output, **_kw) -> dict[str, Any]:
        return {**saved, **({"output": {"topic": output, "keys": 3}} if output else {})}

    for module in (tool, undo_mod):
        monkeypatch.setattr(module, "save_topics", save_topics)
        monkeypatch.setattr(module, "recreate_changelog", lambda _k, _s: None)
    monkeypatch.setattr(undo_mod, "write_back", lambda _k, _p, _t, *, tombstones: {"keys": 5, "tombstones": 0})
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        yield AppContext(settings, SPEC, ledger, KAFKA)
    finally:
        ledger.close()


def test_a_reset_plan_and_its_dry_run(ctx: AppContext) -> None:
    target = make_target(to_earliest=True)
    plan = tool.reset_plan(ctx.settings, ctx.spec, ctx.ledger, target, kafka=ctx.kafka)
    assert type(plan) is tool.ResetPlan and list(doc(plan)) == RESET_PLAN
    dry = tool.reset(ctx, target, dry_run=True)
    assert type(dry) is tool.ResetResult and list(doc(dry)) == RESET_DRY_RUN
    assert doc(dry) == {**doc(plan), "dry_run": True}
    assert dry.offsets == [
        {"topic": "in", "partition": 0, "current": 500, "target": 0, "low": 0, "high": 800, "clamped": False,
         "reprocess": 500, "skip": 0, "to_process": 800},
        {"topic": "in", "partition": 1, "current": 300, "target": 100, "low": 100, "high": 600, "clamped": False,
         "reprocess": 200, "skip": 0, "to_process": 500}]
    assert (dry.records_to_reprocess, dry.batch_id, dry.running, dry.state) == (700, 13, False, "wipe")
    assert dry.dry_run is True and dry.operation_id is None and dry.seconds is None
    assert ctx.ledger.operations(SPEC.name, limit=10) == []  # a dry run is no operation


@pytest.mark.parametrize(("state", "version"), [("wipe", None), ("keep", "v2")])
def test_a_reset_and_its_undo(ctx: AppContext, state: str, version: str | None) -> None:
    target = make_target(shift_by=-100)
    out = tool.reset(ctx, target, state=state, force=state == "keep", output_version=version)
    assert type(out) is tool.ResetResult and list(doc(out)) == RESET_DONE
    assert out.dry_run is False and out.running is False and out.output_version_after == (version or None)
    assert out.saved == {"changelog": {"topic": "c", "keys": 5},
                         **({} if version else {"output": {"topic": "o", "keys": 3}})}
    assert out.aside is not None and Path(out.aside).is_dir() and isinstance(out.seconds, float)
    assert tool.ResetResult.from_dict(json.loads(json.dumps(doc(out)))) == out  # as a deferral carries it
    ckpt = checkpoint_dir(ctx.settings, SPEC)
    assert layout.next_offsets(ckpt) == {("in", 0): 400, ("in", 1): 200}
    op_id = out.operation_id
    assert isinstance(op_id, int)

    plan = tool.undo_plan(ctx.settings, ctx.spec, ctx.ledger, op_id)
    assert type(plan) is undo_mod.UndoPlan and list(doc(plan)) == UNDO_PLAN
    dry = tool.undo(ctx, op_id, dry_run=True)
    assert type(dry) is undo_mod.UndoResult and list(doc(dry)) == UNDO_DRY_RUN
    assert doc(dry) == {**doc(plan), "dry_run": True}
    assert (dry.kind, dry.outcome, dry.error, dry.restore_batch) == ("reset", "succeeded", None, 13)

    undone = tool.undo(ctx, op_id)
    assert type(undone) is undo_mod.UndoResult and list(doc(undone)) == UNDO_DONE
    assert undone.dry_run is False and undone.undo == op_id and (undone.operation_id or 0) > op_id
    written = {"keys": 5, "tombstones": 0}
    assert undone.written == ({"changelog": written, "output": written} if state == "wipe" else {})
    assert undone.set_aside is not None and Path(undone.set_aside).is_dir() and isinstance(undone.seconds, float)
    assert undo_mod.UndoResult.from_dict(json.loads(json.dumps(doc(undone)))) == undone
    assert layout.next_offsets(ckpt) == {("in", 0): 500, ("in", 1): 300}
    assert ctx.ledger.output_version(SPEC.name) is None

    again = tool.undo(ctx, undone.operation_id, dry_run=True)  # an undo is undone as well
    assert list(doc(again)) == UNDO_DRY_RUN and again.kind == "undo"


def _args(**kw: Any) -> argparse.Namespace:
    base = {"app": SPEC.name, "undo": None, "state": "wipe", "force": False, "output_version": None,
            "to_earliest": False, "to_latest": False, "to_datetime": None, "by_duration": None, "shift_by": -100,
            "to_offsets": None, "dry_run": False, "stop_first": False, "timeout": 5.0, "json": False}
    return argparse.Namespace(**{**base, **kw})


def test_the_cli_renders_the_results_and_prints_their_documents(ctx: AppContext, capsys, monkeypatch) -> None:
    from streamops.cli import reset as cli

    @contextmanager
    def opened(_args: argparse.Namespace, **_kw: Any) -> Iterator[AppContext]:
        yield ctx

    monkeypatch.setattr(cli, "app_context", opened)
    assert cli.cmd_reset(_args(dry_run=True, json=True)) == 0
    assert list(json.loads(capsys.readouterr().out)) == RESET_DRY_RUN
    assert cli.cmd_reset(_args()) == 0
    text = capsys.readouterr().out
    assert "app1: done: reset shift-by -100 (state wipe; app stopped; checkpoint at batch 13)" in text
    assert "  records to reprocess 200, to skip 0, to process from the new offsets 800" in text
    assert "; undo with `streamops undo app1 1` (" in text
    assert cli.cmd_reset(_args(undo=1, dry_run=True)) == 0
    text = capsys.readouterr().out
    assert 'app1: would undo reset #1 (succeeded; {"shift_by": -100, "state": "wipe", "output_version": null}): ' \
           "batch None -> 13" in text
    assert "  in[0] 400 -> 500\n" in text and text.endswith("  dry run: nothing changed\n")
    assert cli.cmd_undo(_args(op_id=1, json=True)) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == UNDO_DONE and out["operation_id"] == 2
    assert cli.cmd_undo(_args(op_id=2, dry_run=True)) == 0
    assert "app1: would undo undo #2 (succeeded; " in capsys.readouterr().out
