"""An app's state kept sound: compact it, verify it, rebuild it from its changelog
(``streamops.lifecycle.maintenance``, ``streamops.state.verify``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator

from streamops_airflow.operators.base import app_session, as_bool, as_int, requested_by
from streamops_airflow.operators.handoff import HandsOffWaits

if TYPE_CHECKING:
    from streamops.lifecycle.maintenance import CompactResult, RebuildResult


class CompactOperator(BaseOperator):
    """Consolidate ``app``'s state into one snapshot and drop what no retained batch needs (runs
    while the app runs); ``dry_run`` logs and returns the plan only. Skipped if nothing committed.
    The task's XCom is the result's ``to_dict``, the document ``streamops compact --json`` prints."""

    template_fields = ("app", "dry_run")

    def __init__(self, *, app: str, dry_run: bool | str = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app, self.dry_run = app, dry_run

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException

        from streamops.lifecycle.maintenance import NothingToMaintain, compact

        with app_session(self.app, "compact") as ctx:
            try:
                out = compact(ctx, dry_run=as_bool(self.dry_run), who=requested_by(context),
                              progress=self.log.info)
            except NothingToMaintain as exc:
                raise AirflowSkipException(str(exc)) from exc
        self.report(out)
        return out.to_dict()

    def report(self, out: CompactResult) -> None:
        """The task log's account of the result: the chains before, then the plan or what it did."""
        for part, chain in sorted(out.chains_before.items()):
            self.log.info("state %s: snapshot %s + %s changelogs before", part, chain["snapshot"], chain["changelogs"])
        if out.dry_run:
            self.log.info("would compact %s at batch %s: install %s, delete %s files (%s bytes), savepoints beyond "
                          "retention %s", self.app, out.batch_id, out.install_snapshots, out.delete_files,
                          out.delete_bytes, out.savepoints_beyond_retention)
        else:
            self.log.info("compacted %s at batch %s: %s -> %s bytes, restore %s s -> %s s, savepoints removed %s",
                          self.app, out.batch_id, out.bytes_before, out.bytes_after,
                          out.restore_seconds_before, out.restore_seconds_after, out.savepoints_removed)


class RebuildStateOperator(HandsOffWaits):
    """Rebuild ``app``'s checkpoint from its changelog topic (optionally into ``state_partitions``);
    ``dry_run`` (the default) logs and returns the plan only."""

    template_fields = ("app", "state_partitions", "dry_run", "stop_first", "timeout_s")

    def __init__(self, *, app: str, state_partitions: int | str | None = None, dry_run: bool | str = True,
                 stop_first: bool | str = False, timeout_s: float | str = 600.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app, self.state_partitions, self.dry_run = app, state_partitions, dry_run
        self.stop_first, self.timeout_s = stop_first, timeout_s

    def run_core(self, context: Any, resume: int | None) -> Any:
        from streamops.lifecycle.maintenance import rebuild_state_step

        with app_session(self.app, "rebuild-state") as ctx:
            return rebuild_state_step(ctx,
                                      state_partitions=as_int(self.state_partitions, "state_partitions"),
                                      dry_run=as_bool(self.dry_run), stop_first=as_bool(self.stop_first),
                                      who=requested_by(context), timeout=float(self.timeout_s), resume=resume,
                                      progress=self.log.info)

    def report(self, out: RebuildResult) -> None:
        for o in out.offsets:
            self.log.info("%s[%s]: checkpoint %s -> start at %s", o["topic"], o["partition"], o["checkpoint"],
                          o["start_at"])
        self.log.info("%s %s from %s (%s keys): %s -> %s state partitions", "would rebuild" if out.dry_run
                      else "rebuilt", self.app, out.changelog_topic, out.changelog_keys,
                      out.state_partitions_before, out.state_partitions_after)


class VerifyOperator(BaseOperator):
    """Verify ``app``: state store vs changelog vs output, plus the data-quality suite. Fails with a
    readable summary on any violation; the HTML report's path is in the log either way."""

    template_fields = ("app",)

    def __init__(self, *, app: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app = app

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException

        from streamops.state.check import NothingCommittedError
        from streamops.state.verify.report import render
        from streamops.state.verify.run import verify

        with app_session(self.app, "verify") as ctx:
            settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
            try:
                report = verify(spec, settings, ctx.kafka, ledger=ledger, who=requested_by(context), progress=self.log.info)
            except NothingCommittedError as exc:
                raise AirflowSkipException(str(exc)) from exc
        self.log.info("%s", render(report))
        if report.report_html:
            self.log.info("validation report (HTML): %s", report.report_html)
        if not report.ok:
            raise AirflowException(f"verify {self.app} failed: {', '.join(report.categories)}\n{render(report)}")
        return report.to_dict()
