"""``observe.alerts``: which conditions alert (a crash loop, a verification failed since the watch
began, the lag and the DLQ rate above the spec's limits) and that each alerts once when it starts."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from streamops.observe import alerts as al
from streamops.observe import status as so
from streamops.spec import AlertPolicy

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
ROW = so.StreamRow(
    app="a", description="", desired_status="running", desired_parallelism=1, observed_status="running",
    observed_parallelism=1, executors=1, health="healthy", heartbeat_age_s=2.0, crash_loop=False, error=None,
    lag_records=100, lag_seconds=1.0, input_rate=100.0, processing_rate=100.0, last_batch_id=5,
    last_batch_age_s=1.0, last_batch_duration_ms=500, state_rows=1, state_bytes=1, newest_savepoint=None,
    last_verify=None, output_topic="o", output_version=None, spark_ui=None, running_operation=None)
POLICY = AlertPolicy(max_lag_seconds=60, max_dlq_per_minute=10)


def kinds(row=ROW, policy=POLICY, dlq=None, since=T0) -> list[str]:
    return [a.kind for a in al.alerts_for("a", row, policy, dlq_per_minute=dlq or {}, since=since)]


def test_a_healthy_app_does_not_alert() -> None:
    assert kinds() == [] and kinds(dlq={"bad_json": 9.5}) == []


@pytest.mark.parametrize(("change", "dlq", "expected"), [
    ({"crash_loop": True, "health": "crash-loop", "error": "exit 1"}, None, ["crash_loop"]),
    ({"lag_records": 90_000, "lag_seconds": 900.0}, None, ["lag"]),
    ({"lag_records": 90_000, "lag_seconds": 900.0, "health": "starting"}, None, []),  # catching up after a start
    ({}, {"bad_json": 8.0, "late": 4.0}, ["dlq_rate"]),  # 12/min over all reasons
    ({"last_verify": {"id": 7, "outcome": "failed", "at": T0 + timedelta(minutes=5), "error": "changelog differs"}},
     None, ["verify_failed"]),
    ({"last_verify": {"id": 6, "outcome": "failed", "at": T0 - timedelta(minutes=5), "error": "old"}}, None, []),
    ({"last_verify": {"id": 8, "outcome": "succeeded", "at": T0 + timedelta(minutes=5), "error": None}}, None, []),
])
def test_what_alerts(change: dict, dlq, expected: list[str]) -> None:
    assert kinds(dataclasses.replace(ROW, **change), dlq=dlq) == expected


def test_limits_off() -> None:
    off = AlertPolicy(max_lag_seconds=None, max_dlq_per_minute=None)
    assert kinds(dataclasses.replace(ROW, lag_seconds=10**6), off, {"x": 10**6}) == []


def test_a_condition_alerts_once_when_it_starts_and_again_after_it_cleared(tmp_path) -> None:
    state = tmp_path / "alerts.json"
    lag = al.Alert("lag", "a: behind")
    verify7 = al.Alert("verify_failed", "a: verification #7 failed: x")
    assert al.new_alerts(state, [lag], T0) == [lag]
    assert al.new_alerts(state, [lag], T0 + timedelta(minutes=1)) == []  # still firing: no new alert
    assert al.new_alerts(state, [lag, verify7], T0 + timedelta(minutes=2)) == [verify7]
    assert al.new_alerts(state, [verify7], T0 + timedelta(minutes=3)) == []  # the same failed run
    assert al.new_alerts(state, [], T0 + timedelta(minutes=4)) == []  # the lag cleared
    assert al.new_alerts(state, [lag], T0 + timedelta(minutes=5)) == [lag]  # and came back
    verify9 = al.Alert("verify_failed", "a: verification #9 failed: y")
    assert al.new_alerts(state, [verify9], T0 + timedelta(minutes=6)) == [verify9]
