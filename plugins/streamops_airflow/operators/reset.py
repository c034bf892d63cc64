"""Reset an app's input position and state, or undo a reset (``streamops.reset.tool``)."""

from __future__ import annotations

import json
from typing import Any

from streamops_airflow.operators.base import app_session, as_bool, as_text, requested_by
from streamops_airflow.operators.handoff import HandsOffWaits


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

    def _target(self) -> Any:
        """The rendered ``target``/``value`` as the core takes them: a ``make_target`` result, or
        an integer (shift_by N, the reset operation to undo). Refused as the core refuses (usage)."""
        from streamops.exceptions import UsageError
        from streamops.reset.targets import make_target

        kind, value = str(self.target), as_text(self.value)
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

    def run_core(self, context: Any, resume: int | None) -> Any:
        from streamops.reset import tool
        from streamops.reset.targets import make_target

        with app_session(self.app, "reset") as ctx:
            target = self._target()
            common = {"dry_run": as_bool(self.dry_run), "stop_first": as_bool(self.stop_first),
                      "who": requested_by(context), "timeout": float(self.timeout_s), "resume": resume,
                      "progress": self.log.info}
            if str(self.target) == "undo":
                return tool.undo_step(ctx, target, **common)
            if str(self.target) == "shift_by":
                target = make_target(shift_by=target)
            return tool.reset_step(ctx, target, state=str(self.state), force=as_bool(self.force),
                                   output_version=as_text(self.output_version), **common)

    def report(self, out: Any) -> None:  # a ResetResult, or an UndoResult (target undo)
        for o in out.offsets:
            self.log.info("%s[%s]: %s -> %s", o["topic"], o["partition"], o["current"],
                          o.get("target", o.get("restore_to")))
        for a in out.actions:
            self.log.info("%s %s", "would" if out.dry_run else "did:", a)
