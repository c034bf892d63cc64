"""The generated app-operation DAGs, run with ``dag.test()`` against a real (SQLite) Airflow DB.

Paths that need no running app: form validation, refusals that must change nothing, the
scale-window plan for an app that is not running. Deploy/resize through the scheduler and the
triggerer run in tests/integration/airflow/test_airflow_operations.py.
"""

from __future__ import annotations

import json
import os
import time

import pendulum
import pytest

from streamops.ledger import Ledger
from streamops.settings import Settings
from tests.dags.test_dag_integrity import REPO, _bag

APP_DAGS = REPO / "dags" / "streamops_apps.py"


@pytest.fixture(scope="module")
def airflow_db() -> Settings:
    from streamops.platform import manager

    settings = Settings.from_env()
    manager.migrate_airflow_db(settings, dict(os.environ), lambda _m: None)
    return settings


@pytest.fixture(scope="module")
def dags(airflow_db):
    bag = _bag(APP_DAGS)
    assert not bag.import_errors
    return bag.dags


@pytest.fixture
def ledger(airflow_db):
    led = Ledger.open(airflow_db.ledger_db_url)
    yield led
    led.close()


def _supervisor_beat(settings: Settings) -> None:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "supervisor.json").write_text(json.dumps({"heartbeat": time.time()}))


def test_dags_are_generated_from_the_specs(dags) -> None:
    from streamops.spec import default_spec_path, load_specs

    apps = sorted(load_specs(default_spec_path(REPO)))
    assert {"streamops_deploy", "streamops_resize", "streamops_stop"} <= set(dags)
    assert {f"streamops_scale_windows__{a}" for a in apps} <= set(dags)
    form = dags["streamops_resize"].params
    assert form.get_param("app").schema["enum"] == apps
    assert form.get_param("strategy").schema["enum"] == ["restart", "live"]
    assert form.get_param("parallelism").schema["minimum"] == 1
    assert dags["streamops_deploy"].params.get_param("parallelism").schema["type"] == ["null", "integer"]


def test_the_operation_forms_start_without_an_app(dags, ledger) -> None:
    """No app is chosen for the user: a run without one is refused, whatever the operation."""
    from airflow.sdk.exceptions import ParamValidationError

    for dag_id in ("streamops_deploy", "streamops_resize", "streamops_stop", "streamops_reset"):
        assert not dags[dag_id].params.get_param("app").has_value, dag_id
    with pytest.raises(ParamValidationError, match="app"):
        dags["streamops_stop"].test(run_conf={})
    assert ledger.operations("enriched_orders") == [] and ledger.desired("enriched_orders") is None


@pytest.mark.parametrize("conf, message", [
    ({"app": "user_activity", "parallelism": 99}, "greater than the maximum"),
    ({"app": "user_activity", "parallelism": 0}, "less than the minimum"),
    ({"app": "nope", "parallelism": 2}, "is not one of"),
    ({"app": "user_activity", "parallelism": 2, "strategy": "teleport"}, "is not one of"),
])
def test_invalid_form_values_are_refused_before_a_run_exists(dags, ledger, conf, message) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match=message):
        dags["streamops_resize"].test(run_conf=conf)
    assert ledger.operations("user_activity") == [] and ledger.desired("user_activity") is None


def test_resize_of_an_app_never_deployed_fails_and_changes_nothing(dags, ledger, airflow_db) -> None:
    _supervisor_beat(airflow_db)
    run = dags["streamops_resize"].test(run_conf={"app": "user_activity", "parallelism": 2})
    assert run.state == "failed"
    assert [ti.state for ti in run.get_task_instances()] == ["failed"]
    assert ledger.operations("user_activity") == [] and ledger.desired("user_activity") is None


def test_scale_windows_leave_a_stopped_app_alone(dags, ledger, airflow_db) -> None:
    ledger.set_desired("user_activity", status="stopped", parallelism=2, who="test")
    try:
        run = dags["streamops_scale_windows__user_activity"].test(run_conf={"override": 3})
        assert run.state == "success"
        assert ledger.desired("user_activity")["parallelism"] == 2  # nothing resized
        assert ledger.operations("user_activity") == []
    finally:
        from sqlalchemy import delete

        from streamops.ledger import schema

        with ledger.engine.begin() as conn:
            conn.execute(delete(schema.desired))


def test_scheduled_savepoint_of_an_app_that_never_ran_is_skipped(dags, ledger) -> None:
    dag = dags["streamops_savepoint__user_activity"]
    assert dag.timetable.expression == "0 * * * *"  # the spec's schedule
    run = dag.test()
    assert [ti.state for ti in run.get_task_instances()] == ["skipped"]
    assert ledger.savepoints("user_activity") == [] and ledger.operations("user_activity") == []


def test_restore_form_defaults_to_a_dry_run_and_needs_a_savepoint(dags) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    form = dags["streamops_restore"].params
    assert form.get_param("dry_run").value is True
    with pytest.raises(ParamValidationError, match="savepoint"):
        dags["streamops_restore"].test(run_conf={"app": "user_activity", "savepoint": ""})


def test_maintenance_dags_follow_the_spec_schedules(dags) -> None:
    from streamops.spec import default_spec_path, load_specs

    for name, spec in load_specs(default_spec_path(REPO)).items():
        assert dags[f"streamops_compact__{name}"].timetable.expression == spec.maintenance.compact_schedule
        assert dags[f"streamops_verify__{name}"].timetable.expression == spec.maintenance.verify_schedule
        assert dags[f"streamops_compact__{name}"].params.get_param("dry_run").value is False
    form = dags["streamops_rebuild_state"].params
    assert form.get_param("dry_run").value is True and form.get_param("stop_first").value is False
    assert form.get_param("state_partitions").schema["maximum"] == 200


def test_compaction_of_an_app_that_never_ran_is_skipped(dags, ledger) -> None:
    run = dags["streamops_compact__user_activity"].test()
    assert [ti.state for ti in run.get_task_instances()] == ["skipped"]
    assert ledger.operations("user_activity") == []


def test_rebuild_state_form_refuses_bad_partitions_before_a_run_exists(dags, ledger) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match="less than the minimum"):
        dags["streamops_rebuild_state"].test(run_conf={"app": "user_activity", "state_partitions": 0})
    assert ledger.operations("user_activity") == []


def test_verification_of_an_app_that_never_ran_is_skipped(dags, ledger) -> None:
    run = dags["streamops_verify__user_activity"].test()
    assert [ti.state for ti in run.get_task_instances()] == ["skipped"]
    assert ledger.operations("user_activity") == []


def test_reset_form_defaults_to_a_dry_run_and_validates_before_a_run_exists(dags, ledger) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    form = dags["streamops_reset"].params
    assert form.get_param("dry_run").value is True and form.get_param("state").value == "wipe"
    assert form.get_param("target").schema["enum"] == ["earliest", "latest", "datetime", "duration", "shift_by",
                                                       "offsets", "undo"]
    with pytest.raises(ParamValidationError, match="is not one of"):
        dags["streamops_reset"].test(run_conf={"app": "user_activity", "target": "yesterday"})
    with pytest.raises(ParamValidationError, match="does not match"):
        dags["streamops_reset"].test(run_conf={"app": "user_activity", "target": "earliest", "output_version": "2"})
    assert ledger.operations("user_activity") == []


def test_reset_with_a_bad_value_fails_and_changes_nothing(dags, ledger) -> None:
    run = dags["streamops_reset"].test(run_conf={"app": "user_activity", "target": "duration", "value": "1 hour"})
    assert [ti.state for ti in run.get_task_instances()] == ["failed"]
    assert ledger.operations("user_activity") == []


def test_reprocess_dags_have_intervals_for_backfills(dags) -> None:
    from streamops.spec import default_spec_path, load_specs

    for name, spec in load_specs(default_spec_path(REPO)).items():
        dag = dags[f"streamops_reprocess__{name}"]
        # a data interval per cron tick (not a trigger timetable): each backfill run gets its range
        interval = dag.timetable.infer_manual_data_interval(run_after=pendulum.datetime(2026, 11, 23, 5))
        assert dag.timetable.summary == spec.reprocess.interval and interval.end > interval.start
        assert dag.params.get_param("output_version").value == spec.reprocess.output_version
        assert dag.params.get_param("dry_run").value is False


def test_reprocess_without_a_range_fails_clearly_and_changes_nothing(dags, ledger) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match="does not match"):
        dags["streamops_reprocess__user_activity"].test(run_conf={"output_version": "2"})
    assert ledger.operations("user_activity") == []


def test_schedules_paused_in_the_spec_leaves_an_apps_dags_manual_only(tmp_path, monkeypatch) -> None:
    """``schedules: paused`` takes effect on the next parse: no schedule, still triggerable by hand."""
    import yaml

    spec = yaml.safe_load((REPO / "include" / "streams.yaml").read_text())
    app = spec["apps"]["user_activity"]
    app["scale_windows"] = [{"name": "night", "start": "0 22 * * *", "end": "0 6 * * *", "parallelism": 1}]
    (tmp_path / "include").mkdir()
    for schedules, expect_scheduled in (("active", True), ("paused", False)):
        app["schedules"] = schedules
        (tmp_path / "include" / "streams.yaml").write_text(yaml.safe_dump(spec))
        monkeypatch.setenv("STREAMOPS_REPO", str(tmp_path))
        bag = _bag(APP_DAGS)
        assert not bag.import_errors, bag.import_errors
        for kind in ("savepoint", "verify", "compact", "scale_windows"):
            dag = bag.dags[f"streamops_{kind}__user_activity"]
            assert dag.timetable.can_be_scheduled is expect_scheduled, (schedules, kind, dag.timetable)
            assert dag.is_paused_upon_creation is False
        # the reprocess DAG keeps its intervals (backfills need them; its own scheduled runs skip)
        assert bag.dags["streamops_reprocess__user_activity"].timetable.summary == app["reprocess"]["interval"]


def test_promote_form_defaults_to_a_dry_run_and_validates_the_version(dags, ledger) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    from streamops.spec import default_spec_path, load_specs

    form = dags["streamops_promote"].params
    assert form.get_param("dry_run").value is True
    assert form.get_param("app").schema["enum"] == sorted(load_specs(default_spec_path(REPO)))
    with pytest.raises(ParamValidationError, match="does not match"):
        dags["streamops_promote"].test(run_conf={"app": "user_activity", "output_version": "2"})
    assert ledger.operations("user_activity") == []


def test_scheduled_dags_wait_for_their_next_tick_instead_of_running_the_last_one(dags, monkeypatch) -> None:
    """With a start_date in the past and catchup off, Airflow 3 runs the latest past tick the
    moment a DAG becomes active: every `make run` would compact, savepoint and verify at once.
    Without one it takes the next tick (or one less than max(10% of the period, 5 min) ago)."""
    from airflow.timetables import trigger
    from airflow.timetables.base import TimeRestriction

    for kind in ("savepoint", "verify", "compact", "scale_windows"):
        dag = dags[f"streamops_{kind}__user_activity"]
        assert dag.start_date is None, f"{dag.dag_id}: a start_date makes it run a past tick when activated"
    core = trigger.CronTriggerTimetable("0 * * * *", timezone="UTC")  # what the scheduler runs for "0 * * * *"
    for now, first_run in ((pendulum.datetime(2026, 11, 24, 20, 37), pendulum.datetime(2026, 11, 24, 21)),
                           (pendulum.datetime(2026, 11, 24, 20, 4), pendulum.datetime(2026, 11, 24, 20))):
        monkeypatch.setattr(trigger, "utcnow", lambda now=now: now)
        for earliest, expected in ((None, first_run), (pendulum.datetime(2026, 1, 1), pendulum.datetime(2026, 11, 24, 20))):
            info = core.next_dagrun_info(last_automated_data_interval=None,
                                         restriction=TimeRestriction(earliest=earliest, latest=None, catchup=False))
            assert info.run_after == expected, (now, earliest, info.run_after)


def test_each_app_has_a_watch_dag_that_fails_on_an_alert(dags) -> None:
    from airflow.exceptions import AirflowException

    from streamops.spec import default_spec_path, load_specs

    for name in load_specs(default_spec_path(REPO)):
        dag = dags[f"streamops_watch__{name}"]
        assert dag.max_active_runs == 1 and type(dag.timetable).__name__ == "ContinuousTimetable"
        (task,) = dag.tasks
        assert task.app == name
    task = dags["streamops_watch__orders"].tasks[0]
    assert task.execute_complete({}, {"alerts": []}) == {"alerts": []}
    with pytest.raises(AirflowException, match=r"\[crash_loop\] orders: the supervisor gave up"):
        task.execute_complete({}, {"alerts": [{"kind": "crash_loop", "message": "orders: the supervisor gave up"}]})
