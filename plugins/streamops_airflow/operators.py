"""Operators: hold templated fields, validate rendered values, call core functions.

The app operations defer while the supervisor converges (``LedgerConvergenceTrigger``), so a
deploy or resize that takes minutes holds no worker slot. The request (lease, desired state,
"before" snapshot) happens in ``execute``; the outcome is recorded in ``execute_complete``.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator


class PlatformProbeOperator(BaseOperator):
    """Fail the task unless the Kafka broker and the Spark master (with workers) answer."""

    template_fields = ("require",)

    def __init__(self, *, require: tuple[str, ...] = ("kafka", "spark"), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.require = require

    def execute(self, context: Any) -> dict[str, Any]:
        from streamops.platform.health import probe
        from streamops.settings import Settings

        unknown = set(self.require) - {"kafka", "spark"}
        if unknown:
            raise AirflowException(f"require: unknown services {sorted(unknown)}; use kafka and/or spark")
        report = probe(Settings.from_env())
        self.log.info("platform probe: %s", report)
        down = [name for name in self.require if not report[name]["healthy"]]
        if down:
            raise AirflowException(f"not healthy: {', '.join(down)} ({report})")
        return report


def _who(context: Any) -> str:
    ti = context["ti"]
    return f"airflow:{ti.dag_id}/{ti.run_id}/{ti.task_id}"


def _int_or_none(value: Any, name: str) -> int | None:
    if value in (None, "", "None"):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AirflowException(f"{name} must be an integer, got {value!r}") from None


class AppOperationOperator(BaseOperator):
    """Base: request an operation on ``app``, defer until converged, record the outcome."""

    template_fields: tuple[str, ...] = ("app", "timeout_s")
    kind = "?"

    def __init__(self, *, app: str, timeout_s: float | str = 600.0, poll_interval: float = 2.0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app = app
        self.timeout_s = timeout_s
        self.poll_interval = poll_interval

    def _context(self):
        from streamops.app.outputs import load_live_spec
        from streamops.kafka.security import use_app
        from streamops.ledger import Ledger
        from streamops.settings import Settings

        settings = Settings.from_env()
        ledger = Ledger.open(settings.ledger_db_url)
        try:
            spec = load_live_spec(settings, str(self.app), ledger)
            use_app(spec, settings)  # the task's Kafka clients are the app's (its spec's kafka overrides)
            return settings, spec, ledger
        except BaseException:
            ledger.close()
            raise

    def request(self, settings, spec, ledger, who: str, timeout: float):  # -> Pending | dict
        raise NotImplementedError

    def execute(self, context: Any) -> dict[str, Any]:
        from streamops.exceptions import StreamopsError
        from streamops.lifecycle.operations import Pending
        from streamops_airflow.triggers import LedgerConvergenceTrigger

        timeout = float(self.timeout_s)
        try:
            settings, spec, ledger = self._context()
            try:
                pending = self.request(settings, spec, ledger, _who(context), timeout)
            finally:
                ledger.close()
        except StreamopsError as exc:  # refused: bad params, lease held, no supervisor — nothing changed
            raise AirflowException(f"{self.kind} {self.app}: {exc}") from exc
        if not isinstance(pending, Pending):
            self.log.info("%s %s: %s", self.kind, self.app, pending)
            return pending  # nothing to wait for (a dry run / no-op plan)
        if pending.result is not None:
            self.log.info("%s %s: nothing to do (operation #%s)", self.kind, self.app, pending.operation_id)
            return pending.result
        self.log.info("%s %s: operation #%s requested; deferring until it converges (timeout %.0f s)",
                      self.kind, self.app, pending.operation_id, timeout)
        self.defer(trigger=LedgerConvergenceTrigger(pending=pending.to_dict(), poll_interval=self.poll_interval),
                   method_name="execute_complete", timeout=timedelta(seconds=timeout + 120))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        from streamops.lifecycle.operations import Pending, abandon, complete

        pending = Pending.from_dict(event["pending"])
        settings, spec, ledger = self._context()
        try:
            if event["status"] != "converged":
                abandon(ledger, pending, event.get("error", "did not converge"))
                raise AirflowException(f"{self.kind} {self.app} (operation #{pending.operation_id}) failed: "
                                       f"{event.get('error')}")
            result = complete(settings, spec, ledger, pending, ledger.observed(spec.name) or {})
        finally:
            ledger.close()
        self.log.info("%s %s converged: %s", self.kind, self.app, result)
        return result


class DeployAppOperator(AppOperationOperator):
    """Run an app (desired running); succeeds once a batch after the start has committed."""

    template_fields = (*AppOperationOperator.template_fields, "parallelism")
    kind = "deploy"

    def __init__(self, *, parallelism: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.parallelism = parallelism

    def request(self, settings, spec, ledger, who, timeout):
        from streamops.lifecycle.operations import request_deploy

        return request_deploy(settings, spec, ledger, parallelism=_int_or_none(self.parallelism, "parallelism"),
                              who=who, timeout=timeout)


class ResizeAppOperator(AppOperationOperator):
    """Change a running app's parallelism (strategy restart or live); no-op when at size."""

    template_fields = (*AppOperationOperator.template_fields, "parallelism", "strategy")
    kind = "resize"

    def __init__(self, *, parallelism: int | str, strategy: str = "restart", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.parallelism = parallelism
        self.strategy = strategy

    def request(self, settings, spec, ledger, who, timeout):
        from streamops.lifecycle.operations import request_resize

        n = _int_or_none(self.parallelism, "parallelism")
        if n is None:
            raise AirflowException("parallelism is required")
        return request_resize(settings, spec, ledger, parallelism=n, strategy=str(self.strategy), who=who,
                              timeout=timeout)


class StopAppOperator(AppOperationOperator):
    """Stop an app at a batch boundary (``now``: kill the driver)."""

    template_fields = (*AppOperationOperator.template_fields, "now")
    kind = "stop"

    def __init__(self, *, now: bool | str = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.now = now

    def request(self, settings, spec, ledger, who, timeout):
        from streamops.lifecycle.operations import request_stop

        now = self.now if isinstance(self.now, bool) else str(self.now).lower() in ("true", "1", "yes")
        return request_stop(settings, spec, ledger, now=now, who=who, timeout=timeout)


class ScaleWindowsOperator(AppOperationOperator):
    """Resize to the spec's scale window for now (or ``override``); no-op when already at size."""

    template_fields = (*AppOperationOperator.template_fields, "override", "strategy")
    kind = "scale-windows"

    def __init__(self, *, override: int | str | None = None, strategy: str = "restart", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.override = override
        self.strategy = strategy

    def request(self, settings, spec, ledger, who, timeout):
        from streamops.lifecycle.operations import request_resize
        from streamops.lifecycle.windows import window_plan

        override = _int_or_none(self.override, "override")
        if override is not None:
            spec.check_parallelism(override)
        plan = window_plan(spec, ledger.desired(spec.name), override=override)
        self.log.info("scale windows %s: %s", spec.name, plan)
        if plan["action"] == "none":
            return plan
        return request_resize(settings, spec, ledger, parallelism=plan["target"], strategy=str(self.strategy),
                              who=who, timeout=timeout)


def _flag(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).lower() in ("true", "1", "yes")


@contextmanager
def _core(app: Any, what: str):
    """(settings, spec, ledger) for ``app``; a refusal from the core becomes a failed task."""
    from streamops.app.outputs import load_live_spec
    from streamops.exceptions import StreamopsError
    from streamops.kafka.security import app_scope
    from streamops.ledger import Ledger
    from streamops.settings import Settings

    try:
        settings = Settings.from_env()
        ledger = Ledger.open(settings.ledger_db_url)
        try:
            spec = load_live_spec(settings, str(app), ledger)
            with app_scope(spec, settings):  # the task's Kafka clients are the app's
                yield settings, spec, ledger
        finally:
            ledger.close()
    except StreamopsError as exc:
        raise AirflowException(f"{what} {app}: {exc}") from exc


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

        with _core(self.app, "savepoint") as (settings, spec, ledger):
            if layout.last_committed_batch(checkpoint_dir(settings, spec)) is None:
                raise AirflowSkipException(f"{spec.name} has committed nothing yet: no savepoint to take")
            out = take(settings, spec, ledger, who=_who(context), progress=self.log.info)
        self.log.info("savepoint %s at batch %s: %s files, %s bytes, sha256 %s (%s s)", out["id"], out["batch_id"],
                      out["files"], out["bytes"], out["sha256"], out["seconds"])
        return out


class HandsOffWaits(BaseOperator):
    """Base of the long operations: the waits for a running app to stop and to run again
    (``LedgerConvergenceTrigger``) and for a reprocess run's driver (``ReprocessRunTrigger``) are
    handed to the triggerer (``streamops.ledger.handoff``), so no worker slot is held meanwhile.
    Subclasses give ``run_core`` (the core call) and ``report`` (the log lines of its result)."""

    def run_core(self, context: Any) -> dict[str, Any]:
        raise NotImplementedError

    def report(self, out: dict[str, Any]) -> None:
        raise NotImplementedError

    def execute(self, context: Any) -> dict[str, Any]:
        return self._attempt(context, resume=None)

    def _attempt(self, context: Any, resume: int | None) -> dict[str, Any]:
        from streamops.ledger.handoff import OperationDeferred, deferrable

        try:
            with deferrable(resume=resume) as mode:
                out = self.run_core(context)
        except OperationDeferred as waiting:
            self.log.info("operation #%s: %s; deferring until it has", waiting.pending["operation_id"],
                          "the run's driver started" if waiting.pending["kind"] == "reprocess" else
                          "the app stops at a batch boundary")
            self._defer(waiting.pending, "resume_after_wait", {})
        if not mode.handed_off:
            self.report(out)
            return out
        (op_id, pending), = mode.handed_off.items()
        self.log.info("operation #%s: the app starts again; deferring until its first batch", op_id)
        self._defer(pending, "finish_after_restart", {"result": out})

    def _defer(self, pending: dict[str, Any], method: str, kwargs: dict[str, Any]) -> None:
        import time

        from streamops_airflow.triggers import LedgerConvergenceTrigger, ReprocessRunTrigger

        trigger = ReprocessRunTrigger(pending=pending) if pending["kind"] == "reprocess" else \
            LedgerConvergenceTrigger(pending=pending)
        self.defer(trigger=trigger, method_name=method, kwargs=kwargs,
                   timeout=timedelta(seconds=max(60.0, pending["deadline"] - time.time()) + 120))

    def resume_after_wait(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        pending = event["pending"]
        if event["status"] != "converged":
            if pending["kind"] == "reprocess":
                from streamops.reset.reprocess import stop_run

                stop_run(pending)
            self._fail(pending, event.get("error") or "the app did not stop")
        return self._attempt(context, resume=pending["operation_id"])

    def finish_after_restart(self, context: Any, event: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        from streamops.ledger import Ledger
        from streamops.settings import Settings

        pending = event["pending"]
        if event["status"] != "converged":
            self._fail(pending, event.get("error") or "the app did not start again")
        ledger = Ledger.open(Settings.from_env().ledger_db_url)
        try:
            ledger.finish_handed_off(pending["operation_id"], "succeeded")
        finally:
            ledger.close()
        self.report(result)
        return result

    def _fail(self, pending: dict[str, Any], error: str) -> None:
        from streamops.ledger import Ledger
        from streamops.settings import Settings

        ledger = Ledger.open(Settings.from_env().ledger_db_url)
        try:
            ledger.finish_handed_off(pending["operation_id"], "failed", error=error[:4000])
        finally:
            ledger.close()
        raise AirflowException(f"{pending['app']} operation #{pending['operation_id']} failed: {error} "
                               f"(`streamops undo {pending['app']} {pending['operation_id']}` reverses its steps)")


class RestoreOperator(HandsOffWaits):
    """Restore ``app`` to ``savepoint``; ``dry_run`` (the default) logs and returns the plan only."""

    template_fields = ("app", "savepoint", "dry_run", "timeout_s")

    def __init__(self, *, app: str, savepoint: str, dry_run: bool | str = True, timeout_s: float | str = 600.0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app, self.savepoint, self.dry_run, self.timeout_s = app, savepoint, dry_run, timeout_s

    def run_core(self, context: Any) -> dict[str, Any]:
        from streamops.lifecycle.savepoints import restore

        with _core(self.app, "restore") as (settings, spec, ledger):
            return restore(settings, spec, ledger, str(self.savepoint), dry_run=_flag(self.dry_run),
                           who=_who(context), timeout=float(self.timeout_s), progress=self.log.info)

    def report(self, out: dict[str, Any]) -> None:
        for p in out["offsets"]:
            self.log.info("%s[%s]: %s -> %s (%s to reprocess)", p["topic"], p["partition"], p["current"],
                          p["restore_to"], p["reprocess"])
        self.log.info("%s %s to batch %s (state version %s)", "would restore" if out["dry_run"] else "restored",
                      self.app, out["batch_id"], out["state_version"])


class CompactOperator(BaseOperator):
    """Consolidate ``app``'s state into one snapshot and drop what no retained batch needs (runs
    while the app runs); ``dry_run`` logs and returns the plan only. Skipped if nothing committed."""

    template_fields = ("app", "dry_run")

    def __init__(self, *, app: str, dry_run: bool | str = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app, self.dry_run = app, dry_run

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException

        from streamops.lifecycle.maintenance import NothingToMaintain, compact

        with _core(self.app, "compact") as (settings, spec, ledger):
            try:
                out = compact(settings, spec, ledger, dry_run=_flag(self.dry_run), who=_who(context),
                              progress=self.log.info)
            except NothingToMaintain as exc:
                raise AirflowSkipException(str(exc)) from exc
        for part, chain in sorted(out["chains_before"].items()):
            self.log.info("state %s: snapshot %s + %s changelogs before", part, chain["snapshot"], chain["changelogs"])
        if out["dry_run"]:
            self.log.info("would compact %s at batch %s: install %s, delete %s files (%s bytes), savepoints beyond "
                          "retention %s", self.app, out["batch_id"], out["install_snapshots"], out["delete_files"],
                          out["delete_bytes"], out["savepoints_beyond_retention"])
        else:
            self.log.info("compacted %s at batch %s: %s -> %s bytes, restore %s s -> %s s, savepoints removed %s",
                          self.app, out["batch_id"], out["bytes_before"], out["bytes_after"],
                          out["restore_seconds_before"], out["restore_seconds_after"], out["savepoints_removed"])
        return out


class RebuildStateOperator(HandsOffWaits):
    """Rebuild ``app``'s checkpoint from its changelog topic (optionally into ``state_partitions``);
    ``dry_run`` (the default) logs and returns the plan only."""

    template_fields = ("app", "state_partitions", "dry_run", "stop_first", "timeout_s")

    def __init__(self, *, app: str, state_partitions: int | str | None = None, dry_run: bool | str = True,
                 stop_first: bool | str = False, timeout_s: float | str = 600.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app, self.state_partitions, self.dry_run = app, state_partitions, dry_run
        self.stop_first, self.timeout_s = stop_first, timeout_s

    def run_core(self, context: Any) -> dict[str, Any]:
        from streamops.lifecycle.maintenance import rebuild_state

        with _core(self.app, "rebuild-state") as (settings, spec, ledger):
            return rebuild_state(settings, spec, ledger, state_partitions=_int_or_none(self.state_partitions,
                                                                                     "state_partitions"),
                                 dry_run=_flag(self.dry_run), stop_first=_flag(self.stop_first), who=_who(context),
                                 timeout=float(self.timeout_s), progress=self.log.info)

    def report(self, out: dict[str, Any]) -> None:
        for o in out["offsets"]:
            self.log.info("%s[%s]: checkpoint %s -> start at %s", o["topic"], o["partition"], o["checkpoint"],
                          o["start_at"])
        self.log.info("%s %s from %s (%s keys): %s -> %s state partitions", "would rebuild" if out["dry_run"]
                      else "rebuilt", self.app, out["changelog_topic"], out["changelog_keys"],
                      out["state_partitions_before"], out["state_partitions_after"])


class ResetOperator(HandsOffWaits):
    """Reset ``app`` (the application reset tool) or undo a reset. ``target`` is one of
    earliest, latest, datetime, duration, shift_by, offsets, undo; ``value`` is what it needs (an
    ISO 8601 time or duration, N, a JSON object of offsets, an operation id). ``dry_run`` (the
    default) logs and returns the plan only."""

    template_fields = ("app", "target", "value", "state", "force", "output_version", "stop_first", "dry_run",
                       "timeout_s")
    TARGETS = ("earliest", "latest", "datetime", "duration", "shift_by", "offsets", "undo")

    def __init__(self, *, app: str, target: str, value: Any = None, state: str = "wipe", force: bool | str = False,
                 output_version: str | None = None, stop_first: bool | str = False, dry_run: bool | str = True,
                 timeout_s: float | str = 600.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app, self.target, self.value, self.state, self.force = app, target, value, state, force
        self.output_version, self.stop_first, self.dry_run, self.timeout_s = output_version, stop_first, dry_run, timeout_s

    def _target(self):
        from streamops.exceptions import UsageError
        from streamops.reset.targets import make_target

        kind, value = str(self.target), None if self.value in (None, "", "None") else str(self.value)
        if kind not in self.TARGETS:
            raise UsageError(f"target must be one of {', '.join(self.TARGETS)}, got {kind!r}")
        if kind in ("earliest", "latest"):
            return make_target(**{f"to_{kind}": True})
        if value is None:
            raise UsageError(f"target {kind} needs a value")
        if kind == "datetime":
            return make_target(to_datetime=value)
        if kind == "duration":
            return make_target(by_duration=value)
        if kind == "offsets":
            try:
                return make_target(to_offsets=json.loads(value))
            except json.JSONDecodeError as exc:
                raise UsageError(f"offsets must be JSON {{topic: {{partition: offset}}}}: {exc.msg}") from None
        try:
            return int(value)  # shift_by N, or the reset operation to undo
        except ValueError:
            raise UsageError(f"target {kind} needs an integer value, got {value!r}") from None

    def run_core(self, context: Any) -> dict[str, Any]:
        from streamops.reset import tool
        from streamops.reset.targets import make_target

        with _core(self.app, "reset") as (settings, spec, ledger):
            target = self._target()
            common = {"dry_run": _flag(self.dry_run), "stop_first": _flag(self.stop_first), "who": _who(context),
                      "timeout": float(self.timeout_s), "progress": self.log.info}
            if str(self.target) == "undo":
                out = tool.undo(settings, spec, ledger, target, **common)
            else:
                if str(self.target) == "shift_by":
                    target = make_target(shift_by=target)
                out = tool.reset(settings, spec, ledger, target, state=str(self.state), force=_flag(self.force),
                                 output_version=None if self.output_version in (None, "", "None")
                                 else str(self.output_version), **common)
        return out

    def report(self, out: dict[str, Any]) -> None:
        for o in out["offsets"]:
            self.log.info("%s[%s]: %s -> %s", o["topic"], o["partition"], o["current"],
                          o.get("target", o.get("restore_to")))
        for a in out["actions"]:
            self.log.info("%s %s", "would" if out["dry_run"] else "did:", a)


class PromoteOperator(HandsOffWaits):
    """Make ``output_version`` the output ``app`` writes (``streamops promote``); a dry run by default."""

    template_fields = ("app", "output_version", "dry_run", "timeout_s")

    def __init__(self, *, app: str, output_version: Any, dry_run: bool | str = True,
                 timeout_s: float | str = 600.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app, self.output_version, self.dry_run, self.timeout_s = app, output_version, dry_run, timeout_s

    def run_core(self, context: Any) -> dict[str, Any]:
        from streamops.reset.reprocess import promote

        with _core(self.app, "promote") as (settings, spec, ledger):
            return promote(settings, spec, ledger, str(self.output_version), dry_run=_flag(self.dry_run),
                           who=_who(context), timeout=float(self.timeout_s), progress=self.log.info)

    def report(self, out: dict[str, Any]) -> None:
        for a in out["actions"]:
            self.log.info("%s %s", "would" if out["dry_run"] else "did:", a)


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

    def run_core(self, context: Any) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException

        from streamops.ledger import handoff
        from streamops.ledger.store import OperationInProgress
        from streamops.reset.reprocess import reprocess, settle_lost_run, waiting_run

        run_type = str(getattr(context.get("dag_run"), "run_type", "") or "")
        if run_type.lower().endswith("scheduled"):
            raise AirflowSkipException("scheduled runs do nothing: reprocess runs are manual or backfill runs")

        def given(v: Any) -> str | None:
            return None if v in (None, "", "None") else str(v)

        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        frm = given(self.frm) or (start.isoformat() if start else None)
        to = given(self.to) or (end.isoformat() if end else None)
        if frm is None or to is None:
            raise AirflowException("reprocess needs a range: set from and to, or run it for a data interval "
                                   "(a backfill or a run with a logical date)")
        self.log.info("reprocess %s [%s, %s)", self.app, frm, to)
        with _core(self.app, "reprocess") as (settings, spec, ledger):
            version = given(self.output_version) or spec.reprocess.output_version

            def run() -> dict[str, Any]:
                return reprocess(settings, spec, ledger, frm=frm, to=to, output_version=version,
                                 dry_run=_flag(self.dry_run), master=given(self.master), who=_who(context),
                                 timeout=float(self.timeout_s), progress=self.log.info)

            try:
                return run()
            except OperationInProgress:
                mode = handoff.current()
                if mode is None or mode.resume is not None:  # a resume takes back its own operation
                    raise
                lost = self._lost_waiter(context, waiting_run(ledger, spec, version))
                if lost is None:
                    raise
                op_id, why = lost
                outcome = settle_lost_run(settings, spec, ledger, op_id, why=why, progress=self.log.info)
                self.log.warning("operation #%s: %s; recorded as %s", op_id, why, outcome)
                return run()

    @staticmethod
    def _lost_waiter(context: Any, row: dict[str, Any] | None) -> tuple[int, str] | None:
        """(operation id, why) when the Airflow task that deferred waiting for ``row``'s run is no
        longer waiting: an earlier try of this very task, or a task Airflow has ended. A task still
        deferred (or running, queued) resumes it itself."""
        who = str((row or {}).get("requested_by") or "")
        if not who.startswith("airflow:") or who.count("/") < 2:
            return None
        dag_id, rest = who.removeprefix("airflow:").split("/", 1)
        run_id, task_id = rest.rsplit("/", 1)
        if who == _who(context):
            return row["id"], f"the task that waited for it ({who}) was run again"
        states = context["ti"].get_task_states(dag_id=dag_id, run_ids=[run_id], task_ids=[task_id])
        state = (states.get(run_id) or {}).get(task_id)
        state = None if state is None else str(getattr(state, "value", state))  # a TaskInstanceState or its value
        if state in ("deferred", "running", "queued", "scheduled", "up_for_retry", "up_for_reschedule",
                     "restarting"):
            return None
        return row["id"], f"the task that waited for it ({who}) is {state or 'gone'}"

    def report(self, out: dict[str, Any]) -> None:
        for o in out["offsets"]:
            self.log.info("%s[%s]: %s .. %s (%s records)", o["topic"], o["partition"], o["from"], o["to"],
                          o["records"])
        for w in out.get("warnings", []):
            self.log.warning("%s", w)


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
        from streamops.state.verify import render, verify

        with _core(self.app, "verify") as (settings, spec, ledger):
            try:
                report = verify(spec, settings, ledger=ledger, who=_who(context), progress=self.log.info)
            except NothingCommittedError as exc:
                raise AirflowSkipException(str(exc)) from exc
        self.log.info("%s", render(report))
        if report.report_html:
            self.log.info("validation report (HTML): %s", report.report_html)
        if not report.ok:
            raise AirflowException(f"verify {self.app} failed: {', '.join(report.categories)}\n{render(report)}")
        return report.to_dict()


class WatchAppOperator(BaseOperator):
    """Watch ``app`` for ``watch_s`` seconds in the triggerer (no worker slot): the task fails
    with the alert when the app crash-loops, a verification fails, or its lag or DLQ rate passes
    the spec's ``alerts`` limits; each condition alerts once when it starts (``observe.alerts``)."""

    template_fields = ("app",)

    def __init__(self, *, app: str, watch_s: float = 3600.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app, self.watch_s = app, watch_s

    def execute(self, context: Any) -> None:
        import time
        from datetime import UTC, datetime

        from streamops_airflow.triggers import AppWatchTrigger

        with _core(self.app, "watch"):
            pass  # an app that is no longer in the spec fails here, not in the triggerer
        since = datetime.now(UTC).isoformat()
        self.defer(trigger=AppWatchTrigger(app=self.app, until=time.time() + self.watch_s, since_iso=since),
                   method_name="execute_complete", timeout=timedelta(seconds=self.watch_s + 600))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        alerts = event.get("alerts") or []
        if alerts:
            raise AirflowException("; ".join(f"[{a['kind']}] {a['message']}" for a in alerts))
        self.log.info("%s: no alert in %.0f s", self.app, self.watch_s)
        return {"alerts": []}


class DlqSummaryOperator(BaseOperator):
    """Digest the DLQ records written since the last digest (``streamops.observe.dlq.digest_new``),
    per app: counts by reason, the partitions' offset ranges, the newest few. Run by
    ``streamops_dlq_summary`` when a DLQ asset's watcher sees a new record (the apps whose DLQ
    triggered the run); ``apps`` empty in a manual run: every app."""

    template_fields = ("apps",)

    def __init__(self, *, apps: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.apps = apps

    def execute(self, context: Any) -> list[dict[str, Any]]:
        from streamops.observe.dlq import digest_new

        events = context.get("triggering_asset_events") or {}
        triggered = []
        for asset in events:
            self.log.info("triggered by %s: %d new DLQ record(s) seen", asset.name, len(events[asset]))
            triggered.append(asset.name.removeprefix("streamops.").removesuffix(".dlq"))
        out = []
        for app in self._apps(triggered):
            with _core(app, "dlq summary") as (settings, spec, _ledger):
                digest = digest_new(settings, spec)
            for part, (first, end) in sorted(digest.ranges.items()):
                self.log.info("%s[%s]: offsets %s..%s", digest.topic, part, first, end - 1)
            self.log.info("%s: %d new DLQ record(s)%s; by reason: %s", app, digest.records,
                          f" ({digest.skipped} older ones not read)" if digest.skipped else "",
                          ", ".join(f"{r} {n}" for r, n in digest.by_reason.items()) or "none")
            for r in digest.newest:
                self.log.info("  %s[%s]@%s %s: key=%s value=%s", digest.topic, r.partition, r.offset, r.reason,
                              r.key, r.value)
            out.append(digest.to_dict())
        return out

    def _apps(self, triggered: list[str]) -> list[str]:
        """The apps asked for, else those whose DLQ asset triggered the run, else every app."""
        from streamops.settings import Settings
        from streamops.specfile import open_spec_file

        if self.apps not in (None, "", "None", []):
            return [self.apps] if isinstance(self.apps, str) else list(self.apps)
        if triggered:
            return sorted(set(triggered))
        settings = Settings.from_env()
        return sorted(open_spec_file(settings.repo, settings.state_dir).specs)
