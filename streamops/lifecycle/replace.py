"""Replacing an app's checkpoint, in one place: stop, set aside, install, rewind, restart.

restore (a savepoint), reset and its undo, rebuild-state and reprocess all swap the checkpoint a
driver runs from. They share the same steps and the same order, inside an operation that holds
the app's lease:

1. ``stop()``: a running app stops at a batch boundary (the supervisor runs its driver);
2. ``set_aside()`` / ``install()``: the current checkpoint moves to
   ``<state_dir>/checkpoints-aside/<app>/<time>-op<id>`` (kept: an undo or a look later), a prepared
   one takes its place by rename;
3. ``rewind(batch)``: the app's batch marker on its commits topic says the new checkpoint's last
   batch, so the batches after it are written again (records already emitted are not,
   ``spark.commit``);
4. ``restart(parallelism, batch_before)``: a stopped-for-this app runs again, and the operation
   waits for a batch after ``batch_before``.

Both waits end the operation's step (``lifecycle.waits``): ``stop()`` raises ``HandOver`` and the
operation is called again, resumed, once the app stopped; ``restart()`` leaves the wait for the
start to whoever waits (the CLI in its process, an Airflow task in the triggerer).

Every step is journaled in the ledger (``Ledger.step``) *before* it acts, so an operation that
fails or whose process is killed at any point leaves the list of what it may have done, and
``lifecycle.undo`` reverses exactly that. From ``stop()`` to ``restart()`` the operation holds the
checkpoint lock a driver holds while it runs: no driver starts on a half-replaced checkpoint, and
a driver started by hand makes the operation refuse instead of swapping the checkpoint under it.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from streamops.app.checkpoint import checkpoint_dir, lock_checkpoint
from streamops.app.context import AppContext
from streamops.app.marker import abort_open_transaction
from streamops.checkpoints import layout
from streamops.exceptions import UsageError
from streamops.host import failpoints
from streamops.host.locks import HeldLock
from streamops.kafka.config import KafkaConfig
from streamops.ledger.store import HandOver, OperationRecord
from streamops.lifecycle import operations as ops
from streamops.settings import Settings
from streamops.spec import AppSpec

Progress = Callable[[str], None]


def aside_dir(settings: Settings, app: str) -> Path:
    """Where operations keep the checkpoints they replaced."""
    return settings.state_dir / "checkpoints-aside" / app


def aside_path(settings: Settings, spec: AppSpec, op_id: int) -> Path:
    """Where operation ``op_id`` keeps the checkpoint it replaced."""
    return aside_dir(settings, spec.name) / f"{datetime.now(UTC):%Y%m%dT%H%M%S}-op{op_id}"


def may_replace_checkpoint(settings: Settings, spec: AppSpec, *, running: bool, stop_first: bool, what: str) -> None:
    """An operation that replaces the checkpoint (``what``) runs on a stopped app, or stops it first
    (which needs the supervisor)."""
    if running and not stop_first:
        raise UsageError(f"{spec.name} is running: {what} replaces its checkpoint. Add --stop-first to stop it at "
                         f"a batch boundary and start it again after, or `streamops stop {spec.name}` first")
    if running:
        ops.require_supervisor(settings)


def rewind_marker(settings: Settings, spec: AppSpec, kafka: KafkaConfig, batch_id: int) -> dict[str, Any]:
    """The app's batch marker now says ``batch_id`` of the checkpoint in place (``BatchCommitter.rewind``;
    fences a driver); ``kafka``: the app's client configuration."""
    from streamops.spark.commit import BatchCommitter

    committer = BatchCommitter(kafka, spec.name, spec.commits_topic,
                               checkpoint=checkpoint_dir(settings, spec))
    try:
        return committer.rewind(batch_id)
    finally:
        committer.close()


class Replacement:
    """The steps of one checkpoint replacement (module docstring), for operation ``op``; a context
    manager that releases the checkpoint lock however the operation ends."""

    def __init__(self, ctx: AppContext, rec: OperationRecord, *, running: bool, who: str | None, timeout: float,
                 progress: Progress = lambda _m: None,
                 abort_open: Callable[[KafkaConfig, str], None] | None = None) -> None:
        """``ctx``: the app's context (its clients' configuration is ``ctx.kafka``). ``abort_open(kafka,
        app)``: ends a transaction a killed driver left open (``app.marker.abort_open_transaction``,
        the default; tests without a broker pass their own)."""
        self.ctx, self.rec, self.op = ctx, rec, rec.op
        self.settings, self.spec, self.ledger, self.kafka = ctx.settings, ctx.spec, ctx.ledger, ctx.kafka
        # with commit_on: executors, its tasks' writers too (one per state partition)
        tasks = ctx.spec.state_partitions if ctx.spec.commit_on == "executors" else 0
        self.abort_open = abort_open or (lambda kafka, app: abort_open_transaction(kafka, app, tasks=tasks))
        self.running, self.who, self.timeout, self.progress = running, who, timeout, progress
        self.checkpoint = checkpoint_dir(ctx.settings, ctx.spec)
        self.aside = aside_path(ctx.settings, ctx.spec, rec.id)
        self._lock: HeldLock | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._unlock()

    def step(self, name: str, **data: Any) -> None:
        """Journal ``name`` as about to be done, then pass its failpoint (``<kind>.<name>``)."""
        self.ledger.step(self.op, name, **data)
        failpoints.hit(f"{self.op.kind}.{name}")

    def stop(self, **facts: Any) -> int:
        """Stop the app at a batch boundary if it runs and wait, then hold the checkpoint lock;
        the parallelism to restart with. The wait ends the step (``HandOver``); the operation
        resumed takes the stop from its journal. ``facts``: what the operation knew before the
        stop, journaled with it and read back as ``self.facts`` when resumed."""
        resumed = self._journaled_stop()
        self.facts = facts if resumed is None else {**facts, **{k: v for k, v in resumed.items() if k in facts}}
        if resumed is not None:
            self.running, parallelism = bool(resumed.get("was_running")), int(resumed["parallelism"])
            if self.running and ops.poll(self.ctx, self._pending("stop", None, None)) is None:
                raise HandOver(self._pending("stop", None, None).to_dict())  # not stopped yet
        else:
            desired = self.ledger.desired(self.spec.name)
            parallelism = desired["parallelism"] if desired else self.spec.parallelism.default
            if not self.running and self._stopped_by_a_failed_operation(desired):
                self.running = True  # ... so it runs again after this one
            self.step("stop", was_running=self.running, parallelism=parallelism, **facts)
            if self.running:
                self.progress(f"{self.spec.name}: stopping at a batch boundary ...")
                self.ledger.set_desired(self.spec.name, status="stopped", parallelism=parallelism, who=self.who,
                                        op=self.op)
                wait = self._pending("stop", None, None)
                if ops.poll(self.ctx, wait) is None:  # (no driver ran: nothing to wait for)
                    raise HandOver(wait.to_dict())
        self._lock = lock_checkpoint(
            self.settings, self.spec, wait_s=30.0,
            refused=f"A driver runs on it outside the supervisor; nothing was changed. Stop that driver (or "
                    f"`streamops deploy {self.spec.name}` and add --stop-first) and try again.")
        # no driver runs now: a transaction one killed mid-batch left open would hide the committed
        # records after it from what this operation saves and reads
        self.abort_open(self.kafka, self.spec.name)
        return parallelism

    def _journaled_stop(self) -> dict[str, Any] | None:
        """This operation's journaled stop, when it is being resumed after the wait."""
        if not self.rec.resumed:
            return None
        journal = (self.ledger.get_operation(self.op.id) or {}).get("journal") or []
        return next((s for s in journal if s["step"] == "stop"), None)

    def set_aside(self, into: Path | None = None) -> Path:
        """Move the current checkpoint (if any) to ``into`` (default: the aside path itself)."""
        dest = into or self.aside
        if self.checkpoint.exists():
            self.step("set-aside", path=str(dest), marker=self._marker())
            dest.parent.mkdir(parents=True, exist_ok=True)
            self.checkpoint.replace(dest)
        return dest

    def copy_aside(self, into: Path) -> Path:
        """Keep a copy of the current checkpoint, which stays in place (changed in place after)."""
        shutil.copytree(self.checkpoint, into)
        self.step("copied-aside", path=str(into), marker=self._marker())
        return into

    def install(self, prepared: Path) -> None:
        """``prepared`` (a complete checkpoint) becomes the app's, by rename."""
        self.step("install")
        self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        layout.rebase_state_metadata(prepared, to=self.checkpoint)  # named state names its files by path
        prepared.replace(self.checkpoint)

    def rewind(self, batch_id: int) -> dict[str, Any]:
        self.step("rewind", batch=batch_id)
        return rewind_marker(self.settings, self.spec, self.kafka, batch_id)

    def restart(self, parallelism: int, *, batch_before: int | None) -> None:
        """Run the app again if this replacement stopped it; the operation ends waiting for a batch
        after ``batch_before``."""
        self._unlock()
        if not self.running:
            return
        self.step("restart", parallelism=parallelism)
        self.progress(f"{self.spec.name}: starting x{parallelism} from batch {batch_before} ...")
        self.ledger.set_desired(self.spec.name, status="running", parallelism=parallelism, who=self.who, op=self.op)
        self.rec.waiting = self._pending("deploy", parallelism, batch_before).to_dict()

    def _stopped_by_a_failed_operation(self, desired: dict[str, Any] | None) -> bool:
        """Is the app stopped only because an operation stopped it and then failed or was killed
        before starting it again? Then the app is meant to run (with a supervisor to run it)."""
        if not desired or desired["status"] != "stopped" or desired.get("operation_id") is None:
            return False
        prior = self.ledger.get_operation(desired["operation_id"]) or {}
        steps = prior.get("journal") or []
        meant = prior.get("outcome") == "failed" and any(s["step"] == "stop" and s.get("was_running") for s in steps) \
            and not any(s["step"] == "restart" for s in steps)
        if not meant:
            return False
        try:
            ops.require_supervisor(self.settings)
        except ops.SupervisorNotRunning:
            return False
        self.progress(f"{self.spec.name}: stopped by {prior['kind']} #{prior['id']}, which did not finish; "
                      f"it runs again after this operation")
        return True

    def _marker(self) -> dict[str, Any] | None:
        """The last batch marker, as the checkpoint set aside was matched with (an undo that puts it
        back checks that they agreed: a checkpoint ahead of its output must not come back)."""
        from streamops.app.marker import last_marker

        marker = last_marker(self.kafka, self.spec.commits_topic, self.spec.name)
        return None if marker is None else {k: marker.get(k) for k in ("batch_id", "checkpoint_id", "rewind")}

    def _unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _pending(self, kind: str, parallelism: int | None, batch_before: int | None) -> ops.Pending:
        t0 = time.time()
        return ops.Pending(app=self.op.app, kind=kind, operation_id=self.op.id, requested_by=self.op.requested_by,
                           t0=t0, deadline=t0 + self.timeout, before={}, parallelism=parallelism,
                           batch_before=batch_before)
