"""A user's own app on a running platform (issue 22): scaffolded with ``new-app`` after ``platform up``,
then, by triggering the generated DAGs through Airflow's REST API, deployed, fed, checked exact,
resized live, stopped; then removed from the spec, and its DAGs gone — with no platform component
restarted. Real scheduler, worker, triggerer, supervisor, broker and Spark cluster; the operation
tasks defer while the app converges (seen as the ``deferred`` task state), and every change is in
the ledger with the Airflow run that asked for it.

The shared platform runs on a checkout of its own (``tests.fixtures.platform.overlay_repo``), so
the app is added to that checkout's spec file and jobs/ as a user adds one to theirs.
"""

from __future__ import annotations

import json

import yaml

from streamops.checkpoints import layout
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.lifecycle.operations import read_heartbeat
from streamops.platform import manager
from streamops.spec import default_spec_path
from tests.fixtures.apps import AppHarness
from tests.fixtures.apps import until as _until
from tests.integration.airflow.test_airflow_api import _request, _token
from tests.integration.airflow.test_airflow_operations import _run

APP = "live_counts"
PER_APP_DAGS = (f"streamops_savepoint__{APP}", f"streamops_verify__{APP}")


def _pids(s) -> dict[str, int | None]:
    return {c.name: c.pid for c in manager.status(s)}



def _committed(app: AppHarness) -> int:
    return sum(sum(p.values()) for p in layout.committed_offsets(app.checkpoint).values())


def _check_exact(app: AppHarness, records: int) -> None:
    _until(f"{APP} committed {records} records", lambda: _committed(app) >= records, timeout=300)
    r = app.cli("check", APP, "--json", timeout=600)
    report = json.loads(r.stdout)
    assert r.returncode == 0 and report["ok"], r.stdout[-3000:] + r.stderr[-2000:]
    assert report["input_records"] == records, report


def _dag_gone(s, token: str, dag_id: str) -> bool:
    status, body = _request(s, "GET", f"/api/v2/dags/{dag_id}", token)
    return status == 404 or bool(body and body.get("is_stale"))


def _deploy_dag_knows(s, token: str) -> bool:
    """The deploy DAG's form offers the app (its ``app`` param's enum is the spec's apps)."""
    status, body = _request(s, "GET", "/api/v2/dags/streamops_deploy/details", token)
    return status == 200 and APP in json.dumps(body.get("params", {}))


def test_an_app_added_while_the_platform_runs_is_deployed_resized_stopped_and_removed(
        platform, kafka, spark_cluster, airflow_platform) -> None:
    s = platform.ensure("supervisor")
    token = _token(s)
    before = _pids(s)
    assert all(before.values()), before
    app = AppHarness(s, s.spark_master_url, app=APP)
    spec_path = default_spec_path(s.repo)
    original = spec_path.read_text()
    ledger = Ledger.open(s.ledger_db_url)
    try:
        # scaffolded after `platform up`, as a user would
        r = app.cli("new-app", APP)
        assert r.returncode == 0, r.stderr
        assert (s.repo / "jobs" / f"{APP}.py").exists() and APP in spec_path.read_text()
        # no savepoint or verification falling due in the middle of the test (the other apps'
        # scheduled DAGs are paused by the airflow_platform fixture for the same reason)
        specs = yaml.safe_load(spec_path.read_text())
        specs["apps"][APP]["schedules"] = "paused"
        spec_path.write_text(yaml.safe_dump(specs, sort_keys=False))
        _until("the supervisor loads the new app", lambda: (beat := read_heartbeat(s)) is not None and beat.loaded(APP), 90)

        # through Airflow's REST API, as an operator would: the new app's DAGs and the operation
        # DAGs' forms know it once the dag-processor has parsed the changed spec
        _until("Airflow parses the new app's DAGs", lambda: all(
            _request(s, "GET", f"/api/v2/dags/{d}", token)[0] == 200 for d in PER_APP_DAGS), 180, 3)
        _until("the deploy DAG's form offers the app", lambda: _deploy_dag_knows(s, token), 180, 3)
        # invalid form values: no run is created, nothing changes
        for conf in ({"app": APP, "parallelism": 99}, {"app": "nope", "parallelism": 1},
                     {"app": APP, "parallelism": 2, "strategy": "teleport"}):
            status, _ = _request(s, "POST", "/api/v2/dags/streamops_resize/dagRuns", token,
                                 {"logical_date": None, "conf": conf})
            assert status == 400, (conf, status)
        assert ledger.operations(APP) == [] and ledger.desired(APP) is None

        r = app.cli("produce", APP, "--events", "4000", "--seed", "1")
        assert r.returncode == 0, r.stderr[-2000:]
        out, seen = _run(s, token, "streamops_deploy", {"app": APP, "parallelism": 1}, app=APP)
        assert "deferred" in seen, seen  # waited in the triggerer, not in a worker slot
        assert out["parallelism"] == 1 and out["after"]["batch"] is not None
        deploy_run = next(x for x in seen if x.startswith("run_id:")).removeprefix("run_id:")
        first = driver.running(s, APP)
        pinned = json.loads((s.state_dir / "apps" / APP / "spec.json").read_text())["spec"]
        assert pinned["input_topics"] == [f"{APP}-input"] and pinned["output_topic"]
        _check_exact(app, 4000)

        # live: the same driver grows to 2 executors (restart resizes through the DAGs are
        # test_airflow_operations', through the CLI test_resize's)
        r = app.cli("produce", APP, "--events", "3000", "--seed", "2")
        assert r.returncode == 0, r.stderr[-2000:]
        out, seen = _run(s, token, "streamops_resize", {"app": APP, "parallelism": 2, "strategy": "live"}, app=APP)
        assert out["noop"] is False and out["parallelism"] == 2 and out["strategy"] == "live" and "deferred" in seen
        assert ledger.observed(APP)["parallelism"] == 2 and ledger.desired(APP)["parallelism"] == 2
        assert driver.running(s, APP).pid == first.pid
        out, _ = _run(s, token, "streamops_resize", {"app": APP, "parallelism": 2}, app=APP)
        assert out["noop"] is True
        _until("the resized app reads the new records", lambda: _committed(app) >= 7000, 300)
        _run(s, token, "streamops_stop", {"app": APP}, app=APP)
        assert driver.running(s, APP) is None and ledger.desired(APP)["status"] == "stopped"
        _check_exact(app, 7000)
        ops = [o for o in reversed(ledger.operations(APP, limit=50)) if o["kind"] in ("deploy", "resize", "stop")]
        assert [(o["kind"], o["outcome"]) for o in ops] == [
            ("deploy", "succeeded"), ("resize", "succeeded"), ("resize", "succeeded"), ("stop", "succeeded")]
        assert ops[0]["requested_by"] == f"airflow:streamops_deploy/{deploy_run}/deploy"
        assert all(o["requested_by"].startswith("airflow:streamops_") for o in ops)
        assert ledger.lease(APP) is None

        # removed from the spec: unloaded by the supervisor, its DAGs gone
        spec_path.write_text(original)
        _until("the supervisor unloads the app", lambda: (beat := read_heartbeat(s)) is not None and beat.apps is not None and APP not in beat.apps, 90)
        _until("its DAGs are gone", lambda: all(_dag_gone(s, token, d) for d in PER_APP_DAGS), 180, 3)
        r = app.cli("deploy", APP)
        assert r.returncode == 2 and "is not in" in r.stderr and "any more" in r.stderr, r.stderr[-2000:]

        assert _pids(s) == before  # no component was restarted for any of it
    finally:
        spec_path.write_text(original)
        driver.stop(s, APP, now=True)
        ledger.close()
