"""``compact`` and ``rebuild-state``: state maintenance as audited operations.

compact: reads the state at the last committed batch B (immutable files, safe while the app runs),
seeds one snapshot zip of version B+1 per partition and installs it into the live checkpoint,
then deletes what no retained batch needs (see ``streamops.checkpoints.compact``) and the
savepoints beyond retention. The app keeps running: there is no pause at all.

rebuild-state: as Kafka Streams restores a store from its changelog topic — a new checkpoint
whose state is the changelog's latest value per key, whose input offsets are those of the batch
that wrote it (the last batch marker's ``input_end``), with any number of state partitions. The
old checkpoint is set aside, never deleted; the batch marker is rewound to the new checkpoint's
batch 0 so the app's next batch is written.

Both return typed results (``CompactPlan``/``CompactResult``, ``RebuildPlan``/``RebuildResult``):
a result's ``to_dict`` is what ``--json`` prints and an Airflow task returns.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from streamops.app.checkpoint import checkpoint_dir, lock_checkpoint
from streamops.app.context import AppContext
from streamops.app.shape import input_scans
from streamops.checkpoints import compact as cc
from streamops.checkpoints import layout
from streamops.exceptions import StreamopsError, UsageError
from streamops.host.locks import LockHeld
from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger
from streamops.ledger.store import HandOver, OperationRecord
from streamops.lifecycle import driver, waits
from streamops.lifecycle.replace import Replacement, aside_dir, may_replace_checkpoint
from streamops.lifecycle.savepoints import apply_retention
from streamops.named_state import decode_changelog
from streamops.results import Result, absent, extend
from streamops.settings import Settings
from streamops.spark.query.plan import JobQuery
from streamops.spec import AppSpec, age_seconds, load_job
from streamops.state import seed


class NothingToMaintain(StreamopsError):
    """The app has no committed batch (compact) or no batch marker (rebuild-state) yet.

    Operator action: deploy the app and let it commit a batch first.
    """


@dataclass(frozen=True)
class CompactPlan(Result):
    """What compacting would do at the last committed batch: per partition the changelog chain
    before and after (``chains_*``: "op/part" -> snapshot, changelogs), the files it deletes, the
    savepoints retention removes. ``running``: whether a driver ran when planned; ``live``: whether
    it compacts as if one does (keeps what a running executor may still read)."""

    app: str
    batch_id: int
    running: bool
    bytes_before: int
    checkpoint: str
    state_version: int
    live: bool
    install_snapshots: list[str]
    delete_files: int
    delete_bytes: int
    chains_before: dict[str, dict[str, int]]
    chains_after: dict[str, dict[str, int]]
    savepoints_beyond_retention: list[str]


@dataclass(frozen=True)
class CompactResult(CompactPlan):
    """The plan it carried out (planned again once it knew whether a driver runs), and unless a
    dry run what that did: the snapshots installed, bytes freed, state restore time before/after."""

    dry_run: bool = False
    operation_id: int | None = absent()
    installed: list[str] | None = absent()
    freed_bytes: int | None = absent()
    bytes_after: int | None = absent()
    restore_seconds_before: float | None = absent()
    restore_seconds_after: float | None = absent()
    savepoints_removed: list[str] | None = absent()
    seconds: float | None = absent()


#: what a compaction journals as its ``after`` (the ledger's record), out of its result
_COMPACT_AFTER = ("batch_id", "bytes_after", "freed_bytes", "restore_seconds_before", "restore_seconds_after",
                  "installed", "savepoints_removed", "live")


@dataclass(frozen=True)
class RebuildPlan(Result):
    """What rebuild-state would do: where the new checkpoint's input starts (``offsets`` rows:
    topic, partition, checkpoint, start_at), its state partitions, the actions in order, and
    ``spec_note`` when the spec's state_partitions would no longer match. ``changelog_keys`` is
    None until the changelog was read (a dry run reads it)."""

    app: str
    running: bool
    marker_batch: int
    query_sources: int
    stream_time: dict[str, Any] | None
    checkpoint_batch: int | None
    state_partitions_before: int | None
    state_partitions_after: int
    changelog_topic: str
    changelog_keys: int | None
    offsets: list[dict[str, Any]]
    checkpoint: str
    set_aside_to: str
    actions: list[str]
    spec_note: str | None


@dataclass(frozen=True)
class RebuildResult(RebuildPlan):
    """The plan, and (unless a dry run) the operation that carried it out and where the old
    checkpoint was set aside."""

    dry_run: bool = False
    operation_id: int | None = absent()
    aside: str | None = absent()
    seconds: float | None = absent()


def _tmp(settings: Settings, spec: AppSpec, what: str) -> Path:
    path = settings.state_dir / "tmp" / f"{what}-{spec.name}-{datetime.now(UTC):%Y%m%dT%H%M%S%f}"
    path.mkdir(parents=True)
    return path


def restore_seconds(spark, job_cls: type, checkpoint: Path, batch_id: int) -> float:
    """What a restore pays for the state: load every partition at ``batch_id`` (snapshot + replay)."""
    from streamops.state.store import load_all

    t0 = time.monotonic()
    load_all(spark, job_cls, str(checkpoint), batch_id)
    return round(time.monotonic() - t0, 3)


def compact_plan(settings: Settings, spec: AppSpec, ledger: Ledger, *, live: bool | None = None) -> CompactPlan:
    """``live``: a driver runs (default: its pid record says so)."""
    return _compact_plan(settings, spec, ledger, live=live)[0]


def _compact_plan(settings: Settings, spec: AppSpec, ledger: Ledger, *,
                  live: bool | None) -> tuple[CompactPlan, cc.Plan]:
    """The plan as the result shows it, and the files it names (which the result leaves out)."""
    ckpt = checkpoint_dir(settings, spec)
    batch = layout.last_committed_batch(ckpt)
    if batch is None:
        raise NothingToMaintain(f"{spec.name}: nothing committed in {ckpt}; nothing to compact")
    if live is None:
        live = driver.running(settings, spec.name) is not None
    p = cc.plan(ckpt, batch + 1, live=live)
    from streamops.checkpoints.savepoint import expired

    policy = spec.savepoints
    gone = [sp["id"] for sp in expired(ledger.savepoints(spec.name), policy.retain_count,
                                       age_seconds(policy.retain_age))]
    return CompactPlan(app=spec.name, batch_id=batch, running=live, bytes_before=cc.tree_bytes(ckpt),
                       **p.to_dict(), savepoints_beyond_retention=gone), p


def compact(ctx: AppContext, *, dry_run: bool = False, who: str | None = None,
            spark=None, progress: Callable[[str], None] = lambda _m: None) -> CompactResult:
    """Consolidate the state into one snapshot at the last committed batch and drop what no
    retained batch needs; safe while the app runs. Dry run: the plan only.

    On a stopped app it holds the checkpoint lock throughout, so no driver starts and uploads
    files while it deletes the ones no batch needs; if a driver holds the lock, it compacts live."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    info, plan = _compact_plan(settings, spec, ledger, live=None)
    if dry_run:
        return extend(info, CompactResult, dry_run=True)
    ckpt, batch = plan.checkpoint, info.batch_id
    query = JobQuery.for_spec(spec, settings.repo)
    operators = {op for op, _p in cc.partitions(ckpt)}
    if operators != {0}:
        raise UsageError(f"{spec.name}: compaction handles one stateful operator, the checkpoint has {sorted(operators)}")
    with ledger.operation(spec.name, "compact", {"batch_id": batch}, who=who,
                          before={"batch": batch, "bytes": info.bytes_before, "chains": info.chains_before}
                          ) as rec, contextlib.ExitStack() as held:
        if not plan.live:
            try:
                held.callback(lock_checkpoint(settings, spec, wait_s=0.0, refused="").release)
                live = False  # and stays so: plan again from what no driver can change any more
            except LockHeld:  # a driver runs after all (started by hand, or just now): compact live
                live = True
            info, plan = _compact_plan(settings, spec, ledger, live=live)
            ckpt, batch = plan.checkpoint, info.batch_id
        t0 = time.monotonic()
        own = spark is None
        spark = spark or seed.seed_session(settings)
        tmp = _tmp(settings, spec, "compact")
        try:
            progress(f"{spec.name}: loading the state at batch {batch} (restore time before) ...")
            before_s = restore_seconds(spark, query.job_cls, ckpt, batch)
            installed = _install_snapshots(spark, query, plan, batch, tmp, spec.name, progress) if plan.install else []
            progress(f"{spec.name}: deleting {len(plan.delete)} files no retained batch needs ...")
            freed = cc.delete(plan.delete)
            if not plan.live:
                for ps in cc.partitions(ckpt).values():
                    freed += cc.delete(cc.orphan_ssts(ps))
            removed = apply_retention(settings, spec, ledger)
            after_s = restore_seconds(spark, query.job_cls, ckpt, batch)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            if own:
                spark.stop()
        out = extend(info, CompactResult, dry_run=False, operation_id=rec.id, installed=installed, freed_bytes=freed,
                     bytes_after=cc.tree_bytes(ckpt), restore_seconds_before=before_s,
                     restore_seconds_after=after_s, savepoints_removed=removed,
                     seconds=round(time.monotonic() - t0, 1))
        rec.after = {k: getattr(out, k) for k in _COMPACT_AFTER}
    return out


def _install_snapshots(spark, query: JobQuery, plan: cc.Plan, batch: int, tmp: Path, app: str,
                       progress: Callable[[str], None]) -> list[str]:
    """Seed one snapshot of state version ``plan.version`` per partition from the state at ``batch``
    (in ``tmp``) and install it into the checkpoint where the plan says: the partitions installed."""
    ckpt = plan.checkpoint
    n = len(cc.partitions(ckpt))
    progress(f"{app}: seeding a snapshot of state version {plan.version} ({n} partitions) ...")
    rows = seed.state_rows(spark, query, ckpt, batch)
    seed.write_seed_input(rows, tmp / "input", seed.seed_columns(query))
    zips = seed.seed_checkpoint(spark, query, tmp / "input", tmp / "seeded", state_partitions=n, progress=progress)
    installed = []
    for op, part in plan.install:
        cc.install_snapshot(zips[part], ckpt / "state" / str(op) / str(part), plan.version)
        installed.append(f"{op}/{part}")
    return installed


# -- rebuild-state -----------------------------------------------------------------------------------
def _input_offsets(kafka: KafkaConfig, spec: AppSpec, marker: dict) -> dict[str, dict[str, int]]:
    """The input the changelog reflects, for every partition of the input topics."""
    from streamops.kafka.admin import partitions

    ends = marker.get("input_end") or marker.get("emitted_until") or {}
    return {t: {str(p): int(ends.get(t, {}).get(str(p), 0)) for p in partitions(kafka, t)}
            for t in spec.input_topics}


def rebuild_plan(settings: Settings, spec: AppSpec, ledger: Ledger, *, kafka: KafkaConfig,
                 state_partitions: int | None = None, changelog: dict[str, bytes] | None = None) -> RebuildPlan:
    """What rebuild-state would do (``kafka``: the app's client configuration); changes nothing."""
    from streamops.app.marker import last_marker

    if state_partitions is not None and not 1 <= state_partitions <= 200:
        raise UsageError(f"--state-partitions must be within 1..200, got {state_partitions}")
    marker = last_marker(kafka, spec.commits_topic, spec.name)
    if not marker:
        raise NothingToMaintain(f"{spec.name}: no batch marker on {spec.commits_topic}: nothing was committed, "
                                f"there is no changelog to rebuild from")
    if marker.get("rewind"):
        raise UsageError(f"{spec.name}: the last marker is a rewind to batch {marker['batch_id']} (a restore or "
                         f"reset): the changelog is ahead of it until the app commits a batch; run it, then rebuild")
    ckpt = checkpoint_dir(settings, spec)
    current_parts = len(cc.partitions(ckpt)) or None
    n = state_partitions or current_parts or spec.state_partitions
    start = _input_offsets(kafka, spec, marker)
    committed = {t: {str(p): o for p, o in ps.items()} for t, ps in layout.committed_offsets(ckpt).items()}
    offsets = [{"topic": t, "partition": int(p), "checkpoint": committed.get(t, {}).get(p), "start_at": o}
               for t, ps in start.items() for p, o in sorted(ps.items(), key=lambda kv: int(kv[0]))]
    running = driver.running(settings, spec.name) is not None
    planned = layout.last_planned_batch(ckpt)
    if planned is not None:
        sources = len(layout.batch_offsets(ckpt, planned))
    else:  # no checkpoint to learn it from: the job says how many scans its plan has
        sources = input_scans(load_job(spec, settings.repo))
    return RebuildPlan(
        app=spec.name, running=running, marker_batch=marker["batch_id"], query_sources=sources,
        stream_time=marker.get("stream_time"),
        checkpoint_batch=layout.last_committed_batch(ckpt), state_partitions_before=current_parts,
        state_partitions_after=n, changelog_topic=spec.changelog_topic,
        changelog_keys=None if changelog is None else len(changelog), offsets=offsets,
        checkpoint=str(ckpt), set_aside_to=str(aside_dir(settings, spec.name) / "<time>-op<id>"),
        actions=[f"read {spec.changelog_topic} (latest value per key, read_committed)",
                 f"seed a new checkpoint with {n} state partitions at batch 0, ending at the offsets above",
                 "set the current checkpoint aside (kept)", "rewind the batch marker to 0 (next batch: 1)"]
                + (["stop the app first and start it again after"] if running else []),
        spec_note=None if n == spec.state_partitions else
        f"include/streams.yaml says state_partitions: {spec.state_partitions}; set it to {n} to match",
    )


class ForeignChangelogKeyError(StreamopsError):
    """The changelog holds a key that is not UTF-8, so no job of this app wrote it (job keys are
    text, written as UTF-8): seeding state from it would change the key on the way back.

    Operator action: find who writes to the changelog topic and remove those records, or rebuild
    from the input instead (`streamops reset APP --to-earliest`).
    """


def read_changelog(kafka: KafkaConfig, spec: AppSpec) -> dict[str, bytes]:
    """The changelog's latest value per key; keys exactly as the job's committer wrote them."""
    from streamops.kafka.read import latest_per_key

    out: dict[str, bytes] = {}
    for key, value in latest_per_key(kafka, spec.changelog_topic, decode=lambda v: v,
                                     raw_keys=True, past_open_transactions=True).items():
        try:
            out[key.decode("utf-8")] = value
        except UnicodeDecodeError:
            raise ForeignChangelogKeyError(
                f"{spec.name}: {spec.changelog_topic} holds the key {key[:60]!r}, which is not UTF-8: no job of "
                f"this app wrote it, and state seeded from it would come back under another key. Remove "
                f"those records, or rebuild from the input (`streamops reset {spec.name} --to-earliest`)") from None
    return out


def repin_state_partitions(settings: Settings, app: str, n: int) -> None:
    """The new checkpoint has ``n`` state partitions: the restarted driver must plan with ``n``,
    not with what the app's last deploy pinned (``streamops.specfile``)."""
    from streamops.app.dir import AppDir

    d = AppDir.of(settings, app)
    pinned = d.pinned_spec()
    if pinned is not None and pinned.state_partitions != n:
        d.pin_spec(pinned.model_copy(update={"state_partitions": n}))


def rebuild_state(ctx: AppContext, **kwargs: Any) -> RebuildResult:
    """``rebuild_state_step`` advanced to its end in this process (the CLI)."""
    out = waits.wait_here(ctx.ledger, lambda resume: rebuild_state_step(ctx, resume=resume, **kwargs),
                          waits.convergence(ctx))
    return cast(RebuildResult, out)  # what the step's ``Done`` carries (``wait_here`` knows only ``Result``)


def rebuild_state_step(ctx: AppContext, *, state_partitions: int | None = None,
                       dry_run: bool = False, stop_first: bool = False, who: str | None = None,
                       timeout: float = 300.0, resume: int | None = None, spark=None,
                       progress: Callable[[str], None] = lambda _m: None) -> waits.Step:
    """Build a new checkpoint from the changelog topic (see module docstring; ``lifecycle.waits``).
    A running app is planned again once it stopped (the step resumed after the wait)."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    kafka = ctx.kafka
    plan = rebuild_plan(settings, spec, ledger, kafka=kafka, state_partitions=state_partitions)
    if dry_run:
        keys = len(read_changelog(kafka, spec))
        return waits.Done(extend(plan.but(changelog_keys=keys), RebuildResult, dry_run=True))
    may_replace_checkpoint(settings, spec, running=plan.running, stop_first=stop_first, what="rebuild-state")
    query = JobQuery.for_spec(spec, settings.repo)  # a job that does not load fails here, before the operation
    seed.seed_columns(query)
    try:
        with ledger.operation(spec.name, "rebuild-state", {"state_partitions": plan.state_partitions_after},
                              who=who, resume=resume,
                              before={"batch": plan.checkpoint_batch,
                                      "state_partitions": plan.state_partitions_before,
                                      "marker_batch": plan.marker_batch}) as rec:
            out = _rebuild(ctx, rec, plan, query, who=who, timeout=timeout, spark=spark,
                           progress=progress)
    except HandOver as wait:
        return waits.Waiting(wait.pending)
    return waits.ended(rec, out)


def _rebuild(ctx: AppContext, rec: OperationRecord, plan: RebuildPlan, query: JobQuery, *, who: str | None,
             timeout: float, spark: Any, progress: Callable[[str], None]) -> RebuildResult:
    """The rebuild inside its operation (``rec.after`` set); the rebuild's result."""
    settings, spec, kafka = ctx.settings, ctx.spec, ctx.kafka
    n = plan.state_partitions_after
    t0 = time.monotonic()
    with Replacement(ctx, rec, running=plan.running, who=who, timeout=timeout,
                     progress=progress) as swap:
        parallelism = swap.stop()
        plan = plan.but(running=swap.running)
        progress(f"{spec.name}: reading {spec.changelog_topic} ...")
        table = query.seed_table(decode_changelog(query.job_cls, read_changelog(kafka, spec)))
        rows = table.num_rows
        own = spark is None
        spark = spark or seed.seed_session(settings)
        tmp = _tmp(settings, spec, "rebuild")
        try:
            _seed(spark, query, table, tmp, plan, progress)
            aside = swap.set_aside()
            swap.install(tmp / "checkpoint")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            if own:
                spark.stop()
        marker = swap.rewind(0)
        repin_state_partitions(settings, spec.name, n)
        swap.restart(parallelism, batch_before=0)
    rec.after = {"batch": 0, "state_partitions": n, "keys": rows, "aside": str(aside), "rewind_marker": marker}
    return extend(plan.but(changelog_keys=rows), RebuildResult, dry_run=False, operation_id=rec.id,
                  aside=str(aside), seconds=round(time.monotonic() - t0, 1))


def _seed(spark: Any, query: JobQuery, table: Any, tmp: Path, plan: RebuildPlan,
          progress: Callable[[str], None]) -> None:
    """A checkpoint in ``tmp/checkpoint`` seeded with ``table``, its sources at the plan's offsets."""
    n = plan.state_partitions_after
    seed.write_seed_input(table, tmp / "input", seed.seed_columns(query))
    progress(f"{plan.app}: seeding {table.num_rows} keys into {n} state partitions ...")
    seed.seed_checkpoint(spark, query, tmp / "input", tmp / "checkpoint", state_partitions=n, progress=progress)
    start: dict[str, dict[str, int]] = {o["topic"]: {} for o in plan.offsets}
    for o in plan.offsets:
        start[o["topic"]][str(o["partition"])] = o["start_at"]
    timed = plan.stream_time
    seed.point_offsets(tmp / "checkpoint", start, plan.query_sources,
                       watermark_ms=timed["spark_watermark"] if timed else None)
    if timed:  # the partitions' stream times as of the changelog's batch
        layout.write_clocks(tmp / "checkpoint", layout.marker_clocks(timed),
                            [(o["topic"], o["partition"]) for o in plan.offsets])
