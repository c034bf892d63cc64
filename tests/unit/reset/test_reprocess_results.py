"""The documents reprocess and promote print with --json (and an Airflow task returns as its XCom):
exactly these keys, in this order, for every branch. The lists were written from the dicts the
operations returned before their results were typed (``reprocess_results``); the operations run
here on a real ledger and checkpoint, with the broker's answers (watermarks, topics, the batch
marker) stubbed. A document also comes back as its result (a deferred task's, a journaled plan)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.context import AppContext
from streamops.app.outputs import reprocess_spec
from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger
from streamops.lifecycle import operations as ops
from streamops.lifecycle import waits
from streamops.reset import reprocess as rp
from streamops.reset.reprocess_results import (
    PromotePlan,
    PromoteResult,
    ReprocessDryRun,
    ReprocessPlan,
    ReprocessResult,
)
from streamops.results import Result
from streamops.settings import Settings
from streamops.spec import AppSpec

SPEC = AppSpec(name="ua", job="jobs.x", input_topics=("in",), output_topic="out", changelog_topic="cl",
               dlq_topic="dlq")
KAFKA = KafkaConfig.plaintext("127.0.0.1:1")  # no client is made: the broker's answers are stubbed
#: partition -> (low, high) watermarks of every topic; partition 0's first 10 records were deleted
MARKS = {0: (10, 110), 1: (0, 200)}

REPROCESS_PLAN = ["app", "run_as", "output_version", "from", "to", "output_topic", "changelog_topic", "dlq_topic",
                  "offsets", "records", "start", "stop", "checkpoint", "continues", "live_output_topic",
                  "max_offsets_per_trigger", "warnings"]
REPROCESS_DRY_RUN = [*REPROCESS_PLAN, "dry_run"]
REPROCESS_RUN = [*REPROCESS_PLAN, "dry_run", "operation_id", "seconds", "records_per_second", "batches"]
OFFSET_ROW = ["topic", "partition", "from", "to", "records"]
PROMOTE_PLAN = ["app", "output_version_before", "output_version_after", "output_topic_before",
                "output_topic_after", "records_in_topic", "running", "noop", "actions"]
PROMOTE_DRY_RUN = [*PROMOTE_PLAN, "dry_run"]  # also a promote to the version the app writes already
PROMOTE_RUN = [*PROMOTE_PLAN, "dry_run", "operation_id"]


def no_broker(*_a: Any, **_k: Any) -> None:
    """No broker here: no topic to create, no transaction to abort."""


@pytest.fixture
def ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import streamops.app.topics
    import streamops.kafka.admin
    import streamops.lifecycle.replace

    settings = Settings(home=tmp_path)
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(streamops.kafka.admin, "end_offsets", lambda _k, _t, **_kw: dict(MARKS))
    monkeypatch.setattr(streamops.app.topics, "ensure_app_topics", no_broker)
    monkeypatch.setattr(streamops.lifecycle.replace, "abort_open_transaction", no_broker)
    monkeypatch.setattr(rp, "rewind_marker", lambda *_a: {"batch_id": -1})
    monkeypatch.setattr(rp.driver, "running", lambda *_a: None)
    ledger = Ledger.open(settings.ledger_db_url)
    yield AppContext(settings, SPEC, ledger, KAFKA)
    ledger.close()


def keys(result: Result) -> list[str]:
    """The document's keys in order."""
    return list(result.to_dict())


def doc(result: Result) -> dict[str, Any]:
    """The document, and the check that it comes back as the result (through JSON, as the ledger
    and a deferral carry it)."""
    out = result.to_dict()
    assert type(result).from_dict(json.loads(json.dumps(out))) == result
    return out


def test_a_reprocess_plan_and_its_dry_run(ctx: AppContext) -> None:
    plan = rp.reprocess_plan(ctx.settings, SPEC, ctx.ledger, kafka=KAFKA, frm='{"in": {"0": 0}}', to="latest")
    assert isinstance(plan, ReprocessPlan) and keys(plan) == REPROCESS_PLAN
    got = doc(plan)
    assert (plan.frm, plan.to) == (got["from"], got["to"])  # ``from`` is a keyword
    assert [list(o) for o in got["offsets"]] == [OFFSET_ROW, OFFSET_ROW]
    assert (got["from"], got["to"], got["records"], got["output_version"]) == ('{"in": {"0": 0}}', "latest", 300, "v2")
    assert got["warnings"] == [("the range may start in records the broker has deleted (retention): in[0]: the "
                               "records before offset 10, the oldest kept; they are not reprocessed")]

    step = rp.reprocess_step(ctx, frm="earliest", to="latest", output_version="v3", dry_run=True)
    assert isinstance(step, waits.Done) and isinstance(step.result, ReprocessDryRun)
    assert keys(step.result) == REPROCESS_DRY_RUN
    assert doc(step.result)["dry_run"] is True and step.result.warnings == []
    assert ctx.ledger.operations("ua__reprocess_v3") == []


def test_an_empty_range_runs_no_driver_and_its_result_keeps_its_null_rate_and_batch(ctx: AppContext) -> None:
    step = rp.reprocess_step(ctx, frm="latest", to="latest", output_version="v2")
    assert isinstance(step, waits.Done) and isinstance(step.result, ReprocessResult)
    assert keys(step.result) == REPROCESS_RUN
    got = doc(step.result)
    assert (got["dry_run"], got["records"], got["batches"]) == (False, 0, None)
    assert got["records_per_second"] in (None, 0.0)  # None when it took under 0.05 s
    assert ctx.ledger.get_operation(got["operation_id"])["outcome"] == "succeeded"


def _fake_launch(ctx: AppContext, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's driver: a process that has ended, leaving the whole range committed."""
    def launch(settings: Settings, _spec: AppSpec, derived: AppSpec, _run_file: Path, _n: int,
               _master: str | None) -> subprocess.Popen:
        ckpt = checkpoint_dir(settings, derived)
        (ckpt / "offsets").mkdir(parents=True)
        (ckpt / "commits").mkdir()
        (ckpt / "offsets" / "0").write_text("\n".join(["v1", "{}", json.dumps({"in": {"0": 110, "1": 200}})]))
        (ckpt / "commits" / "0").write_text("v1\n{}")
        proc = subprocess.Popen([sys.executable, "-c", "pass"])
        proc.wait()
        return proc

    monkeypatch.setattr(rp, "_launch", launch)


def test_a_run_hands_over_its_plan_and_its_resumed_step_ends_with_the_result(ctx: AppContext,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """What an Airflow task does: the first step launches the driver and defers; the task resumed
    takes the plan from the journal."""
    _fake_launch(ctx, monkeypatch)
    first = rp.reprocess_step(ctx, frm="earliest", to="latest", output_version="v2")
    assert isinstance(first, waits.Waiting) and not first.last
    assert list(first.pending) == ["app", "kind", "operation_id", "requested_by", "deadline", "pid", "ticks", "plan"]
    assert list(first.pending["plan"]) == REPROCESS_PLAN  # a pending is the triggerer's: stays a dict
    assert ReprocessPlan.from_dict(first.pending["plan"]).to_dict() == first.pending["plan"]
    assert rp.watch_run(first.pending) == (False, 300)
    op_id = first.operation_id
    launched = next(s for s in ctx.ledger.get_operation(op_id)["journal"] if s["step"] == "launched")
    assert launched["plan"] == first.pending["plan"] and list(launched["plan"]) == REPROCESS_PLAN

    done = rp.reprocess_step(ctx, frm="earliest", to="latest", output_version="v2", resume=op_id)
    assert isinstance(done, waits.Done) and isinstance(done.result, ReprocessResult)
    assert keys(done.result) == REPROCESS_RUN
    got = doc(done.result)
    assert {k: got[k] for k in REPROCESS_PLAN} == first.pending["plan"]
    assert (got["dry_run"], got["operation_id"], got["batches"], got["records"]) == (False, op_id, 0, 300)
    assert ctx.ledger.get_operation(op_id)["outcome"] == "succeeded"
    assert rp.chain_dir(ctx.settings, reprocess_spec(SPEC, "v2"), done.result.stop).is_dir()


def test_the_cli_waits_for_the_run_in_its_process(ctx: AppContext, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_launch(ctx, monkeypatch)
    out = rp.reprocess(ctx, frm="earliest", to="latest", output_version="v2")
    assert isinstance(out, ReprocessResult) and keys(out) == REPROCESS_RUN
    got = doc(out)
    assert got["records"] == 300 and got["seconds"] >= 0 and got["continues"] is False


def test_promote_dry_run_noop_and_run(ctx: AppContext) -> None:
    plan = rp.promote_plan(ctx.settings, SPEC, ctx.ledger, "v2", kafka=KAFKA)
    assert isinstance(plan, PromotePlan) and keys(plan) == PROMOTE_PLAN
    assert doc(plan)["records_in_topic"] == 300 and doc(plan)["actions"] == ["record in the ledger that ua writes out.v2"]

    dry = rp.promote_step(ctx, "v2", dry_run=True)
    assert isinstance(dry, waits.Done) and isinstance(dry.result, PromoteResult)
    assert keys(dry.result) == PROMOTE_DRY_RUN and doc(dry.result)["dry_run"] is True and dry.result.operation_id is None

    ran = rp.promote(ctx, "v2")
    assert isinstance(ran, PromoteResult) and keys(ran) == PROMOTE_RUN
    got = doc(ran)
    assert (got["dry_run"], got["output_version_before"], got["output_version_after"], got["running"]) == (
        False, None, "v2", False)
    assert ctx.ledger.output_version("ua") == "v2"

    noop = rp.promote_step(ctx, "v2")  # already written: nothing to do, and no dry run either
    assert isinstance(noop, waits.Done) and keys(noop.result) == PROMOTE_DRY_RUN
    assert (doc(noop.result)["noop"], doc(noop.result)["dry_run"], doc(noop.result)["actions"]) == (True, False, [])


def test_promoting_a_running_app_ends_waiting_for_its_restart_with_the_result(ctx: AppContext,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The last wait carries the result (an Airflow task defers with its document and type)."""
    monkeypatch.setattr(rp.driver, "running", lambda *_a: object())
    monkeypatch.setattr(ops, "require_supervisor", no_broker)
    monkeypatch.setattr(ops, "poll", lambda *_a: {})  # the app stopped at once
    ctx.ledger.set_desired("ua", status="running", parallelism=1)
    step = rp.promote_step(ctx, "v2")
    assert isinstance(step, waits.Waiting) and isinstance(step.result, PromoteResult)
    assert step.last and keys(step.result) == PROMOTE_RUN
    got = doc(step.result)
    assert got["running"] is True and got["actions"][-1] == "restart ua at a batch boundary so it writes out.v2"
    assert got["operation_id"] == step.operation_id and time.time() < step.pending["deadline"]


def _cli(ctx: AppContext, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str,
         **args: Any) -> str:
    """The command's output, run on ``ctx`` (``run_operation``'s calling convention)."""
    import argparse

    from streamops.cli import reset as cli

    def run_operation(_args: argparse.Namespace, operation: Any, *params: Any, **options: Any) -> tuple[AppSpec, Any]:
        return SPEC, operation(ctx, *params, progress=lambda _m: None, **options)

    monkeypatch.setattr(cli, "run_operation", run_operation)
    assert getattr(cli, command)(argparse.Namespace(**args)) == 0
    return capsys.readouterr().out


def test_the_cli_renders_reprocess_and_promote_and_prints_their_documents(ctx: AppContext,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    _fake_launch(ctx, monkeypatch)
    common = {"frm": '{"in": {"0": 0}}', "to": "latest", "output_version": "v2", "master": None, "parallelism": None,
              "timeout": 60.0}
    text = _cli(ctx, monkeypatch, capsys, "cmd_reprocess", dry_run=True, json=False, **common)
    assert text.splitlines() == [
        ('ua: would reprocess 300 records [{"in": {"0": 0}} .. latest) into out.v2 (as ua__reprocess_v2; the live '
        'app writes out), batches of up to all records'),
        "  TOPIC                    PART       FROM         TO    RECORDS",
        "  in                          0         10        110        100",
        "  in                          1          0        200        200",
        ("  warning: the range may start in records the broker has deleted (retention): in[0]: the records before "
        "offset 10, the oldest kept; they are not reprocessed")]
    printed = json.loads(_cli(ctx, monkeypatch, capsys, "cmd_reprocess", dry_run=True, json=True, **common))
    assert list(printed) == REPROCESS_DRY_RUN and printed["records"] == 300

    printed = json.loads(_cli(ctx, monkeypatch, capsys, "cmd_reprocess", dry_run=False, json=True, **common))
    assert list(printed) == REPROCESS_RUN and printed["batches"] == 0
    text = _cli(ctx, monkeypatch, capsys, "cmd_reprocess", dry_run=False, json=False, **common)
    assert text.splitlines()[0].startswith("ua: reprocessed 300 records")
    assert text.splitlines()[-1].endswith(f"0 as last batch (operation #{printed['operation_id'] + 1}); promote "
                                          f"with `streamops promote ua --output-version v2`")

    text = _cli(ctx, monkeypatch, capsys, "cmd_promote", output_version="v2", dry_run=True, timeout=60.0, json=False)
    assert text.splitlines() == ["ua would write out.v2 (300 records there; before: out)",
                                 "  - record in the ledger that ua writes out.v2"]
    printed = json.loads(_cli(ctx, monkeypatch, capsys, "cmd_promote", output_version="v2", dry_run=False,
                              timeout=60.0, json=True))
    assert list(printed) == PROMOTE_RUN and printed["output_version_after"] == "v2"
    text = _cli(ctx, monkeypatch, capsys, "cmd_promote", output_version="v2", dry_run=False, timeout=60.0, json=False)
    assert text.splitlines() == ["ua already writes out.v2 (300 records there; before: out.v2)"]
