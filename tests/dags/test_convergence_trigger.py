"""The convergence trigger never fires sooner than its dwell after it started: Airflow 3.3 fails a
deferred task whose trigger fires before the scheduler drained the deferring attempt's executor
event (apache/airflow#72716), which a stop that converged in 3 s on busy cores hit."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))


def _events(trigger, monkeypatch, poll) -> list:
    import streamops.app.context
    import streamops.app.outputs
    import streamops.ledger
    import streamops.settings
    from streamops.kafka.config import KafkaConfig
    from streamops.lifecycle import operations

    class FakeLedger:
        def close(self) -> None:
            pass

    monkeypatch.setattr(streamops.ledger.Ledger, "open", staticmethod(lambda url: FakeLedger()))
    monkeypatch.setattr(streamops.app.outputs, "load_live_spec", lambda settings, app, ledger, last_good_ok=False: "spec")
    monkeypatch.setattr(streamops.app.context, "kafka_config", lambda settings, spec: KafkaConfig.plaintext("k:1"))
    monkeypatch.setattr(operations.Pending, "from_dict", staticmethod(lambda d: type("P", (), {
        "app": "a", "kind": "stop", "operation_id": 1, "to_dict": lambda self: d})()))
    monkeypatch.setattr(operations, "poll", poll)
    monkeypatch.setattr(streamops.settings.Settings, "from_env", staticmethod(lambda: type("S", (), {"ledger_db_url": "x"})()))

    async def collect():
        return [e async for e in trigger.run()]

    return asyncio.run(collect())


@pytest.mark.parametrize("outcome", ["converged", "failed"])
def test_an_operation_that_converges_at_once_is_reported_after_the_dwell(monkeypatch, outcome) -> None:
    from streamops_airflow.triggers import LedgerConvergenceTrigger

    from streamops.exceptions import StreamopsError

    def poll(ctx, pending):
        if outcome == "failed":
            raise StreamopsError("refused")
        return {"status": "stopped"}

    trigger = LedgerConvergenceTrigger(pending={"app": "a"}, poll_interval=0.01, min_dwell_s=0.6)
    t0 = time.monotonic()
    events = _events(trigger, monkeypatch, poll)
    assert [e.payload["status"] for e in events] == [outcome]
    assert time.monotonic() - t0 >= 0.6
    assert trigger.serialize()[1]["min_dwell_s"] == 0.6


def test_a_slow_operation_is_reported_when_it_converges(monkeypatch) -> None:
    from streamops_airflow.triggers import LedgerConvergenceTrigger

    polls = []

    def poll(ctx, pending):
        polls.append(1)
        return {"status": "running"} if len(polls) >= 3 else None

    events = _events(LedgerConvergenceTrigger(pending={"app": "a"}, poll_interval=0.01, min_dwell_s=0), monkeypatch,
                     poll)
    assert [e.payload["status"] for e in events] == ["converged"] and len(polls) == 3


@pytest.mark.parametrize(("name", "kwargs"), [
    ("LedgerConvergenceTrigger", {"pending": {"app": "a", "operation_id": 3}}),
    ("ReprocessRunTrigger", {"pending": {"app": "a", "operation_id": 4}, "min_dwell_s": 1.0}),
    ("AppWatchTrigger", {"app": "a", "until": 12.5, "since_iso": "2026-11-27T00:00:00+00:00"}),
    ("BatchCommitTrigger", {"app": "a", "poll_interval": 3.0}),
    ("DlqRecordsTrigger", {"app": "a", "every_s": 30.0}),
])
def test_each_trigger_serializes_to_plain_values_it_is_rebuilt_from(name: str, kwargs: dict) -> None:
    import json

    from streamops_airflow import triggers

    trigger = getattr(triggers, name)(**kwargs)
    path, values = trigger.serialize()
    assert path == f"streamops_airflow.triggers.{name}"
    assert json.loads(json.dumps(values)) == values and kwargs.items() <= values.items()
    assert getattr(triggers, name)(**values).serialize() == (path, values)
    defaults = {"LedgerConvergenceTrigger": 2.0, "ReprocessRunTrigger": 5.0}
    if name in defaults:
        assert values["poll_interval"] == defaults[name]
