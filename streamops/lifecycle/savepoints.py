"""``savepoint`` / ``savepoints`` / ``restore``: checkpoint snapshots as audited operations.

A savepoint is taken while the app keeps running (it copies immutable files, see
``streamops.checkpoints.savepoint``). A restore stops the app at a batch boundary, sets the
current checkpoint aside (never deleted by the restore), installs the verified savepoint, writes
a rewind marker so the batches after it are emitted again without double counting, and starts
the app again at its previous parallelism. The dry run prints the plan and changes nothing.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.context import AppContext
from streamops.checkpoints import layout
from streamops.checkpoints.lineage import checkpoint_id
from streamops.checkpoints.savepoint import SavepointError, expired, install, snapshot, verify
from streamops.ledger import Ledger
from streamops.ledger.store import HandOver
from streamops.lifecycle import operations as ops
from streamops.lifecycle import waits
from streamops.lifecycle.replace import Replacement, aside_dir
from streamops.results import Result, absent, extend
from streamops.settings import Settings
from streamops.spec import AppSpec, age_seconds


@dataclass(frozen=True)
class SavepointTaken(Result):
    """What ``take`` made: the savepoint, where it lies, its checksum, and what retention removed."""

    app: str
    operation_id: int
    id: str
    path: str
    batch_id: int
    lineage: str | None
    state_version: int
    sha256: str
    bytes: int
    files: int
    offsets: dict[str, Any]
    seconds: float
    removed: list[str]


@dataclass(frozen=True)
class RestorePlan(Result):
    """What a restore would do: per partition (``offsets`` rows: topic, partition, current,
    restore_to, reprocess) the offsets it rewinds, and whether the app is stopped and started."""

    app: str
    savepoint: str
    sha256: str
    verified: bool
    batch_id: int
    state_version: int
    current_batch: int | None
    offsets: list[dict[str, Any]]
    records_to_reprocess: int
    checkpoint: str
    set_aside_to: str
    restart: bool
    parallelism: int | None


@dataclass(frozen=True)
class RestoreResult(RestorePlan):
    """The plan, and (unless a dry run) the operation that carried it out."""

    dry_run: bool = False
    operation_id: int | None = absent()
    aside: str | None = absent()
    seconds: float | None = absent()


@dataclass(frozen=True)
class SavepointRow(Result):
    """One row of ``savepoints``: the ledger's record of a savepoint (``created_at`` in ISO 8601),
    whether its files are still there, the checkpoint lineage it was taken from (``current``: the
    one the app runs on now) and how long the take took."""

    id: str
    app: str
    batch_id: int
    path: str
    sha256: str
    bytes: int
    offsets: dict[str, Any]
    created_at: str
    operation_id: int | None
    present: bool
    lineage: str | None
    current: bool
    seconds: float | None


def savepoints_dir(settings: Settings, app: str) -> Path:
    return settings.state_dir / "savepoints" / app


def take(ctx: AppContext, *, who: str | None = None,
         progress: Callable[[str], None] = lambda _m: None) -> SavepointTaken:
    """Snapshot the last committed batch while the app runs; then apply retention."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    ckpt = checkpoint_dir(settings, spec)
    batch = layout.last_committed_batch(ckpt)
    if batch is None:
        raise SavepointError(f"{spec.name}: nothing committed yet in {ckpt}; deploy it and wait for a batch")
    with ledger.operation(spec.name, "savepoint", {}, who=who, before={"batch": batch}) as rec:
        t0 = time.monotonic()
        sid = f"{spec.name}-b{batch}-{datetime.now(UTC):%Y%m%dT%H%M%S}"
        dest = savepoints_dir(settings, spec.name) / sid
        dest.parent.mkdir(parents=True, exist_ok=True)
        progress(f"{spec.name}: copying the checkpoint at batch {batch} to {dest} ...")
        manifest = snapshot(ckpt, dest, spec.name, batch)
        seconds = round(time.monotonic() - t0, 3)
        ledger.add_savepoint(id=sid, app=spec.name, batch_id=batch, path=str(dest), sha256=manifest.sha256,
                             bytes=manifest.bytes, offsets=manifest.offsets, op=rec.op)
        removed = apply_retention(settings, spec, ledger, keep=sid)
        lineage = checkpoint_id(dest)
        rec.after = {"savepoint": sid, "batch": batch, "sha256": manifest.sha256, "bytes": manifest.bytes,
                     "files": len(manifest.files), "seconds": seconds, "removed": removed, "lineage": lineage}
    return SavepointTaken(app=spec.name, operation_id=rec.id, id=sid, path=str(dest), batch_id=batch,
                          lineage=lineage, state_version=manifest.state_version, sha256=manifest.sha256,
                          bytes=manifest.bytes, files=len(manifest.files), offsets=manifest.offsets,
                          seconds=seconds, removed=removed)


def apply_retention(settings: Settings, spec: AppSpec, ledger: Ledger, keep: str | None = None) -> list[str]:
    """Delete savepoints beyond the spec's count and age (never ``keep``, never the newest)."""
    policy = spec.savepoints
    removed = []
    for sp in expired(ledger.savepoints(spec.name), policy.retain_count, age_seconds(policy.retain_age)):
        if sp["id"] == keep:
            continue
        shutil.rmtree(sp["path"], ignore_errors=True)
        ledger.delete_savepoint(sp["id"])
        removed.append(sp["id"])
    return removed


def listing(settings: Settings, spec: AppSpec, ledger: Ledger) -> list[SavepointRow]:
    """Newest first, with whether the files are still there, the checkpoint lineage each was taken
    from and how long it took.

    Batch numbers start again at 0 after a reset (a new checkpoint), so ``b0`` alone does not say
    which run a savepoint belongs to; the lineage (Spark's query id in the checkpoint's
    ``metadata``, copied into the savepoint) does, and ``current`` marks the savepoints of the
    checkpoint the app runs on now."""
    current = checkpoint_id(checkpoint_dir(settings, spec))
    rows = []
    for sp in ledger.savepoints(spec.name):
        path = Path(sp["path"])
        op = ledger.get_operation(sp["operation_id"]) if sp.get("operation_id") is not None else None
        after = (op or {}).get("after") or {}
        lineage = checkpoint_id(path) or after.get("lineage")  # the files, else what the take recorded
        rows.append(SavepointRow(
            id=sp["id"], app=sp["app"], batch_id=sp["batch_id"], path=sp["path"], sha256=sp["sha256"],
            bytes=sp["bytes"], offsets=sp["offsets"], created_at=sp["created_at"].isoformat(),
            operation_id=sp["operation_id"], present=path.is_dir(), lineage=lineage,
            current=lineage is not None and lineage == current, seconds=after.get("seconds")))
    return rows


def _find(ledger: Ledger, spec: AppSpec, savepoint_id: str) -> dict[str, Any]:
    known = ledger.savepoints(spec.name)
    for sp in known:
        if sp["id"] == savepoint_id:
            return sp
    from streamops.exceptions import UsageError

    names = ", ".join(sp["id"] for sp in known[:10]) or "none (take one with `streamops savepoint APP`)"
    raise UsageError(f"{spec.name}: no savepoint {savepoint_id!r}; known: {names}")


def restore_plan(settings: Settings, spec: AppSpec, ledger: Ledger, savepoint_id: str) -> RestorePlan:
    """What a restore would do: per partition current -> savepoint offset and records to reprocess."""
    sp = _find(ledger, spec, savepoint_id)
    manifest = verify(Path(sp["path"]), sp["sha256"])
    ckpt = checkpoint_dir(settings, spec)
    current = {t: {str(p): o for p, o in ps.items()} for t, ps in layout.committed_offsets(ckpt).items()}
    partitions = []
    for topic in sorted(set(current) | set(manifest.offsets)):
        for p in sorted(set(current.get(topic, {})) | set(manifest.offsets.get(topic, {})), key=int):
            now, to = current.get(topic, {}).get(p), manifest.offsets.get(topic, {}).get(p, 0)
            partitions.append({"topic": topic, "partition": int(p), "current": now, "restore_to": to,
                               "reprocess": max(0, (now or 0) - to)})
    desired = ledger.desired(spec.name) or {}
    return RestorePlan(
        app=spec.name, savepoint=sp["id"], sha256=sp["sha256"], verified=True,
        batch_id=manifest.batch_id, state_version=manifest.state_version,
        current_batch=layout.last_committed_batch(ckpt), offsets=partitions,
        records_to_reprocess=sum(p["reprocess"] for p in partitions),
        checkpoint=str(ckpt), set_aside_to=str(aside_dir(settings, spec.name) / "<time>-op<id>"),
        restart=desired.get("status") == "running", parallelism=desired.get("parallelism"),
    )


def restore(ctx: AppContext, savepoint_id: str, **kwargs: Any) -> RestoreResult:
    """``restore_step`` advanced to its end in this process (the CLI)."""
    return waits.wait_here(ctx.ledger, lambda resume: restore_step(ctx, savepoint_id, resume=resume,
                                                               **kwargs),
                           waits.convergence(ctx))


def restore_step(ctx: AppContext, savepoint_id: str, *, dry_run: bool = False,
                 who: str | None = None, timeout: float = 300.0, resume: int | None = None,
                 progress: Callable[[str], None] = lambda _m: None) -> waits.Step:
    """Stop, set the checkpoint aside, install the savepoint, rewind the sink, restart (``waits``)."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    plan = restore_plan(settings, spec, ledger, savepoint_id)
    if dry_run:
        return waits.Done(extend(plan, RestoreResult, dry_run=True))
    if plan.restart:  # the supervisor stops and restarts a running app; a stopped one needs none
        ops.require_supervisor(settings)
    try:
        with ledger.operation(spec.name, "restore", {"savepoint": savepoint_id}, who=who, resume=resume,
                              before={"batch": plan.current_batch, "offsets": plan.offsets}) as rec:
            t0 = time.time()
            with Replacement(ctx, rec, running=plan.restart,
                             who=who, timeout=timeout, progress=progress) as swap:
                parallelism = swap.stop()
                sp = _find(ledger, spec, savepoint_id)
                verify(Path(sp["path"]), sp["sha256"])  # again: nothing may have changed since the plan
                aside = swap.set_aside()
                progress(f"{spec.name}: checkpoint set aside to {aside}; installing {savepoint_id} ...")
                swap.step("install", savepoint=savepoint_id)
                install(Path(sp["path"]), checkpoint_dir(settings, spec), aside)
                marker = swap.rewind(plan.batch_id)
                swap.restart(parallelism, batch_before=plan.batch_id)
            rec.after = {"batch": layout.last_committed_batch(checkpoint_dir(settings, spec)), "aside": str(aside),
                         "savepoint": savepoint_id, "rewind_marker": marker}
    except HandOver as wait:
        return waits.Waiting(wait.pending)
    return waits.ended(rec, extend(plan.but(restart=swap.running), RestoreResult, dry_run=False,
                                   operation_id=rec.id, aside=str(aside), seconds=round(time.time() - t0, 1)))
