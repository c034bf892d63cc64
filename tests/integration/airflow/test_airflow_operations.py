"""Operations by triggering the generated DAGs through Airflow's REST API: a reset task killed
half way and undone, and a declared app deployed, resized by restart and stopped.

Real scheduler, worker, triggerer, supervisor, broker and Spark cluster. The operation tasks
defer while the app converges (seen as the ``deferred`` task state), every change is in the
ledger with the Airflow run that asked for it, and the app's state is exact at the end.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from streamops.app.marker import last_marker
from streamops.app.outputs import load_live_spec
from streamops.checkpoints import lineage
from streamops.kafka.read import latest_per_key
from streamops.kafka.security import kafka_config
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.platform import manager
from streamops.state.verify.run import verify
from tests.fixtures.apps import AppHarness
from tests.integration.airflow.test_airflow_api import _request, _token

APP = "user_activity"
OPERATION_DAGS = ("streamops_deploy", "streamops_resize", "streamops_stop")


def _run(s, token: str, dag_id: str, conf: dict, timeout: float = 600, app: str = APP) -> tuple[dict, set[str]]:
    """Trigger a run, wait for it to end; returns (its task's XCom return value, task states seen)."""
    status, run = _request(s, "POST", f"/api/v2/dags/{dag_id}/dagRuns", token, {"logical_date": None, "conf": conf})
    assert status == 200, (status, run)
    run_id, task_id = run["dag_run_id"], dag_id.removeprefix("streamops_")
    seen: set[str] = set()
    deadline = time.time() + timeout
    while time.time() < deadline:
        _, ti = _request(s, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}", token)
        if ti and ti.get("state"):
            seen.add(ti["state"])
        _, run = _request(s, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}", token)
        if run["state"] in ("success", "failed"):
            break
        time.sleep(1)
    if run["state"] != "success":
        _, log = _request(s, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/1"
                                    "?full_content=true", token)
        sup = manager.log_path(s, "supervisor")
        raise AssertionError(f"{dag_id} run {run_id}: {run['state']} (task states seen {seen})\n"
                             f"task log: {json.dumps(log)[-4000:]}\n"
                             f"supervisor: {sup.read_text()[-1500:] if sup.exists() else '(not running)'}\n"
                             f"driver: {driver.log_tail(s, app, 30)}")
    _, xcom = _request(s, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/"
                                 "return_value", token)
    return xcom["value"], seen | {"run_id:" + run_id}


def test_a_reset_task_killed_half_way_is_undone_through_the_rest_api(platform, kafka, airflow_platform) -> None:
    """(Deploy, live resize and stop through the REST API, with invalid forms refused, are
    test_airflow_live_apps', on a user's own app.)"""
    s = platform.ensure("supervisor")
    app = AppHarness(s, "local[2]")  # the checkpoint the reset replaces: one bounded local run
    app.produce(30_000, seed=21)
    app.run_to_end()
    token = _token(s)
    deadline = time.time() + 180
    while any(_request(s, "GET", f"/api/v2/dags/{d}", token)[0] != 200 for d in OPERATION_DAGS):
        assert time.time() < deadline, "the dag-processor never parsed dags/streamops_apps.py"
        time.sleep(2)
    ledger = Ledger.open(s.ledger_db_url)
    try:
        assert app.check()["input_records"] == 30_000
        _reset_task_killed_then_undone_through_airflow(s, token, ledger, app)
    finally:
        ledger.close()
        driver.stop(s, APP, now=True)


def _reset_task_killed_then_undone_through_airflow(s, token: str, ledger: Ledger, app: AppHarness) -> None:
    """An Airflow reset task killed -9 half way (once it set the checkpoint aside): the run
    fails, the ledger names the steps done, and the reset DAG's ``undo`` target puts checkpoint,
    changelog, output and marker back, so the app is exact again (issue 17: a task killed)."""
    spec = load_live_spec(s, APP)
    batch, ckpt_id = app.committed_batch(), lineage.checkpoint_id(app.checkpoint)
    topics = {t: latest_per_key(s.kafka_bootstrap, t, decode=lambda v: v, raw_keys=True)
              for t in (spec.changelog_topic, spec.live_output_topic)}
    status, run = _request(s, "POST", "/api/v2/dags/streamops_reset/dagRuns", token, {
        "logical_date": None, "conf": {"app": APP, "target": "earliest", "dry_run": False}})
    assert status == 200, (status, run)
    deadline, killed = time.time() + 240, None
    while killed is None:  # the task's own process holds the lease: kill it once the checkpoint is set aside
        assert time.time() < deadline, f"the reset task never reached set-aside: {ledger.operations(APP, 1)}"
        lease, op = ledger.lease(APP), next(iter(ledger.operations(APP, limit=1)), None)
        steps = [x["step"] for x in (op or {}).get("journal") or []]
        if lease and op and op["kind"] == "reset" and "install" in steps and op["outcome"] == "running":
            assert lease["holder"].startswith(f"airflow:streamops_reset/{run['dag_run_id']}/")
            os.kill(int(lease["pid"]), signal.SIGKILL)
            killed = op["id"]
        time.sleep(0.02)
    while (state := _request(s, "GET", f"/api/v2/dags/streamops_reset/dagRuns/{run['dag_run_id']}", token)[1]
           ["state"]) not in ("success", "failed"):
        assert time.time() < deadline, state
        time.sleep(1)
    assert state == "failed"
    assert lineage.checkpoint_id(app.checkpoint) != ckpt_id  # set aside: the reset had replaced it

    out, _ = _run(s, token, "streamops_reset", {"app": APP, "target": "undo", "value": str(killed), "dry_run": False})
    assert out["undo"] == killed and "abandoned: its process" in (ledger.get_operation(killed)["error"] or "")
    assert (app.committed_batch(), lineage.checkpoint_id(app.checkpoint)) == (batch, ckpt_id)
    assert {t: latest_per_key(s.kafka_bootstrap, t, decode=lambda v: v, raw_keys=True) for t in topics} == topics
    marker = last_marker(kafka_config(s), spec.commits_topic, APP)
    assert (marker["batch_id"], marker["checkpoint_id"]) == (batch, ckpt_id)
    report = app.check()
    assert report["ok"] and report["input_records"] == 30_000, report
    assert ledger.lease(APP) is None


# sessions-live is extended (``make test-all``): a live resize through the DAG is test_airflow_live_apps'
# (deferred on the ledger) and test_streams_view's (from the page); a restart one is orders' here
@pytest.mark.parametrize(("name", "strategy"), [("orders", "restart"),
                                                pytest.param("sessions", "live", marks=pytest.mark.extended)])
def test_declared_apps_deploy_resize_stop_through_the_dags_exact(platform, kafka, spark_cluster, airflow_platform,
                                                                 spark, name: str, strategy: str) -> None:
    """The operation DAGs take any declared app: deployed on the cluster by the supervisor, resized
    (orders by restart with a warm standby; sessions, a job with stream time, live), stopped; then
    check and verify. (test_airflow_live_apps resizes a user's own app live through the DAGs;
    every operation on the declared apps is test_apps'.)"""
    s = platform.ensure("supervisor")
    app = AppHarness(s, s.spark_master_url, name)
    app.spark = spark  # check and verify in this process (a JVM start saved each)
    token = _token(s)
    assert app.cli("produce", name, "--events", "6000", "--seed", "31").returncode == 0
    ledger = Ledger.open(s.ledger_db_url)
    try:
        out, seen = _run(s, token, "streamops_deploy", {"app": name, "parallelism": 1}, app=name)
        assert out["parallelism"] == 1 and "deferred" in seen
        first = driver.running(s, name)
        assert app.cli("produce", name, "--events", "4000", "--seed", "32").returncode == 0
        out, _ = _run(s, token, "streamops_resize", {"app": name, "parallelism": 2, "strategy": strategy}, app=name)
        assert out["noop"] is False and out["parallelism"] == 2 and out["strategy"] == strategy
        assert ledger.observed(name)["parallelism"] == 2
        assert (driver.running(s, name).pid == first.pid) == (strategy == "live")
        _run(s, token, "streamops_stop", {"app": name}, app=name)
        assert driver.running(s, name) is None
        report = app.check()
        assert report["ok"] and report["input_records"] == 10_000, report
        # what `streamops verify` runs
        verified = verify(load_live_spec(s, name), s, kafka_config(s), spark=spark, html=False)
        assert verified.ok, verified.to_dict()
        kinds = [(o["kind"], o["outcome"]) for o in reversed(ledger.operations(name, limit=50))
                 if not o["kind"].startswith(("supervisor", "driver"))]
        assert kinds[:3] == [("deploy", "succeeded"), ("resize", "succeeded"), ("stop", "succeeded")], kinds
    finally:
        ledger.close()
        driver.stop(s, name, now=True)

