"""Every operator gets its app through ``app_session``: the Kafka clients of the block are the
app's, nothing after it (the process-wide ``use_app`` is not touched), the ledger is closed, and a
refusal from the core is a failed task naming the action, except where the core's error has always
gone through as it is (an app operation's outcome)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))


@pytest.fixture
def core(monkeypatch):
    """The core objects, faked: the settings, an app ``ua`` without ``kafka`` overrides, a ledger
    that records its closing. No app scope, no process-wide app at the start."""
    import streamops.app.outputs
    import streamops.ledger
    import streamops.settings
    from streamops.kafka import security

    ledgers = []

    class FakeLedger:
        closed = False

        def close(self) -> None:
            self.closed = True

    def open_ledger(url: str) -> FakeLedger:
        ledgers.append(FakeLedger())
        return ledgers[-1]

    monkeypatch.setattr(streamops.settings.Settings, "from_env", staticmethod(lambda: SimpleNamespace(ledger_db_url="x")))
    monkeypatch.setattr(streamops.ledger.Ledger, "open", staticmethod(open_ledger))
    monkeypatch.setattr(streamops.app.outputs, "load_live_spec",
                        lambda settings, app, ledger, last_good_ok=False: SimpleNamespace(name=app, kafka={}))
    monkeypatch.setattr(security, "_PROCESS_APP", None)
    token = security._APP.set(None)
    yield ledgers
    security._APP.reset(token)


def test_the_blocks_kafka_clients_are_the_apps_and_nothing_after_it(core) -> None:
    from streamops_airflow.operators.base import app_session

    from streamops.kafka import security

    with app_session("ua", "verify") as ctx:
        spec, ledger = ctx.spec, ctx.ledger
        assert spec.name == "ua"
        assert security.current_app() == "ua"
        assert not ledger.closed
    assert security.current_app() is None
    assert security._PROCESS_APP is None
    assert [ledger.closed for ledger in core] == [True]


def test_a_refusal_is_a_failed_task_naming_the_action_or_the_cores_own_error(core) -> None:
    from airflow.exceptions import AirflowException
    from streamops_airflow.operators.base import app_session

    from streamops.exceptions import UsageError

    with pytest.raises(AirflowException, match=r"^resize ua: lease held$"), app_session("ua", "resize"):
        raise UsageError("lease held")
    with pytest.raises(UsageError, match=r"^lease held$"), app_session("ua", None):
        raise UsageError("lease held")
    assert [ledger.closed for ledger in core] == [True, True]


def test_an_app_operation_leaves_no_process_wide_app_behind(core, monkeypatch) -> None:
    """Deploy/resize/stop used to set the process-wide app (``use_app``); their clients are all
    made inside the block, so the task's scope is the same to them and ends with the task."""
    from streamops_airflow.operators import DeployAppOperator

    from streamops.kafka import security
    from streamops.lifecycle import operations

    seen = []

    def request_deploy(ctx, **kwargs):
        seen.append(security.current_app())
        return {"action": "none"}

    monkeypatch.setattr(operations, "request_deploy", request_deploy)
    op = DeployAppOperator(task_id="deploy", app="ua")
    ti = SimpleNamespace(dag_id="streamops_deploy", run_id="manual", task_id="deploy")
    assert op.execute({"ti": ti}) == {"action": "none"}
    assert seen == ["ua"]
    assert security.current_app() is None
    assert security._PROCESS_APP is None
