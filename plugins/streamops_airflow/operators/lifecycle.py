"""Deploy, resize, stop, scale windows: operations the supervisor carries out.

They defer while the supervisor converges (``LedgerConvergenceTrigger``), so a deploy or
resize that takes minutes holds no worker slot. The request (lease, desired state, "before"
snapshot) happens in ``execute``; the outcome is recorded in ``execute_complete``. The task's
XCom is the result's ``to_dict`` (``streamops.lifecycle.outcomes``), the document ``--json`` prints.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator

from streamops_airflow.operators.base import app_session, as_bool, as_int, requested_by

if TYPE_CHECKING:
    from streamops.app.context import AppContext
    from streamops.lifecycle.operations import Pending


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

    def request(self, ctx: AppContext, who: str, timeout: float) -> Pending | dict[str, Any]:
        """The core's request: a ``Pending`` to wait for, or a result with nothing to wait for."""
        raise NotImplementedError

    def execute(self, context: Any) -> dict[str, Any]:
        from streamops.lifecycle.operations import Pending
        from streamops_airflow.triggers import LedgerConvergenceTrigger

        timeout = float(self.timeout_s)
        with app_session(self.app, self.kind) as ctx:  # a refusal: nothing changed
            pending = self.request(ctx, requested_by(context), timeout)
        if not isinstance(pending, Pending):
            self.log.info("%s %s: %s", self.kind, self.app, pending)
            return pending  # nothing to wait for (a dry run / no-op plan)
        if pending.result is not None:
            self.log.info("%s %s: nothing to do (operation #%s)", self.kind, self.app, pending.operation_id)
            return pending.result.to_dict()
        self.log.info("%s %s: operation #%s requested; deferring until it converges (timeout %.0f s)",
                      self.kind, self.app, pending.operation_id, timeout)
        self.defer(trigger=LedgerConvergenceTrigger(pending=pending.to_dict(), poll_interval=self.poll_interval),
                   method_name="execute_complete", timeout=timedelta(seconds=timeout + 120))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        from streamops.lifecycle.operations import Pending, abandon, complete

        pending = Pending.from_dict(event["pending"])
        with app_session(self.app, None) as ctx:
            if event["status"] != "converged":
                abandon(ctx.ledger, pending, event.get("error", "did not converge"))
                raise AirflowException(f"{self.kind} {self.app} (operation #{pending.operation_id}) failed: "
                                       f"{event.get('error')}")
            result = complete(ctx, pending, ctx.ledger.observed(ctx.app) or {}).to_dict()
        self.log.info("%s %s converged: %s", self.kind, self.app, result)
        return result


class DeployAppOperator(AppOperationOperator):
    """Run an app (desired running); succeeds once a batch after the start has committed."""

    template_fields = (*AppOperationOperator.template_fields, "parallelism")
    kind = "deploy"

    def __init__(self, *, parallelism: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.parallelism = parallelism

    def request(self, ctx: AppContext, who: str, timeout: float) -> Pending:
        from streamops.lifecycle.operations import request_deploy

        return request_deploy(ctx, parallelism=as_int(self.parallelism, "parallelism"),
                              who=who, timeout=timeout)


class ResizeAppOperator(AppOperationOperator):
    """Change a running app's parallelism (strategy restart or live); no-op when at size."""

    template_fields = (*AppOperationOperator.template_fields, "parallelism", "strategy")
    kind = "resize"

    def __init__(self, *, parallelism: int | str, strategy: str = "restart", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.parallelism = parallelism
        self.strategy = strategy

    def request(self, ctx: AppContext, who: str, timeout: float) -> Pending:
        from streamops.lifecycle.operations import request_resize

        n = as_int(self.parallelism, "parallelism")
        if n is None:
            raise AirflowException("parallelism is required")
        return request_resize(ctx, parallelism=n, strategy=str(self.strategy), who=who,
                              timeout=timeout)


class StopAppOperator(AppOperationOperator):
    """Stop an app at a batch boundary (``now``: kill the driver)."""

    template_fields = (*AppOperationOperator.template_fields, "now")
    kind = "stop"

    def __init__(self, *, now: bool | str = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.now = now

    def request(self, ctx: AppContext, who: str, timeout: float) -> Pending:
        from streamops.lifecycle.operations import request_stop

        return request_stop(ctx, now=as_bool(self.now), who=who, timeout=timeout)


class ScaleWindowsOperator(AppOperationOperator):
    """Resize to the spec's scale window for now (or ``override``); no-op when already at size."""

    template_fields = (*AppOperationOperator.template_fields, "override", "strategy")
    kind = "scale-windows"

    def __init__(self, *, override: int | str | None = None, strategy: str = "restart", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.override = override
        self.strategy = strategy

    def request(self, ctx: AppContext, who: str, timeout: float) -> Pending | dict[str, Any]:
        from streamops.lifecycle.operations import request_resize
        from streamops.lifecycle.windows import window_plan

        spec = ctx.spec
        override = as_int(self.override, "override")
        if override is not None:
            spec.check_parallelism(override)
        plan = window_plan(spec, ctx.ledger.desired(spec.name), override=override)
        self.log.info("scale windows %s: %s (%s)", spec.name, plan.action, plan.reason)
        if plan.action == "none":
            return plan.to_dict()
        return request_resize(ctx, parallelism=plan.target, strategy=str(self.strategy),
                              who=who, timeout=timeout)
