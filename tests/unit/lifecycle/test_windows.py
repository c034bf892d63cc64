from __future__ import annotations

from datetime import UTC, datetime

from streamops.lifecycle.outcomes import Resized
from streamops.lifecycle.windows import WindowsApplied, active_window, scheduled_parallelism, window_plan
from streamops.results import extend
from streamops.spec import AppSpec

SPEC = AppSpec(
    name="app1", job="jobs.x", input_topics=("in",), output_topic="o", changelog_topic="c", dlq_topic="d",
    parallelism={"default": 2, "min": 1, "max": 4},
    scale_windows=[
        {"name": "business", "start": "0 8 * * 1-5", "end": "0 18 * * 1-5", "parallelism": 4},
        {"name": "batch-night", "start": "0 1 * * *", "end": "0 3 * * *", "parallelism": 3},
        {"name": "lunch", "start": "0 12 * * 1-5", "end": "0 13 * * 1-5", "parallelism": 1},
    ],
)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_windows_by_time() -> None:
    # 2026-11-23 is a Monday
    assert scheduled_parallelism(SPEC, at("2026-11-23 07:59")) == (2, "default (no scale window active)")
    assert scheduled_parallelism(SPEC, at("2026-11-23 08:00")) == (4, "scale window 'business'")
    assert scheduled_parallelism(SPEC, at("2026-11-23 12:30")) == (1, "scale window 'lunch'")  # newest start
    assert scheduled_parallelism(SPEC, at("2026-11-23 13:00"))[0] == 4  # lunch over, business still on
    assert scheduled_parallelism(SPEC, at("2026-11-23 18:00"))[0] == 2
    assert scheduled_parallelism(SPEC, at("2026-11-24 02:00"))[0] == 3
    assert active_window(SPEC, at("2026-11-22 10:00")) is None  # Sunday


def test_window_spanning_midnight() -> None:
    spec = SPEC.model_copy(update={"scale_windows": (
        SPEC.scale_windows[0].model_copy(update={"name": "night", "start": "0 22 * * *", "end": "0 6 * * *"}),)})
    assert active_window(spec, at("2026-11-23 23:00")).name == "night"
    assert active_window(spec, at("2026-11-24 05:59")).name == "night"
    assert active_window(spec, at("2026-11-24 06:00")) is None


def test_window_plan() -> None:
    running2 = {"status": "running", "parallelism": 2}
    monday_9 = at("2026-11-23 09:00")
    assert window_plan(SPEC, running2, monday_9).to_dict() == {
        "app": "app1", "action": "resize", "target": 4, "current": 2, "reason": "2 -> 4 (scale window 'business')"}
    assert window_plan(SPEC, {"status": "running", "parallelism": 4}, monday_9).action == "none"
    assert window_plan(SPEC, running2, at("2026-11-23 19:00")).reason == \
        "already at 2 (default (no scale window active))"
    assert window_plan(SPEC, running2, monday_9, override=3).reason == "2 -> 3 (manual override)"
    stopped = window_plan(SPEC, {"status": "stopped", "parallelism": 2}, monday_9)
    assert stopped.action == "none" and "not running" in stopped.reason
    assert window_plan(SPEC, None, monday_9).action == "none"


def test_the_scale_windows_document_keeps_its_keys_in_order() -> None:
    """``scale-windows --json``: the plan, ``dry_run``, and the resize's own document when one ran."""
    plan = window_plan(SPEC, {"status": "running", "parallelism": 2}, at("2026-11-23 09:00"))
    assert list(extend(plan, WindowsApplied, dry_run=True).to_dict()) == \
        ["app", "action", "target", "current", "reason", "dry_run"]
    resized = Resized(app="app1", operation_id=7, before={}, after={}, seconds=1.0, parallelism=4, noop=False,
                      strategy="restart")
    doc = extend(plan, WindowsApplied, resize=resized).to_dict()
    assert list(doc) == ["app", "action", "target", "current", "reason", "dry_run", "resize"]
    assert doc["dry_run"] is False and doc["resize"] == resized.to_dict()
