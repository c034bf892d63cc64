from __future__ import annotations

from pathlib import Path

import pytest

from streamops.exceptions import ConfigError
from streamops.settings import Settings


def test_defaults_are_loopback_and_state_dir_under_repo(tmp_path: Path) -> None:
    s = Settings(repo=tmp_path)
    assert s.host == "127.0.0.1"
    assert s.state_dir == tmp_path.resolve() / ".streamops"
    assert s.kafka_bootstrap == "127.0.0.1:9092"
    assert s.spark_master_url == "spark://127.0.0.1:7077"
    assert s.worker_ui_ports() == [8091, 8092]


def test_environment_overrides_and_round_trips(tmp_path: Path) -> None:
    env = {"STREAMOPS_HOME": str(tmp_path / "h"), "STREAMOPS_KAFKA_PORT": "19092",
           "STREAMOPS_SPARK_WORKERS": "3", "STREAMOPS_BOOTSTRAP_SERVERS": "kafka:9092"}
    s = Settings.from_env(env, repo=tmp_path)
    assert s.state_dir == (tmp_path / "h").resolve()
    assert s.kafka_port == 19092
    assert s.kafka_bootstrap == "kafka:9092"  # external broker wins over the embedded port
    assert s.worker_ui_ports() == [8091, 8092, 8093]
    again = Settings.from_env(s.env())
    assert again == s


def test_explicit_override_beats_environment(tmp_path: Path) -> None:
    s = Settings.from_env({"STREAMOPS_HOME": "/nope"}, home=tmp_path, repo=tmp_path)
    assert s.state_dir == tmp_path.resolve()


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"STREAMOPS_KAFKA_PORT": "notaport"}, "STREAMOPS_KAFKA_PORT"),
        ({"STREAMOPS_KAFKA_PORT": "70000"}, "STREAMOPS_KAFKA_PORT"),
        ({"STREAMOPS_SPARK_WORKER_MEMORY": "lots"}, "STREAMOPS_SPARK_WORKER_MEMORY"),
        ({"STREAMOPS_AIRFLOW_PORT": "9092"}, "collides with STREAMOPS_KAFKA_PORT"),
        ({"STREAMOPS_SPARK_UI_PORT": "8091"}, "STREAMOPS_SPARK_WORKER_UI_PORT=8091 collides with STREAMOPS_SPARK_UI_PORT"),
    ],
)
def test_invalid_settings_name_the_variable(env: dict[str, str], needle: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        Settings.from_env(env, repo=tmp_path)
    assert needle in str(err.value)
    assert err.value.exit_code == 2
