"""App spec validation: every bad field is named; parallelism limits name how to raise them."""

from __future__ import annotations

import re

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
     "scale window 'day': parallelism 9 outside [1, 2]"),
    ({"scale_windows": [{"name": "d", "start": "0 8 * * *", "end": "0 9 * * *", "parallelism": 2}] * 2},
     "used twice"),
    ({"maintenance": {"compact_schedule": "nightly"}}, "apps.app1.maintenance.compact_schedule"),
    ({"maintenance": {"verify_every": "1h"}}, "apps.app1.maintenance.verify_every"),
    ({"colour": "blue"}, "apps.app1.colour"),
    ({"idle_timeouts": {"prices": "1 minute"}}, "idle_timeouts names 'prices', which is not one of input_topics (in)"),
    ({"idle_timeouts": {"in": "a while"}}, "not a duration: 'a while'"),
    ({"idle_timeouts": {"in": "0 seconds"}}, "idle_timeouts[in] must be above zero"),
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


def test_idle_timeouts_are_off_unless_named_and_read_in_milliseconds(tmp_path) -> None:
    assert load_specs(write(tmp_path))["app1"].idle_timeout_ms == {}
    spec = load_specs(write(tmp_path, input_topics=["in", "prices"], idle_timeouts={"prices": "2 hours"}))["app1"]
    assert spec.idle_timeout_ms == {"prices": 7_200_000}


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


#: the defaults docs/configuration.md documents for a minimal entry (job, input_topics, output_topic)
DOCUMENTED = {
    "description": "", "input_partitions": 6, "changelog_topic": "shop-state-changelog", "dlq_topic": "shop-dlq",
    "state_partitions": 4, "trigger_interval": "500 milliseconds", "max_offsets_per_trigger": None,
    "starting_offsets": "earliest", "parallelism": {"default": 1, "min": 1, "max": 2}, "checkpoint_root": None,
    "spark_master": None, "savepoints": {"schedule": "0 * * * *", "retain_count": 5, "retain_age": "7 days"},
    "maintenance": {"compact_schedule": "30 3 * * *", "verify_schedule": "15 * * * *"},
    "reprocess": {"interval": "0 0 * * *", "output_version": None, "max_offsets_per_trigger": None},
    "scale_windows": [], "output_version": None, "schedules": "active",
}


def test_a_minimal_entry_loads_with_the_documented_defaults(tmp_path) -> None:
    p = tmp_path / "streams.yaml"
    p.write_text("apps:\n  shop:\n    job: jobs.shop\n    input_topics: [orders]\n    output_topic: shop-totals\n")
    spec = load_specs(p)["shop"]
    got = spec.model_dump(mode="json")
    assert {k: got[k] for k in DOCUMENTED} == DOCUMENTED
    assert (spec.job, spec.input_topics, spec.output_topic) == ("jobs.shop", ("orders",), "shop-totals")
    assert isinstance(spec.changelog_topic, str) and spec.commits_topic == "_streamops-shop-commits"
    # derived names survive what the platform does with a spec: a copy, a dump and a re-validation
    assert AppSpec.model_validate(spec.model_dump()) == spec
    assert spec.model_copy(update={"name": "other"}).dlq_topic == "shop-dlq"


def test_null_topics_are_derived_and_explicit_ones_kept(tmp_path) -> None:
    spec = load_specs(write(tmp_path, changelog_topic=None, dlq_topic="my-dlq"))["app1"]
    assert (spec.changelog_topic, spec.dlq_topic) == ("app1-state-changelog", "my-dlq")
    # a Python caller that leaves them out gets the same names as a spec entry
    direct = AppSpec(name="app1", job="jobs.x", input_topics=("in",), output_topic="out")
    assert (direct.changelog_topic, direct.dlq_topic, direct.parallelism.max) == ("app1-state-changelog",
                                                                                   "app1-dlq", 2)


@pytest.mark.parametrize("fields, where", [
    ({"input_topics": ["app1-dlq"], "dlq_topic": None}, "input_topics[0] and dlq_topic are both 'app1-dlq'"),
    ({"output_topic": "cl"}, "changelog_topic and output_topic are both 'cl'"),
])
def test_a_topic_has_one_role(tmp_path, fields, where) -> None:
    with pytest.raises(ConfigError, match=re.escape(where)):
        load_specs(write(tmp_path, **fields))


def test_the_repo_spec_keeps_its_explicit_values() -> None:
    """Every field include/streams.yaml writes loads as written; the example apps write the fields
    whose defaults changed (topics, parallelism, savepoint schedule), so no default reaches them.
    A user's app may rely on the defaults (three lines are enough)."""
    from pathlib import Path

    from tests.fixtures.example_apps import EXAMPLE_APPS

    path = Path(__file__).resolve().parents[2] / "include" / "streams.yaml"
    raw = yaml.safe_load(path.read_text())["apps"]
    specs = load_specs(path)
    assert set(specs) == set(raw)

    def written(body: dict, got: dict, where: str) -> None:
        for k, v in body.items():
            if isinstance(v, dict):
                written(v, got[k], f"{where}.{k}")
            else:
                assert got[k] == v, f"{where}.{k}: {got[k]!r} != {v!r}"

    assert set(EXAMPLE_APPS) <= set(raw)
    for name, body in raw.items():
        if name in EXAMPLE_APPS:
            assert {"changelog_topic", "dlq_topic", "parallelism"} <= set(body) and "schedule" in body["savepoints"]
        written(body, specs[name].model_dump(mode="json"), name)
    ua = specs["user_activity"]
    assert (ua.changelog_topic, ua.dlq_topic, ua.parallelism.model_dump()) == (
        "user_activity-profiles-changelog", "user-events.dlq", {"default": 2, "min": 1, "max": 4})
