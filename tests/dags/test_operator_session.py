"""Every operator gets its app through ``app_session``: the context's Kafka configuration is the
app's (a value in the context, no scope to leak past the task), the ledger is closed, and a refusal
from the core is a failed task naming the action, except where the core's error has always gone
through as it is (an app operation's outcome)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))


#: ``ua``'s clients: SASL_PLAINTEXT with a user of its own (no secret: the password is a reference)
UA_KAFKA = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "ua",
            "sasl.password": "${env:UA_PW}"}


@pytest.fixture
def core(monkeypatch, tmp_path):
    """The core objects, faked: the settings, an app ``ua`` (with ``kafka`` overrides), a ledger
    that records its closing."""
    import streamops.app.outputs
    import streamops.ledger
    import streamops.settings
    from streamops.settings import Settings

    ledgers = []

    class FakeLedger:
        closed = False

        def close(self) -> None:
            self.closed = True

    def open_ledger(url: str) -> FakeLedger:
        ledgers.append(FakeLedger())
        return ledgers[-1]

    settings = Settings(home=tmp_path, bootstrap_servers="k:9092")
    monkeypatch.setattr(streamops.settings.Settings, "from_env", staticmethod(lambda: settings))
    monkeypatch.setattr(streamops.ledger.Ledger, "open", staticmethod(open_ledger))
    monkeypatch.setattr(streamops.app.outputs, "load_live_spec",
                        lambda settings, app, ledger, last_good_ok=False: SimpleNamespace(name=app, kafka=UA_KAFKA))
    yield ledgers


def test_the_contexts_kafka_configuration_is_the_apps(core, monkeypatch) -> None:
    from streamops_airflow.operators.base import app_session

    from streamops.kafka.admin import client_config

    monkeypatch.setenv("UA_PW", "ua-pw")
    with app_session("ua", "verify") as ctx:
        spec, ledger = ctx.spec, ctx.ledger
        assert spec.name == "ua"
        assert (ctx.kafka.app, ctx.kafka.bootstrap) == ("ua", "k:9092")
        conf = client_config(ctx.kafka)
        assert (conf["security.protocol"], conf["sasl.username"], conf["sasl.password"]) == \
            ("sasl_plaintext", "ua", "ua-pw")
        assert not ledger.closed
    assert [ledger.closed for ledger in core] == [True]


def test_a_refusal_is_a_failed_task_naming_the_action_or_the_cores_own_error(core, monkeypatch) -> None:
    from airflow.exceptions import AirflowException
    from streamops_airflow.operators.base import app_session

    from streamops.exceptions import UsageError

    monkeypatch.setenv("UA_PW", "ua-pw")
    with pytest.raises(AirflowException, match=r"^resize ua: lease held$"), app_session("ua", "resize"):
        raise UsageError("lease held")
    with pytest.raises(UsageError, match=r"^lease held$"), app_session("ua", None):
        raise UsageError("lease held")
    assert [ledger.closed for ledger in core] == [True, True]


def test_an_app_operation_is_handed_the_apps_kafka_configuration(core, monkeypatch) -> None:
    """Deploy/resize/stop make their clients with the context's configuration: the app's."""
    from streamops_airflow.operators import DeployAppOperator

    from streamops.lifecycle import operations

    monkeypatch.setenv("UA_PW", "ua-pw")
    seen = []

    def request_deploy(ctx, **kwargs):
        seen.append((ctx.kafka.app, ctx.kafka.librdkafka()["sasl.username"]))
        return {"action": "none"}

    monkeypatch.setattr(operations, "request_deploy", request_deploy)
    op = DeployAppOperator(task_id="deploy", app="ua")
    ti = SimpleNamespace(dag_id="streamops_deploy", run_id="manual", task_id="deploy")
    assert op.execute({"ti": ti}) == {"action": "none"}
    assert seen == [("ua", "ua")]
