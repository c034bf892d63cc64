"""``streamops reset APP``: the application reset tool for Spark checkpoints.

Kafka Streams resets an application by moving its group offsets and wiping its state; a Spark
query keeps both in its checkpoint, so here a reset builds the checkpoint the app continues from:

* ``--state wipe`` (default): the old checkpoint is set aside whole and a fresh one is made that
  starts at the new offsets (``streamops-start.json``, read by the runtime while the offsets log
  is empty). The changelog topic is recreated empty — it mirrors the state, and brokers refuse to
  delete records from a compacted topic.
* ``--state keep`` (needs ``--force``: kept state plus replayed input counts twice): a copy of the
  checkpoint is set aside; in place, the last committed batch's end offsets are rewritten to the
  new ones, so the next batch continues the kept state from there.

Either way the batch marker is rewound so the next batch is written again (output and changelog
upserts), while DLQ entries of input records already written are not written twice. Before the
topics change, the changelog's and the output's latest value per key are saved beside the old
checkpoint, so ``reset --undo OP`` can put checkpoint, offsets and topics back as they were.
``--output-version v2`` makes the app write ``<output>.v2`` from now on and leaves the current
output as it is (blue/green). The dry run computes the whole plan and changes nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.context import AppContext
from streamops.app.outputs import check_version
from streamops.checkpoints import compact as cc
from streamops.checkpoints import layout
from streamops.exceptions import StreamopsError, UsageError
from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger
from streamops.ledger.store import HandOver, OperationRecord
from streamops.lifecycle import driver, waits
from streamops.lifecycle import undo as lifecycle_undo
from streamops.lifecycle.replace import Replacement, aside_dir, may_replace_checkpoint
from streamops.lifecycle.topic_copies import recreate_changelog, save_topics
from streamops.lifecycle.undo import UndoPlan, UndoResult
from streamops.reset.targets import TP, PartitionMove, ResetTarget, resolve
from streamops.results import Result, absent, extend
from streamops.settings import Settings
from streamops.spec import AppSpec, versioned_output

STATES = ("wipe", "keep")


class ResetError(StreamopsError):
    """A reset or its undo cannot go on.

    Operator action: read the message; nothing was changed unless it says so.
    """


@dataclass(frozen=True)
class ResetPlan(Result):
    """What a reset would do, for the operator to read before it runs: per partition (``offsets``
    rows, ``PartitionMove.to_dict``) where the input moves, the records that means, the topics and
    output versions before and after, and the ``actions`` in the order they are taken."""

    app: str
    target: str
    params: dict[str, Any]
    timestamp_ms: int | None
    state: str
    running: bool
    checkpoint: str
    batch_id: int | None
    state_partitions: int
    offsets: list[dict[str, Any]]
    records_to_reprocess: int
    records_to_skip: int
    records_to_process: int
    clamped: int
    changelog_topic: str
    output_topic_before: str
    output_topic_after: str
    output_version_before: str | None
    output_version_after: str | None
    set_aside_to: str
    actions: list[str]


@dataclass(frozen=True)
class ResetResult(ResetPlan):
    """The plan, and (unless a dry run) the operation that carried it out: its id, where it kept
    the old checkpoint and topic copies (``reset --undo`` puts them back), and what it saved."""

    dry_run: bool = False
    operation_id: int | None = absent()
    aside: str | None = absent()
    saved: dict[str, Any] | None = absent()
    seconds: float | None = absent()


# -- inputs of a plan ------------------------------------------------------------------------------
def _watermarks(kafka: KafkaConfig, spec: AppSpec) -> dict[TP, tuple[int, int]]:
    from streamops.kafka.admin import end_offsets

    return {(t, p): lh for t in spec.input_topics for p, lh in end_offsets(kafka, t).items()}


def _times(kafka: KafkaConfig, spec: AppSpec, timestamp_ms: int) -> dict[TP, int | None]:
    from streamops.kafka.admin import offsets_for_times

    return {(t, p): o for t in spec.input_topics for p, o in offsets_for_times(kafka, t, timestamp_ms).items()}


def _by_topic(moves: list[PartitionMove]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for m in moves:
        out.setdefault(m.topic, {})[str(m.partition)] = m.target
    return out


# -- plan ------------------------------------------------------------------------------------------
def reset_plan(settings: Settings, spec: AppSpec, ledger: Ledger, target: ResetTarget, *, kafka: KafkaConfig,
               state: str = "wipe", force: bool = False, output_version: str | None = None) -> ResetPlan:
    """Everything a reset would do, computed from the checkpoint and the broker (``kafka``: the
    app's client configuration); changes nothing."""
    if state not in STATES:
        raise UsageError(f"--state must be one of {', '.join(STATES)}, got {state!r}")
    if state == "keep" and not force:
        raise UsageError("--state keep replays input into state that already counted it: every replayed record "
                         "is counted twice. Add --force if that is what you want; the default --state wipe "
                         "starts from empty state")
    check_version(output_version)
    ckpt = checkpoint_dir(settings, spec)
    batch = layout.last_committed_batch(ckpt)
    if state == "keep" and batch is None:
        raise UsageError(f"{spec.name}: --state keep needs a committed batch to keep; {ckpt} has none")
    ts = target.timestamp_ms()
    moves = resolve(target, watermarks=_watermarks(kafka, spec), current=layout.next_offsets(ckpt),
                    times=_times(kafka, spec, ts) if ts is not None else None)
    live_before = ledger.output_version(spec.name)
    out_before = versioned_output(spec.output_topic, live_before)
    out_after = versioned_output(spec.output_topic, output_version or live_before)
    running = driver.running(settings, spec.name) is not None
    parts = len(cc.partitions(ckpt)) or spec.state_partitions
    aside = str(aside_dir(settings, spec.name) / "<time>-op<id>")
    actions = []
    if running:
        actions.append("stop the app at a batch boundary (--stop-first)")
    actions.append(f"save the latest value per key of {spec.changelog_topic}"
                   + ("" if output_version else f" and {out_before}") + f" to {aside} (for --undo)")
    if state == "wipe":
        actions += [f"set the checkpoint aside to {aside}/checkpoint (kept whole)",
                    f"make a new checkpoint starting at the offsets above, with empty state ({parts} partitions)",
                    f"recreate {spec.changelog_topic} empty (it mirrors the state)",
                    "rewind the batch marker to -1: the next batch is 0"]
    else:
        actions += [f"copy the checkpoint to {aside}/checkpoint",
                    (f"keep the state at version {batch + 1}; batch {batch + 1} reads from the offsets above "
                     f"(replayed records are counted again)"),
                    f"keep {spec.changelog_topic} (it mirrors the kept state)",
                    f"rewind the batch marker to {batch}: the next batch is {batch + 1}"]
    if out_after != out_before:
        actions.append(f"write the output to {out_after} from now on; {out_before} stays as it is")
    else:
        actions.append(f"keep writing {out_before}: reprocessed keys get new upserts there")
    if running:
        actions.append("start the app again at its parallelism")
    return ResetPlan(
        app=spec.name, target=target.describe(), params=target.params(),
        timestamp_ms=ts, state=state, running=running, checkpoint=str(ckpt), batch_id=batch,
        state_partitions=parts, offsets=[m.to_dict() for m in moves],
        records_to_reprocess=sum(m.reprocess for m in moves), records_to_skip=sum(m.skip for m in moves),
        records_to_process=sum(m.to_process for m in moves), clamped=sum(m.clamped for m in moves),
        changelog_topic=spec.changelog_topic, output_topic_before=out_before, output_topic_after=out_after,
        output_version_before=live_before, output_version_after=output_version or live_before,
        set_aside_to=aside, actions=actions,
    )


# -- execution -------------------------------------------------------------------------------------
def reset(ctx: AppContext, target: ResetTarget, **kwargs: Any) -> ResetResult:
    """``reset_step`` advanced to its end in this process (the CLI)."""
    return waits.wait_here(ctx.ledger, lambda resume: reset_step(ctx, target, resume=resume, **kwargs),
                           waits.convergence(ctx))


def reset_step(ctx: AppContext, target: ResetTarget, *, state: str = "wipe",
               force: bool = False, output_version: str | None = None, dry_run: bool = False,
               stop_first: bool = False, who: str | None = None, timeout: float = 300.0, resume: int | None = None,
               progress: Callable[[str], None] = lambda _m: None) -> waits.Step:
    """Reset the app's input offsets and state (see module docstring; ``lifecycle.waits``). A
    running app is planned again once it stopped (the step resumed after the wait)."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    kafka = ctx.kafka
    plan = reset_plan(settings, spec, ledger, target, kafka=kafka, state=state, force=force,
                      output_version=output_version)
    if dry_run:
        return waits.Done(extend(plan, ResetResult, dry_run=True))
    may_replace_checkpoint(settings, spec, running=plan.running, stop_first=stop_first, what="a reset")
    ckpt = checkpoint_dir(settings, spec)
    before = {"batch": plan.batch_id, "offsets": {f"{t}/{p}": o for (t, p), o in layout.next_offsets(ckpt).items()},
              "output_version": plan.output_version_before}
    try:
        with ledger.operation(spec.name, "reset", {**plan.params, "state": state, "output_version": output_version},
                              who=who, before=before, resume=resume) as rec:
            out = _reset(ctx, rec, plan, state=state, output_version=output_version, who=who,
                         timeout=timeout, progress=progress)
    except HandOver as wait:
        return waits.Waiting(wait.pending)
    return waits.ended(rec, out)


def _reset(ctx: AppContext, rec: OperationRecord, plan: ResetPlan, *,
           state: str, output_version: str | None, who: str | None, timeout: float,
           progress: Callable[[str], None]) -> ResetResult:
    """The reset inside its operation (``rec.after`` set); the reset's result."""
    settings, spec, ledger, kafka = ctx.settings, ctx.spec, ctx.ledger, ctx.kafka
    t0 = time.monotonic()
    ckpt = checkpoint_dir(settings, spec)
    with Replacement(ctx, rec, running=plan.running, who=who, timeout=timeout,
                     progress=progress) as swap:
        parallelism = swap.stop()  # a running app: handed over, and planned again when resumed
        plan = plan.but(running=swap.running)
        moves = {(o["topic"], o["partition"]): o["target"] for o in plan.offsets}
        targets = {t: {str(p): o for (tt, p), o in moves.items() if tt == t} for t, _p in moves}
        aside = swap.aside
        aside.mkdir(parents=True)
        saved = save_topics(kafka, spec, aside, progress=progress,
                            output=plan.output_topic_before if not output_version else None)
        swap.step("saved", folder=str(aside), saved=saved)
        if state == "wipe":
            swap.set_aside(aside / "checkpoint")
            swap.step("install", start=targets)
            layout.write_start_offsets(ckpt, targets)
            swap.step("changelog-recreate", topic=spec.changelog_topic)
            progress(f"{spec.name}: recreating {spec.changelog_topic} empty ...")
            recreate_changelog(kafka, spec)
            marker = swap.rewind(-1)
        else:
            swap.copy_aside(aside / "checkpoint")
            retarget_batch(ckpt, plan.batch_id, targets)
            marker = swap.rewind(plan.batch_id)
        if output_version:
            swap.step("output-version", before=plan.output_version_before, after=output_version)
            ledger.set_output_version(spec.name, output_version, who=who, op=rec.op)
        swap.restart(parallelism, batch_before=-1 if state == "wipe" else plan.batch_id)
    rec.after = {"offsets": {f"{t}/{p}": o for (t, p), o in moves.items()}, "state": state,
                 "aside": str(aside), "saved": saved, "output_version": plan.output_version_after,
                 "rewind_marker": marker}
    return extend(plan, ResetResult, dry_run=False, operation_id=rec.id, aside=str(aside), saved=saved,
                  seconds=round(time.monotonic() - t0, 1))


def retarget_batch(checkpoint: Path, batch_id: int, targets: dict[str, dict[str, int]]) -> None:
    """Make committed batch ``batch_id`` end at ``targets`` (each source line keeps its own topics),
    and drop batches planned after it but never committed, so the next batch starts there."""
    folder = checkpoint / "offsets"
    for later in [p for p in folder.iterdir() if p.name.isdigit() and int(p.name) > batch_id]:
        later.unlink()
        (folder / f".{later.name}.crc").unlink(missing_ok=True)
    for later in [p for p in (checkpoint / "commits").iterdir() if p.name.isdigit() and int(p.name) > batch_id]:
        later.unlink()
        (checkpoint / "commits" / f".{later.name}.crc").unlink(missing_ok=True)
    path = folder / str(batch_id)
    lines = path.read_text().splitlines()
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise ResetError(f"{path}: not an offsets log entry Spark wrote (got {len(lines)} lines)")
    body = lines[:2]
    for line in lines[2:]:
        source = {} if line.strip() in ("", "-") else json.loads(line)
        body.append(json.dumps({t: {p: int(targets.get(t, {}).get(str(p), o)) for p, o in ps.items()}
                                for t, ps in source.items()}, sort_keys=True))
    tmp = path.with_name(f".{batch_id}.rewrite")
    tmp.write_text("\n".join(body))
    tmp.replace(path)
    (folder / f".{batch_id}.crc").unlink(missing_ok=True)  # Hadoop would reject the new bytes



def undo_plan(settings: Settings, spec: AppSpec, ledger: Ledger, op_id: int) -> UndoPlan:
    """``lifecycle.undo.undo_plan``: a reset is undone as every journaled operation is."""
    return lifecycle_undo.undo_plan(settings, spec, ledger, op_id)


def undo(ctx: AppContext, op_id: int, **kwargs: Any) -> UndoResult:
    """``lifecycle.undo.undo`` (``reset --undo OP``)."""
    return lifecycle_undo.undo(ctx, op_id, **kwargs)


def undo_step(ctx: AppContext, op_id: int, **kwargs: Any) -> waits.Step:
    """``lifecycle.undo.undo_step`` (the Airflow reset operator's ``undo`` target)."""
    return lifecycle_undo.undo_step(ctx, op_id, **kwargs)
