"""Scale windows: which parallelism the spec asks for at a given time (UTC)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from streamops.lifecycle.outcomes import ResizeResult
from streamops.results import Result, absent
from streamops.spec import AppSpec, ScaleWindow


@dataclass(frozen=True)
class WindowPlan(Result):
    """What applying the scale windows would do: ``action`` resize (from ``current`` to
    ``target``) or none, and why."""

    app: str
    action: str
    target: int
    current: int | None
    reason: str


@dataclass(frozen=True)
class WindowsApplied(WindowPlan):
    """The plan as the ``scale-windows`` command and task report it: a dry run, nothing to do, or
    the resize it made (that resize's own document)."""

    dry_run: bool = False
    resize: ResizeResult | None = absent()


def _last(cron: str, now: datetime) -> datetime:
    """The latest fire time at or before ``now`` (a window starting or ending at ``now`` has)."""
    from croniter import croniter

    return croniter(cron, now + timedelta(seconds=1)).get_prev(datetime)


def active_window(spec: AppSpec, now: datetime | None = None) -> ScaleWindow | None:
    """The window whose latest start is after its latest end; the most recently started wins."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    best: tuple[datetime, ScaleWindow] | None = None
    for w in spec.scale_windows:
        started = _last(w.start, now)
        if started > _last(w.end, now) and (best is None or started > best[0]):
            best = (started, w)
    return best[1] if best else None


def scheduled_parallelism(spec: AppSpec, now: datetime | None = None) -> tuple[int, str]:
    """(parallelism, why) at ``now``: the active window's, else the spec's default."""
    w = active_window(spec, now)
    if w is not None:
        return w.parallelism, f"scale window {w.name!r}"
    return spec.parallelism.default, "default (no scale window active)"


def window_plan(spec: AppSpec, desired: dict[str, Any] | None, now: datetime | None = None,
                override: int | None = None) -> WindowPlan:
    """What applying the scale windows at ``now`` would do: ``resize`` to a new size, or ``none``.

    ``override`` (a manual run's parameter) replaces the schedule. An app that is not deployed
    (or stopped) is left alone: windows size running apps, they do not start them.
    """
    target, why = (override, "manual override") if override is not None else scheduled_parallelism(spec, now)
    current = desired["parallelism"] if desired else None
    if not desired or desired["status"] != "running":
        return WindowPlan(spec.name, "none", target, current,
                          f"{spec.name} is not running; scale windows only resize running apps")
    if current == target:
        return WindowPlan(spec.name, "none", target, current, f"already at {target} ({why})")
    return WindowPlan(spec.name, "resize", target, current, f"{current} -> {target} ({why})")
