"""Reprocess ranges of an app's input into a versioned output beside the live app, and promote that
output (``streamops.reset.reprocess``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.exceptions import AirflowException

from streamops_airflow.operators.base import app_session, as_bool, as_text, requested_by
from streamops_airflow.operators.handoff import HandsOffWaits

if TYPE_CHECKING:
    from streamops.reset.reprocess_results import PromoteResult, ReprocessDryRun, ReprocessResult, WaitingRun


class PromoteOperator(HandsOffWaits):
    """Make ``output_version`` the output ``app`` writes (``streamops promote``); a dry run by default."""

    template_fields = ("app", "output_version", "dry_run", "timeout_s")

    def __init__(self, *, app: str, output_version: Any, dry_run: bool | str = True,
                 timeout_s: float | str = 600.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app, self.output_version, self.dry_run, self.timeout_s = app, output_version, dry_run, timeout_s

    def run_core(self, context: Any, resume: int | None) -> Any:
        from streamops.reset.reprocess import promote_step

        with app_session(self.app, "promote") as ctx:
            return promote_step(ctx, str(self.output_version), dry_run=as_bool(self.dry_run),
                                who=requested_by(context), timeout=float(self.timeout_s), resume=resume,
                                progress=self.log.info)

    def report(self, out: PromoteResult) -> None:
        for a in out.actions:
            self.log.info("%s %s", "would" if out.dry_run else "did:", a)


class ReprocessOperator(HandsOffWaits):
    """Reprocess one range of ``app``'s input into a versioned output, beside the live app.

    The range is ``frm``/``to`` when given, else the run's data interval, so an Airflow backfill of a
    date range reprocesses it interval by interval (consecutive intervals continue one state)."""

    template_fields = ("app", "frm", "to", "output_version", "master", "dry_run", "timeout_s")

    def __init__(self, *, app: str, frm: Any = None, to: Any = None, output_version: Any = None, master: Any = None,
                 dry_run: bool | str = False, timeout_s: float | str = 3600.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app, self.frm, self.to, self.output_version = app, frm, to, output_version
        self.master, self.dry_run, self.timeout_s = master, dry_run, timeout_s

    def run_core(self, context: Any, resume: int | None) -> Any:
        from airflow.sdk.exceptions import AirflowSkipException

        from streamops.ledger.store import OperationInProgress
        from streamops.reset.reprocess import reprocess_step, settle_lost_run, waiting_run

        run_type = str(getattr(context.get("dag_run"), "run_type", "") or "")
        if run_type.lower().endswith("scheduled"):
            raise AirflowSkipException("scheduled runs do nothing: reprocess runs are manual or backfill runs")
        frm, to = self._range(context)
        self.log.info("reprocess %s [%s, %s)", self.app, frm, to)
        with app_session(self.app, "reprocess") as ctx:
            settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
            version = as_text(self.output_version) or spec.reprocess.output_version

            def run() -> Any:
                return reprocess_step(ctx, frm=frm, to=to, output_version=version,
                                      dry_run=as_bool(self.dry_run), master=as_text(self.master),
                                      who=requested_by(context), timeout=float(self.timeout_s), resume=resume,
                                      progress=self.log.info)

            try:
                return run()
            except OperationInProgress:
                if resume is not None:  # a resume takes back its own operation
                    raise
                lost = self._lost_waiter(context, waiting_run(ledger, spec, version))
                if lost is None:
                    raise
                op_id, why = lost
                outcome = settle_lost_run(settings, spec, ledger, op_id, why=why, progress=self.log.info)
                self.log.warning("operation #%s: %s; recorded as %s", op_id, why, outcome)
                return run()

    def _range(self, context: Any) -> tuple[str, str]:
        """[from, to): as given, else the run's data interval (a backfill's ranges)."""
        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        frm = as_text(self.frm) or (start.isoformat() if start else None)
        to = as_text(self.to) or (end.isoformat() if end else None)
        if frm is None or to is None:
            raise AirflowException("reprocess needs a range: set from and to, or run it for a data interval "
                                   "(a backfill or a run with a logical date)")
        return frm, to

    @staticmethod
    def _lost_waiter(context: Any, run: WaitingRun | None) -> tuple[int, str] | None:
        """(operation id, why) when the Airflow task that deferred waiting for ``run`` is no longer
        waiting: an earlier try of this very task, or a task Airflow has ended. A task still
        deferred (or running, queued) resumes it itself."""
        if run is None:
            return None
        who = str(run.requested_by or "")
        if not who.startswith("airflow:") or who.count("/") < 2:
            return None
        dag_id, rest = who.removeprefix("airflow:").split("/", 1)
        run_id, task_id = rest.rsplit("/", 1)
        if who == requested_by(context):
            return run.operation_id, f"the task that waited for it ({who}) was run again"
        states = context["ti"].get_task_states(dag_id=dag_id, run_ids=[run_id], task_ids=[task_id])
        state = (states.get(run_id) or {}).get(task_id)
        state = None if state is None else str(getattr(state, "value", state))  # a TaskInstanceState or its value
        if state in ("deferred", "running", "queued", "scheduled", "up_for_retry", "up_for_reschedule",
                     "restarting"):
            return None
        return run.operation_id, f"the task that waited for it ({who}) is {state or 'gone'}"

    def report(self, out: ReprocessDryRun | ReprocessResult) -> None:
        for o in out.offsets:
            self.log.info("%s[%s]: %s .. %s (%s records)", o["topic"], o["partition"], o["from"], o["to"],
                          o["records"])
        for w in out.warnings:
            self.log.warning("%s", w)
