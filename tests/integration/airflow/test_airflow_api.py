"""Airflow 3 on the embedded platform: auth on, DAGs from the repo, tasks really run."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import datetime

from streamops.platform import manager
from streamops.settings import Settings


def _request(s: Settings, method: str, path: str, token: str | None = None, body: dict | None = None):
    req = urllib.request.Request(f"{s.airflow_url}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, None


def _token(s: Settings) -> str:
    password = json.loads(manager.password_file(s).read_text())["admin"]
    status, body = _request(s, "POST", "/auth/token", body={"username": "admin", "password": password})
    assert status in (200, 201), status
    return body["access_token"]


def test_rest_api_requires_a_token(airflow_platform: Settings) -> None:
    s = airflow_platform
    assert _request(s, "GET", "/api/v2/dags")[0] == 401
    assert _request(s, "GET", "/api/v2/dags", token="not-a-token")[0] == 403  # Airflow 3: bad token
    status, body = _request(s, "POST", "/auth/token", body={"username": "admin", "password": "wrong"})
    assert status == 401
    status, body = _request(s, "GET", "/api/v2/dags", token=_token(s))
    assert status == 200 and "dags" in body


def test_repo_dag_is_parsed_and_runs_against_the_platform(airflow_platform: Settings, kafka: str,
                                                          spark_cluster: Settings) -> None:
    s = airflow_platform
    token = _token(s)
    dag_id = "streamops_platform_health"
    deadline = time.time() + 120
    while time.time() < deadline:
        status, _ = _request(s, "GET", f"/api/v2/dags/{dag_id}", token)
        if status == 200:
            break
        time.sleep(2)
    assert status == 200, "the dag-processor never parsed dags/ from the repo"
    # no unpause: the platform's DAGs are active from the first start
    status, run = _request(s, "POST", f"/api/v2/dags/{dag_id}/dagRuns", token, {"logical_date": None})
    assert status == 200, status
    run_id = run["dag_run_id"]
    state = None
    deadline = time.time() + 180
    while time.time() < deadline:
        _, run = _request(s, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}", token)
        state = run["state"]
        if state in ("success", "failed"):
            break
        time.sleep(2)
    assert state == "success"
    _, ti = _request(s, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/probe", token)
    assert ti["state"] == "success" and ti["try_number"] == 1
    _, xcom = _request(s, "GET",
                       f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/probe/xcomEntries/return_value",
                       token)
    report = xcom["value"] if isinstance(xcom["value"], dict) else json.loads(xcom["value"])
    assert report["kafka"]["bootstrap"] == kafka and report["kafka"]["healthy"] is True
    assert report["spark"]["alive_workers"] == 2


def test_dags_are_active_from_the_first_start_and_the_apps_schedules_run(airflow_platform: Settings) -> None:
    """What a new user gets after `make run`, before anyone touched a DAG: every operation DAG
    takes REST-triggered runs, and each app's scheduled DAGs are active with a next run."""
    from croniter import croniter

    from streamops.spec import default_spec_path, load_specs
    from tests.fixtures.platform import AIRFLOW_DAGS_AT_START as dags
    from tests.fixtures.platform import OPERATION_DAGS

    for d in OPERATION_DAGS:
        assert dags[d]["is_paused"] is False, (d, dags[d])
    for name, spec in load_specs(default_spec_path(airflow_platform.repo)).items():
        crons = {"savepoint": spec.savepoints.schedule, "verify": spec.maintenance.verify_schedule,
                 "compact": spec.maintenance.compact_schedule, "reprocess": spec.reprocess.interval}
        for kind, cron in crons.items():
            dag = dags[f"streamops_{kind}__{name}"]
            assert dag["is_paused"] is False, (kind, dag)
            if cron is not None and spec.schedules == "active":
                assert dag["next_dagrun_run_after"] is not None, (kind, dag)
                if kind != "reprocess":  # its next tick, not a past one run at once on the first start
                    next_run = datetime.fromisoformat(dag["next_dagrun_run_after"]).timestamp()
                    at = dag["_snapshot_at"]  # Airflow's grace: a tick max(10% of the period, 5 min) old
                    period = croniter(cron, at).get_next(float) - croniter(cron, at).get_prev(float)
                    assert next_run > at - max(period / 10, 300), (kind, dag)


def test_airflow_keeps_its_metadata_in_postgresql(airflow_platform: Settings, airflow_database: str) -> None:
    """The Airflow tests run on PostgreSQL, as production does: the DAGs the dag-processor parsed are
    rows of that database, and no SQLite file was made beside it."""
    import psycopg2
    from sqlalchemy.engine import make_url

    url = make_url(airflow_database)
    conn = psycopg2.connect(host=url.host, port=url.port, user=url.username, dbname=url.database)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT dag_id FROM dag WHERE dag_id LIKE 'streamops_%%'")
            dags = {row[0] for row in cur.fetchall()}
    finally:
        conn.close()
    assert {"streamops_deploy", "streamops_resize", "streamops_reset"} <= dags, sorted(dags)
    assert not (airflow_platform.airflow_home / "airflow.db").exists()
