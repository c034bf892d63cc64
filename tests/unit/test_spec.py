"""App spec validation: every bad field is named; parallelism limits name how to raise them."""

from __future__ import annotations

import pytest
import yaml

from streamops.exceptions import ConfigError, UsageError
from streamops.spec import AppSpec, age_seconds, get_app, load_specs

BASE = {"job": "jobs.x", "input_topics": ["in"], "output_topic": "out", "changelog_topic": "cl",
        "dlq_topic": "dlq", "input_partitions": 6, "state_partitions": 4}


def write(tmp_path, **fields):
    p = tmp_path / "streams.yaml"
    p.write_text(yaml.safe_dump({"apps": {"app1": {**BASE, **fields}}}))
    return p


def test_the_repo_spec_is_valid(tmp_path) -> None:
    from pathlib import Path

    specs = load_specs(Path(__file__).resolve().parents[2] / "include" / "streams.yaml")
    assert "user_activity" in specs


@pytest.mark.parametrize("fields, where", [
    ({"state_partitions": 0}, "apps.app1.state_partitions"),
    ({"trigger_interval": "soon"}, "apps.app1.trigger_interval"),
    ({"spark_master": "yarn"}, "apps.app1.spark_master"),
    ({"parallelism": {"default": 5, "min": 1, "max": 4}}, "apps.app1.parallelism"),
    ({"parallelism": {"default": 2, "min": 1, "max": 7}}, "parallelism.max 7 > 6"),
    ({"savepoints": {"schedule": "every hour"}}, "apps.app1.savepoints.schedule"),
    ({"savepoints": {"retain_age": "forever"}}, "apps.app1.savepoints.retain_age"),
    ({"savepoints": {"retain_count": 0}}, "apps.app1.savepoints.retain_count"),
    ({"scale_windows": [{"name": "day", "start": "0 8 * * *", "end": "nope", "parallelism": 3}]},
     "apps.app1.scale_windows.0.end"),
    ({"scale_windows": [{"name": "day", "start": "0 8 * * *", "end": "0 18 * * *", "parallelism": 9}]},
     "scale window 'day': parallelism 9 outside [1, 4]"),
    ({"scale_windows": [{"name": "d", "start": "0 8 * * *", "end": "0 9 * * *", "parallelism": 2}] * 2},
     "used twice"),
    ({"maintenance": {"compact_schedule": "nightly"}}, "apps.app1.maintenance.compact_schedule"),
    ({"maintenance": {"verify_every": "1h"}}, "apps.app1.maintenance.verify_every"),
    ({"colour": "blue"}, "apps.app1.colour"),
])
def test_invalid_fields_are_named(tmp_path, fields, where) -> None:
    with pytest.raises(ConfigError) as err:
        load_specs(write(tmp_path, **fields))
    assert where in str(err.value)
    assert err.value.exit_code == 2


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "spark://127.0.0.1:7077",
                                    "spark://a:7077,b:7077", "k8s://https://10.0.0.1:6443"])
def test_spark_masters_accepted(tmp_path, master) -> None:
    assert load_specs(write(tmp_path, spark_master=master))["app1"].spark_master == master


def test_windows_and_savepoints_parse(tmp_path) -> None:
    spec = load_specs(write(
        tmp_path, parallelism={"default": 2, "min": 1, "max": 6},
        savepoints={"schedule": "0 * * * *", "retain_count": 3, "retain_age": "2 days"},
        scale_windows=[{"name": "business", "start": "0 8 * * 1-5", "end": "0 18 * * 1-5", "parallelism": 6}],
    ))["app1"]
    assert spec.savepoints.retain_count == 3 and age_seconds(spec.savepoints.retain_age) == 2 * 86400
    assert spec.scale_windows[0].parallelism == 6


def test_check_parallelism_names_the_limit_and_how_to_raise_it() -> None:
    spec = AppSpec(name="app1", **{**BASE, "parallelism": {"default": 2, "min": 1, "max": 6}})
    assert spec.check_parallelism(6) == 6
    with pytest.raises(UsageError, match="at least 1"):
        spec.check_parallelism(0)
    with pytest.raises(UsageError) as err:
        spec.check_parallelism(7)
    msg = str(err.value)
    assert "more than it can use: 6" in msg and "add partitions to in" in msg and "rebuild-state" in msg
    narrow = AppSpec(name="app2", **{**BASE, "parallelism": {"default": 2, "min": 2, "max": 3}})
    with pytest.raises(UsageError, match=r"outside the spec's range \[2, 3\]"):
        narrow.check_parallelism(1)


def test_unknown_app_is_a_usage_error(tmp_path) -> None:
    with pytest.raises(UsageError, match="unknown app 'nope'; known apps: app1"):
        get_app(load_specs(write(tmp_path)), "nope")


def test_maintenance_schedules_default_and_can_be_manual_only(tmp_path) -> None:
    spec = load_specs(write(tmp_path))["app1"]
    assert spec.maintenance.compact_schedule == "30 3 * * *" and spec.maintenance.verify_schedule == "15 * * * *"
    manual = load_specs(write(tmp_path, maintenance={"compact_schedule": None, "verify_schedule": "*/10 * * * *"}))
    assert manual["app1"].maintenance.compact_schedule is None
