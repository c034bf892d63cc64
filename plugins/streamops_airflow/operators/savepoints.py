"""Savepoints: take one of a running app, restore an app to one (``streamops.lifecycle.savepoints``)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from streamops_airflow.operators.base import app_session, as_bool, requested_by
from streamops_airflow.operators.handoff import HandsOffWaits


class SavepointOperator(BaseOperator):
    """Take a savepoint of ``app`` while it runs (applies the spec's retention); returns its manifest summary."""

    template_fields = ("app",)

    def __init__(self, *, app: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app = app

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException

        from streamops.app.checkpoint import checkpoint_dir
        from streamops.checkpoints import layout
        from streamops.lifecycle.savepoints import take

        with app_session(self.app, "savepoint") as ctx:
            settings, spec = ctx.settings, ctx.spec
            if layout.last_committed_batch(checkpoint_dir(settings, spec)) is None:
                raise AirflowSkipException(f"{spec.name} has committed nothing yet: no savepoint to take")
            out = take(ctx, who=requested_by(context), progress=self.log.info)
        self.log.info("savepoint %s at batch %s: %s files, %s bytes, sha256 %s (%s s)", out.id, out.batch_id,
                      out.files, out.bytes, out.sha256, out.seconds)
        return out.to_dict()


class RestoreOperator(HandsOffWaits):
    """Restore ``app`` to ``savepoint``; ``dry_run`` (the default) logs and returns the plan only."""

    template_fields = ("app", "savepoint", "dry_run", "timeout_s")

    def __init__(self, *, app: str, savepoint: str, dry_run: bool | str = True, timeout_s: float | str = 600.0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app, self.savepoint, self.dry_run, self.timeout_s = app, savepoint, dry_run, timeout_s

    def run_core(self, context: Any, resume: int | None) -> Any:
        from streamops.lifecycle.savepoints import restore_step

        with app_session(self.app, "restore") as ctx:
            return restore_step(ctx, str(self.savepoint), dry_run=as_bool(self.dry_run),
                                who=requested_by(context), timeout=float(self.timeout_s), resume=resume,
                                progress=self.log.info)

    def report(self, out: Any) -> None:  # a RestoreResult
        for p in out.offsets:
            self.log.info("%s[%s]: %s -> %s (%s to reprocess)", p["topic"], p["partition"], p["current"],
                          p["restore_to"], p["reprocess"])
        self.log.info("%s %s to batch %s (state version %s)", "would restore" if out.dry_run else "restored",
                      self.app, out.batch_id, out.state_version)
