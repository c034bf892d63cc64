"""The base of the long operations (restore, rebuild-state, reset, promote, reprocess): their waits
go to the triggerer, so a worker slot is held only while the core works."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, NoReturn

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator


class HandsOffWaits(BaseOperator):
    """Base of the long operations: the waits for a running app to stop and to run again
    (``LedgerConvergenceTrigger``) and for a reprocess run's driver (``ReprocessRunTrigger``) are
    handed to the triggerer (``streamops.lifecycle.waits``), so no worker slot is held meanwhile.
    Subclasses give ``run_core`` (the core's step function, advanced from ``resume``) and
    ``report`` (the log lines of its result, a ``streamops.results.Result``); the task's XCom is
    the result's ``to_dict``, the document ``--json`` prints."""

    def run_core(self, context: Any, resume: int | None) -> Any:
        """The operation's step (``waits.Step``): ``Done``, or ``Waiting`` for the triggerer."""
        raise NotImplementedError

    def report(self, out: Any) -> None:
        raise NotImplementedError

    def execute(self, context: Any) -> dict[str, Any]:
        return self._attempt(context, resume=None)

    def _attempt(self, context: Any, resume: int | None) -> dict[str, Any]:
        from streamops.lifecycle.waits import Waiting

        got = self.run_core(context, resume)
        if not isinstance(got, Waiting):
            self.report(got.result)
            return got.result.to_dict()
        if got.last:
            self.log.info("operation #%s: the app starts again; deferring until its first batch", got.operation_id)
            self._defer(got.pending, "finish_after_restart", {"result": got.result.to_dict(),
                                                               "result_type": _type_name(got.result)})
        self.log.info("operation #%s: %s; deferring until it has", got.operation_id,
                      "the run's driver started" if got.pending["kind"] == "reprocess" else
                      "the app stops at a batch boundary")
        self._defer(got.pending, "resume_after_wait", {})

    def _defer(self, pending: dict[str, Any], method: str, kwargs: dict[str, Any]) -> NoReturn:
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

    def finish_after_restart(self, context: Any, event: dict[str, Any], result: dict[str, Any],
                             result_type: str) -> dict[str, Any]:
        pending = event["pending"]
        if event["status"] != "converged":
            self._fail(pending, event.get("error") or "the app did not start again")
        self._finish(pending, "succeeded")
        self.report(_result_type(result_type).from_dict(result))
        return result

    def _fail(self, pending: dict[str, Any], error: str) -> None:
        self._finish(pending, "failed", error=error[:4000])
        raise AirflowException(f"{pending['app']} operation #{pending['operation_id']} failed: {error} "
                               f"(`streamops undo {pending['app']} {pending['operation_id']}` reverses its steps)")

    @staticmethod
    def _finish(pending: dict[str, Any], outcome: str, error: str | None = None) -> None:
        """Record the handed-off operation's outcome: the ledger alone, no spec is needed."""
        from streamops_airflow.hooks import StreamopsHook

        ledger = StreamopsHook().get_conn()
        try:
            ledger.finish_handed_off(pending["operation_id"], outcome, error=error)
        finally:
            ledger.close()


def _type_name(result: Any) -> str:
    """The result's class as the deferral carries it (kwargs of a deferral are JSON)."""
    return f"{type(result).__module__}:{type(result).__qualname__}"


def _result_type(name: str) -> Any:
    """The result class ``_type_name`` named: only a ``streamops`` ``Result``."""
    import importlib

    from streamops.results import Result

    module, _, qualname = name.partition(":")
    cls = getattr(importlib.import_module(module), qualname, None) if module.split(".")[0] == "streamops" else None
    if not (isinstance(cls, type) and issubclass(cls, Result)):
        raise TypeError(f"not a streamops result type: {name!r}")
    return cls
