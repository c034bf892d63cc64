"""A deploy asked from the CLI and one asked from Airflow run the same code from ``AppContext``
down: each front end builds one context (the CLI process-wide, the task for its block) and hands it
to ``lifecycle.operations.request_deploy``; neither loads the Spark runtime."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "plugins"))


@pytest.fixture
def requests(monkeypatch, tmp_path) -> list[tuple[str, str, object]]:
    """``request_deploy`` recording (front end's context type, app, ledger); a finished no-op."""
    import streamops.ledger
    from streamops.app import outputs
    from streamops.lifecycle import operations
    from streamops.lifecycle.outcomes import AlreadyAtSize

    class FakeLedger:
        def close(self) -> None:
            pass

    monkeypatch.setenv("STREAMOPS_HOME", str(tmp_path))
    monkeypatch.setattr(streamops.ledger.Ledger, "open", staticmethod(lambda url: FakeLedger()))
    monkeypatch.setattr(outputs, "load_live_spec", lambda settings, app, ledger=None, last_good_ok=False:
                        SimpleNamespace(name=app, kafka={}))
    seen: list[tuple[str, str, object]] = []

    def request_deploy(ctx, *, parallelism=None, who=None, timeout=300.0):
        seen.append((type(ctx).__name__, ctx.app, type(ctx.ledger).__name__))
        return operations.Pending(app=ctx.app, kind="deploy", operation_id=7, requested_by=who or "?", t0=0.0,
                                  deadline=1.0, before={"batch": 3}, parallelism=2,
                                  result=AlreadyAtSize(app=ctx.app, operation_id=7, parallelism=2, noop=True,
                                                       strategy="restart", before={"batch": 3},
                                                       after={"batch": 3}, seconds=0.0))

    monkeypatch.setattr(operations, "request_deploy", request_deploy)
    return seen


def test_the_cli_and_the_airflow_task_hand_request_deploy_one_app_context(requests, capsys) -> None:
    from streamops_airflow.operators import DeployAppOperator

    from streamops.cli import main

    assert main(["deploy", "ua", "--json"]) == 0
    assert '"operation_id": 7' in capsys.readouterr().out
    ti = SimpleNamespace(dag_id="streamops_deploy", run_id="manual", task_id="deploy")
    assert DeployAppOperator(task_id="deploy", app="ua").execute({"ti": ti})["operation_id"] == 7
    assert requests == [("AppContext", "ua", "FakeLedger"), ("AppContext", "ua", "FakeLedger")]


def test_neither_front_ends_deploy_loads_spark() -> None:
    """Importing what both front ends run for a deploy loads no ``streamops.spark`` module nor pyspark."""
    code = ("import sys; sys.path.insert(0, 'plugins'); import streamops.cli.apps, streamops.lifecycle.operations, "
            "streamops_airflow.operators.lifecycle, streamops_airflow.hooks, streamops.app.context; "
            "bad = sorted(m for m in sys.modules if m.startswith(('streamops.spark', 'pyspark'))); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
