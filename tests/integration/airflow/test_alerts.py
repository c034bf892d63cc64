"""Alerts (issue 25): an app's watch DAG (``streamops_watch__APP``), deferred in the triggerer,
fails when the supervisor gives up on the app after repeated crashes, and again when a
verification finds a changelog altered behind the app's back. Real Airflow (auth on, PostgreSQL),
supervisor, broker and Spark cluster.

The crash loop is forced the way it happens: the app's checkpoint claims another job shape (as
after an incompatible change), so every driver the supervisor launches refuses to start."""

from __future__ import annotations

import json
import os
import signal

from streamops.checkpoints.compat import FILE
from streamops.kafka.read import latest_per_key
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.spec import default_spec_path, get_app, load_job, load_specs
from tests.fixtures.apps import AppHarness
from tests.fixtures.apps import until as _until
from tests.integration.airflow.test_airflow_api import _request, _token
from tests.integration.airflow.test_airflow_operations import _run

APP = "orders"
WATCH = f"streamops_watch__{APP}"



def _watch_runs(s, token: str) -> list[dict]:
    return _request(s, "GET", f"/api/v2/dags/{WATCH}/dagRuns?order_by=-run_after&limit=20", token)[1]["dag_runs"]


def _deferred_run(s, token: str, after: set[str]) -> str:
    """A new watch run whose task is deferred (watching in the triggerer)."""
    def find() -> str | None:
        for run in _watch_runs(s, token):
            if run["dag_run_id"] in after:
                continue
            ti = _request(s, "GET", f"/api/v2/dags/{WATCH}/dagRuns/{run['dag_run_id']}/taskInstances/watch", token)[1]
            if ti and ti.get("state") == "deferred":
                return run["dag_run_id"]
        return None

    return _until("a watch run deferred", find, 240, 2)


def _failed_with(s, token: str, run_id: str, needle: str, timeout: float = 420) -> str:
    def ended() -> dict | None:
        run = _request(s, "GET", f"/api/v2/dags/{WATCH}/dagRuns/{run_id}", token)[1]
        return run if run["state"] in ("success", "failed") else None

    run = _until(f"watch run {run_id} ends", ended, timeout, 2)
    _, log = _request(s, "GET", f"/api/v2/dags/{WATCH}/dagRuns/{run_id}/taskInstances/watch/logs/1"
                                "?full_content=true", token)
    text = json.dumps(log)
    assert run["state"] == "failed", (run, text[-3000:])
    assert needle in text, text[-3000:]
    return text


def test_a_crash_loop_and_a_failed_verification_each_fail_the_watch(platform, kafka, spark_cluster,
                                                                     airflow_platform) -> None:
    s = platform.ensure("supervisor")
    token = _token(s)
    spec = get_app(load_specs(default_spec_path(s.repo)), APP)
    job_cls = load_job(spec, s.repo)
    app = AppHarness(s, s.spark_master_url, app=APP)
    ledger = Ledger.open(s.ledger_db_url)
    shape = app.checkpoint / FILE
    try:
        r = app.cli("produce", APP, "--events", "3000", "--seed", "1")
        assert r.returncode == 0, r.stderr[-2000:]
        _run(s, token, "streamops_deploy", {"app": APP, "parallelism": 1}, app=APP)
        assert _request(s, "PATCH", f"/api/v2/dags/{WATCH}", token, {"is_paused": False})[0] == 200
        first = _deferred_run(s, token, set())

        # every driver the supervisor launches now refuses the checkpoint: a crash loop
        saved = shape.read_text()
        shape.write_text(json.dumps({**json.loads(saved), "key": "not_the_key"}))
        os.kill(driver.running(s, APP).pid, signal.SIGKILL)
        _until("the supervisor gives up", lambda: (ledger.observed(APP) or {}).get("status") == "crash-loop", 300, 2)
        _failed_with(s, token, first, "[crash_loop] orders: the supervisor gave up")

        # repaired and deployed again; then a changelog record altered behind the app's back
        shape.write_text(saved)
        _run(s, token, "streamops_deploy", {"app": APP, "parallelism": 1}, app=APP)
        second = _deferred_run(s, token, {first})
        key, state = min(latest_per_key(s.kafka_bootstrap, spec.changelog_topic,
                                        decode=job_cls.state_serde.loads).items())
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": s.kafka_bootstrap})
        p.produce(spec.changelog_topic, key=key.encode(),
                  value=job_cls.state_serde.dumps({**state, "max_ts": (state["max_ts"] or 0) + 1}))
        assert p.flush(30) == 0
        r = app.cli("verify", APP, "--json", timeout=600)
        assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
        verify_id = ledger.operations(APP, limit=1, kind="verify")[0]["id"]
        _failed_with(s, token, second, f"[verify_failed] orders: verification #{verify_id} failed")
    finally:
        _request(s, "PATCH", f"/api/v2/dags/{WATCH}", token, {"is_paused": True})
        # stopped as an operator stops it: with the desired state stopped, or the supervisor
        # would launch it again and hold the shared cluster's cores for the tests after this one
        app.cli("stop", APP, "--now", timeout=180)
        driver.stop(s, APP, now=True)
        ledger.close()
