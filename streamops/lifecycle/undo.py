"""``streamops undo APP OP``: reverse what a checkpoint-replacing operation did, from its journal.

reset, restore, rebuild-state, promote and undo itself journal each step before they take it
(``lifecycle.replace``). Whether the operation succeeded, failed half way (a restart that timed
out, a topic that could not be recreated) or its process was killed, the journal says what it may
have done, and the undo reverses exactly that:

* the checkpoint it set aside comes back (the current one is set aside in turn, never deleted);
* if it recreated the changelog, the changelog and the output it saved are written back (keys the
  output gained since get tombstones);
* the output version it changed is set back;
* the batch marker is rewound to the restored checkpoint's last batch, so nothing is skipped;
* an app that ran before the operation runs again.

An undo is itself journaled, so it can be undone as well. The dry run prints the plan.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.context import AppContext
from streamops.checkpoints import layout, lineage
from streamops.exceptions import StreamopsError, UsageError
from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger
from streamops.ledger.store import HandOver, OperationRecord
from streamops.lifecycle import driver, waits
from streamops.lifecycle import operations as ops
from streamops.lifecycle.replace import Replacement, aside_dir, may_replace_checkpoint
from streamops.lifecycle.topic_copies import SAVED, recreate_changelog, save_topics, write_back
from streamops.results import Result, absent, extend
from streamops.settings import Settings
from streamops.spec import AppSpec, versioned_output

#: the operations an undo reverses ("reset-undo": the name undo had before it served them all)
UNDOABLE = ("reset", "restore", "rebuild-state", "promote", "undo", "reset-undo")
UNDOES = ("undo", "reset-undo")


class UndoError(StreamopsError):
    """What the operation kept for its undo is gone, so it cannot be reversed.

    Operator action: read the message; nothing was changed. A savepoint restore or a reset may still
    bring the app to a known state.
    """


@dataclass(frozen=True)
class Done:
    """What an operation may have changed, read from its journal."""

    steps: tuple[str, ...]
    was_running: bool = False
    parallelism: int | None = None
    #: the checkpoint it replaced, kept aside (None: it never moved or changed the checkpoint)
    checkpoint_before: Path | None = None
    #: the batch marker when it was set aside (None: not recorded, or there was none)
    marker_before: dict[str, Any] | None = None
    #: where it saved the topics it replaced, and what ({role: {"topic", "keys"}})
    saved_in: Path | None = None
    saved: dict[str, Any] = field(default_factory=dict)
    changelog_recreated: bool = False
    #: (before, after) of an output version change
    output_version: tuple[str | None, str | None] | None = None
    rewound: bool = False


@dataclass(frozen=True)
class UndoPlan(Result):
    """What an undo would do, for the operator to read before it runs: the operation it reverses
    (``undo``: its id, its kind, outcome and journaled ``steps``), per partition (``offsets`` rows:
    topic, partition, current, restore_to) where the input goes back to, and the ``actions``."""

    app: str
    undo: int
    kind: str
    outcome: str
    error: str | None
    params: dict[str, Any] | None
    steps: list[str]
    running: bool
    restart: bool
    checkpoint_before: str | None
    checkpoint: str
    current_batch: int | None
    restore_batch: int | None
    offsets: list[dict[str, Any]]
    output_version_after: str | None
    saved: dict[str, Any]
    actions: list[str]


@dataclass(frozen=True)
class UndoResult(UndoPlan):
    """The plan, and (unless a dry run) the undo operation that carried it out (it can be undone in
    turn): where it set the replaced checkpoint aside, and the keys it wrote back per topic role."""

    dry_run: bool = False
    operation_id: int | None = absent()
    set_aside: str | None = absent()
    written: dict[str, Any] | None = absent()
    seconds: float | None = absent()


def _legacy_journal(op: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps of an operation recorded before journals existed, from what it recorded at the end."""
    after = op.get("after") or {}
    if op["outcome"] != "succeeded" or "aside" not in after:
        return []
    aside = Path(after["aside"])
    if op["kind"] != "reset":
        return [{"step": "set-aside", "path": str(aside)}, {"step": "rewind"}]
    steps: list[dict[str, Any]] = [{"step": "saved", "folder": str(aside), "saved": after.get("saved") or {}},
                                   {"step": "set-aside", "path": str(aside / "checkpoint")}]
    if after.get("state", "wipe") == "wipe":
        steps.append({"step": "changelog-recreate"})
    before_v = (op.get("before") or {}).get("output_version")
    if after.get("output_version") != before_v:
        steps.append({"step": "output-version", "before": before_v, "after": after.get("output_version")})
    return [*steps, {"step": "rewind"}]


def read_done(op: dict[str, Any]) -> Done:
    """``Done`` from an operation row: its journal (or, for old rows, what it recorded after)."""
    journal = op.get("journal")
    if journal is None:
        journal = _legacy_journal(op)
    out: dict[str, Any] = {"steps": tuple(s["step"] for s in journal)}
    last = len(journal) - 1
    for i, s in enumerate(journal):
        name = s["step"]
        if name == "stop":
            out.update(was_running=bool(s.get("was_running")), parallelism=s.get("parallelism"))
        elif name in ("set-aside", "copied-aside"):
            path = Path(s["path"])
            if path.exists():
                if "checkpoint_before" not in out:  # the first one is the original
                    out.update(checkpoint_before=path, marker_before=s.get("marker"))
            elif name == "set-aside" and i < last:
                # journaled, followed by more steps, and gone: someone removed it since
                raise UndoError(f"operation #{op['id']} set the checkpoint aside to {path}, and it is gone: "
                                f"there is no checkpoint to put back")
            # journaled last and absent: the process died before the rename; the checkpoint is in place
        elif name == "saved":
            out.update(saved_in=Path(s["folder"]), saved=s.get("saved") or {})
        elif name == "changelog-recreate":
            out["changelog_recreated"] = True
        elif name == "output-version":
            out.setdefault("output_version", (s.get("before"), s.get("after")))
        elif name == "rewind":
            out["rewound"] = True
    return Done(**out)


def _undoable(settings: Settings, spec: AppSpec, ledger: Ledger, op_id: int) -> dict[str, Any]:
    ledger.release_abandoned(spec.name)  # a holder killed half way: its operation is failed now, not running
    op = ledger.get_operation(op_id)
    if op is None or op["app"] != spec.name:
        raise UsageError(f"{spec.name}: no operation #{op_id} of this app (see `streamops status {spec.name}`)")
    if op["kind"] not in UNDOABLE:
        raise UsageError(f"operation #{op_id} is a {op['kind']}; undo reverses {', '.join(UNDOABLE[:-1])}")
    if op["outcome"] == "running":
        raise UsageError(f"{op['kind']} #{op_id} is still running (asked by {op['requested_by']}); wait for it to "
                         f"end, then undo it")
    if op["outcome"] == "refused":
        raise UsageError(f"{op['kind']} #{op_id} was refused: it changed nothing, there is nothing to undo")
    for later in undos_of(ledger, spec.name, op_id):
        if later["outcome"] == "succeeded":
            raise UsageError(f"{op['kind']} #{op_id} was already undone by operation #{later['id']}")
    return op


def undos_of(ledger: Ledger, app: str, op_id: int) -> list[dict[str, Any]]:
    """The undos of operation ``op_id`` (whatever their outcome), newest first."""
    return [o for o in ledger.operations(app, limit=1000)
            if o["kind"] in UNDOES and (o["params"] or {}).get("undo") == op_id]


def undo_plan(settings: Settings, spec: AppSpec, ledger: Ledger, op_id: int) -> UndoPlan:
    """What ``undo`` would do; changes nothing."""
    op = _undoable(settings, spec, ledger, op_id)
    done = read_done(op)
    ckpt = checkpoint_dir(settings, spec)
    old = done.checkpoint_before
    if old is not None and done.marker_before is not None:
        problem = lineage.mismatch(done.marker_before, lineage.checkpoint_id(old), layout.last_committed_batch(old))
        if problem is not None:  # putting it back would bless that: refuse, as a driver would
            raise UndoError(f"{op['kind']} #{op_id} set aside a checkpoint that did not agree with the app's output "
                            f"then ({problem}); putting it back would lose output. Leave it set aside: finish the "
                            f"operation instead (`streamops deploy {spec.name}` if only its restart failed), or "
                            f"`streamops reset {spec.name} --to-earliest`")
    now = layout.next_offsets(ckpt)
    then = layout.next_offsets(old) if old is not None else now
    offsets = [{"topic": t, "partition": p, "current": now.get((t, p)), "restore_to": then.get((t, p))}
               for t, p in sorted(set(now) | set(then))]
    running = driver.running(settings, spec.name) is not None
    restart = running or done.was_running
    version_now = ledger.output_version(spec.name)
    version = done.output_version[0] if done.output_version else version_now
    actions = ["stop the app at a batch boundary (--stop-first)"] if running else []
    if old is not None:
        actions += [f"set the current checkpoint aside to {aside_dir(settings, spec.name)}/<time>-op<id>/checkpoint",
                    (f"put back the checkpoint {op['kind']} #{op_id} set aside ({old}, batch "
                     f"{layout.last_committed_batch(old)})")]
    if done.changelog_recreated:
        actions.append(f"recreate {spec.changelog_topic} and write back its "
                       f"{done.saved.get('changelog', {}).get('keys', 0)} saved keys")
        if "output" in done.saved:
            actions.append(f"write back the {done.saved['output']['keys']} saved keys of "
                           f"{done.saved['output']['topic']} (keys added since: tombstones)")
    if done.output_version and version != version_now:
        actions.append(f"write the output to {versioned_output(spec.output_topic, version)} again")
    if old is not None or done.rewound:
        actions.append("rewind the batch marker to the restored checkpoint's last batch")
    if restart:
        actions.append("start the app again at its parallelism")
    if not (old is not None or done.changelog_recreated or done.output_version or done.rewound):
        actions.append(f"nothing else: {op['kind']} #{op_id} changed nothing before it ended")
    return UndoPlan(app=spec.name, undo=op_id, kind=op["kind"], outcome=op["outcome"], error=op["error"],
                    params=op["params"], steps=list(done.steps), running=running, restart=restart,
                    checkpoint_before=str(old) if old is not None else None, checkpoint=str(ckpt),
                    current_batch=layout.last_committed_batch(ckpt),
                    restore_batch=layout.last_committed_batch(old if old is not None else ckpt), offsets=offsets,
                    output_version_after=version, saved=done.saved if done.changelog_recreated else {},
                    actions=actions)


def undo(ctx: AppContext, op_id: int, **kwargs: Any) -> UndoResult:
    """``undo_step`` advanced to its end in this process (the CLI)."""
    return waits.wait_here(ctx.ledger, lambda resume: undo_step(ctx, op_id, resume=resume, **kwargs),
                           waits.convergence(ctx))


def undo_step(ctx: AppContext, op_id: int, *, dry_run: bool = False,
              stop_first: bool = False, who: str | None = None, timeout: float = 300.0, resume: int | None = None,
              progress: Callable[[str], None] = lambda _m: None) -> waits.Step:
    """Reverse operation ``op_id`` (module docstring; ``lifecycle.waits``)."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    plan = undo_plan(settings, spec, ledger, op_id)
    if dry_run:
        return waits.Done(extend(plan, UndoResult, dry_run=True))
    may_replace_checkpoint(settings, spec, running=plan.running, stop_first=stop_first, what="an undo")
    if plan.restart:
        ops.require_supervisor(settings)
    try:
        with ledger.operation(spec.name, "undo", {"undo": op_id, "kind": plan.kind}, who=who, resume=resume,
                              before={"batch": plan.current_batch,
                                      "output_version": ledger.output_version(spec.name)}) as rec:
            out = _undo(ctx, rec, op_id, plan, who=who, timeout=timeout, progress=progress)
    except HandOver as wait:
        return waits.Waiting(wait.pending)
    return waits.ended(rec, out)


def _undo(ctx: AppContext, rec: OperationRecord, op_id: int, plan: UndoPlan, *, who: str | None, timeout: float,
          progress: Callable[[str], None]) -> UndoResult:
    """The undo inside its operation (``rec.after`` set); the undo's result."""
    settings, spec, ledger, kafka = ctx.settings, ctx.spec, ctx.ledger, ctx.kafka
    done = read_done(ledger.get_operation(op_id) or {})
    ckpt = checkpoint_dir(settings, spec)
    t0 = time.monotonic()
    written: dict[str, Any] = {}
    with Replacement(ctx, rec, running=plan.restart, who=who, timeout=timeout,
                     progress=progress) as swap:
        parallelism = swap.stop(driver_running=plan.running)
        plan = plan.but(running=swap.facts["driver_running"])  # as before the stop, when resumed
        if done.parallelism is not None and not plan.running:
            parallelism = done.parallelism  # the size it ran at before the operation stopped it
        aside = swap.aside
        aside.mkdir(parents=True)
        if done.changelog_recreated:  # kept, so that this undo can be undone too
            output = done.saved.get("output", {}).get("topic")
            swap.step("saved", folder=str(aside),
                      saved=save_topics(kafka, spec, aside, output=output, progress=progress,
                                        changelog_missing_ok=True))
        if done.checkpoint_before is not None:
            swap.set_aside(aside / "checkpoint")
            # the operation's aside copy stays where it is: it can still be looked at
            shutil.copytree(done.checkpoint_before, aside / "restoring")
            swap.install(aside / "restoring")
        if done.changelog_recreated:
            written = _write_back_saved(kafka, spec, swap, done, progress)
        version_now = ledger.output_version(spec.name)
        if plan.output_version_after != version_now:
            swap.step("output-version", before=version_now, after=plan.output_version_after)
            ledger.set_output_version(spec.name, plan.output_version_after, who=who, op=rec.op)
        batch = layout.last_committed_batch(ckpt)
        marker = swap.rewind(-1 if batch is None else batch) \
            if done.checkpoint_before is not None or done.rewound else None
        swap.restart(parallelism, batch_before=batch)
    rec.after = {"batch": batch, "aside": str(aside), "written": written, "rewind_marker": marker,
                 "output_version": plan.output_version_after}
    return extend(plan, UndoResult, dry_run=False, operation_id=rec.id, set_aside=str(aside), written=written,
                  seconds=round(time.monotonic() - t0, 1))


def _write_back_saved(kafka: KafkaConfig, spec: AppSpec, swap: Replacement, done: Done,
                      progress: Callable[[str], None]) -> dict[str, Any]:
    """The changelog (and output) the undone operation saved, written back into a new changelog."""
    assert done.saved_in is not None
    swap.step("changelog-recreate", topic=spec.changelog_topic)
    progress(f"{spec.name}: recreating {spec.changelog_topic} from the saved copy ...")
    recreate_changelog(kafka, spec)
    written = {"changelog": write_back(kafka, done.saved_in / SAVED["changelog"], spec.changelog_topic,
                                       tombstones=False)}
    if "output" in done.saved:
        written["output"] = write_back(kafka, done.saved_in / SAVED["output"], done.saved["output"]["topic"],
                                       tombstones=True)
    return written


