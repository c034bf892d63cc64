"""The documents a reset and an undo print with --json (and return as XCom): their keys, in their
order, for every variant, pinned as they were when these were dicts. Run for real on a local
checkpoint and ledger; what would reach a broker (watermarks, the batch marker, the topics saved and
written back) is stubbed."""

from __future__ import annotations

import json
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


def doc(result: Any) -> dict[str, Any]:
    """The --json document of a result."""
    return result


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
    monkeypatch.setattr(replace, "abort_open_transaction", lambda _k, _a: None)
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
    assert list(doc(plan)) == RESET_PLAN
    dry = doc(tool.reset(ctx, target, dry_run=True))
    assert list(dry) == RESET_DRY_RUN
    assert dry == {**doc(plan), "dry_run": True}
    assert dry["offsets"] == [
        {"topic": "in", "partition": 0, "current": 500, "target": 0, "low": 0, "high": 800, "clamped": False,
         "reprocess": 500, "skip": 0, "to_process": 800},
        {"topic": "in", "partition": 1, "current": 300, "target": 100, "low": 100, "high": 600, "clamped": False,
         "reprocess": 200, "skip": 0, "to_process": 500}]
    assert (dry["records_to_reprocess"], dry["batch_id"], dry["running"], dry["state"]) == (700, 13, False, "wipe")
    assert ctx.ledger.operations(SPEC.name, limit=10) == []  # a dry run is no operation


@pytest.mark.parametrize(("state", "version"), [("wipe", None), ("keep", "v2")])
def test_a_reset_and_its_undo(ctx: AppContext, state: str, version: str | None) -> None:
    target = make_target(shift_by=-100)
    out = doc(tool.reset(ctx, target, state=state, force=state == "keep", output_version=version))
    assert list(out) == RESET_DONE
    assert out["dry_run"] is False and out["running"] is False and out["output_version_after"] == (version or None)
    assert out["saved"] == {"changelog": {"topic": "c", "keys": 5},
                            **({} if version else {"output": {"topic": "o", "keys": 3}})}
    assert Path(out["aside"]).is_dir() and isinstance(out["seconds"], float)
    ckpt = checkpoint_dir(ctx.settings, SPEC)
    assert layout.next_offsets(ckpt) == {("in", 0): 400, ("in", 1): 200}
    op_id = out["operation_id"]

    plan = doc(tool.undo_plan(ctx.settings, ctx.spec, ctx.ledger, op_id))
    assert list(plan) == UNDO_PLAN
    dry = doc(tool.undo(ctx, op_id, dry_run=True))
    assert list(dry) == UNDO_DRY_RUN and dry == {**plan, "dry_run": True}
    assert (dry["kind"], dry["outcome"], dry["error"], dry["restore_batch"]) == ("reset", "succeeded", None, 13)

    undone = doc(tool.undo(ctx, op_id))
    assert list(undone) == UNDO_DONE
    assert undone["dry_run"] is False and undone["undo"] == op_id and undone["operation_id"] > op_id
    written = {"keys": 5, "tombstones": 0}
    assert undone["written"] == ({"changelog": written, "output": written} if state == "wipe" else {})
    assert Path(undone["set_aside"]).is_dir() and isinstance(undone["seconds"], float)
    assert layout.next_offsets(ckpt) == {("in", 0): 500, ("in", 1): 300}
    assert ctx.ledger.output_version(SPEC.name) is None

    again = doc(tool.undo(ctx, undone["operation_id"], dry_run=True))  # an undo is undone as well
    assert list(again) == UNDO_DRY_RUN and again["kind"] == "undo"
