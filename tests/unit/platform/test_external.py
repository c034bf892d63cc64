"""Which services are external, how ``--external`` is read, and the settings file it keeps."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from streamops.exceptions import ConfigError, UsageError
from streamops.platform import external, manager
from streamops.settings import SETTINGS_FILE, Settings, read_settings_file


def test_parse_maps_kinds_to_settings_and_embedded_to_none() -> None:
    assert external.parse(["kafka=b1:9092,b2:9092", "spark=spark://m:7077", "LEDGER = postgresql://u@h/db",
                           "airflow-db=embedded"]) == {
        "bootstrap_servers": "b1:9092,b2:9092", "spark_master": "spark://m:7077", "ledger_url": "postgresql://u@h/db",
        "airflow_db_url": None}
    for bad in ("kafka", "redis=h:1", "spark="):
        with pytest.raises(UsageError, match="expected KIND=VALUE"):
            external.parse([bad])


def test_external_groups_are_not_started_and_database_passwords_are_masked(tmp_path: Path) -> None:
    own = Settings(home=tmp_path)
    assert external.groups(own) == set() and external.services(own, "sqlite:////x/airflow.db") == []
    # the embedded broker's and master's own addresses are not external
    same = Settings(home=tmp_path, bootstrap_servers="127.0.0.1:9092", spark_master="spark://127.0.0.1:7077")
    assert external.groups(same) == set()
    s = Settings(home=tmp_path, bootstrap_servers="k1:9092", spark_master="local[2]",
                 ledger_url="postgresql+psycopg2://ops:pw1@db/streamops")
    assert external.groups(s) == {"kafka", "spark"}
    assert {c.group for c in manager.select(s)} == {"airflow", "supervisor"}
    found = external.services(s, "postgresql+psycopg2://airflow:pw2@db/airflow")
    assert [(e.kind, e.at, e.setting) for e in found] == [
        ("kafka", "k1:9092", "STREAMOPS_BOOTSTRAP_SERVERS"), ("spark", "local[2]", "STREAMOPS_SPARK_MASTER"),
        ("ledger", "postgresql+psycopg2://ops:***@db/streamops", "STREAMOPS_LEDGER_URL"),
        ("airflow-db", "postgresql+psycopg2://airflow:***@db/airflow", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")]


def test_the_settings_file_is_private_merged_and_under_the_environment(tmp_path: Path) -> None:
    path = tmp_path / SETTINGS_FILE
    external.save(tmp_path, {"bootstrap_servers": "k1:9092", "ledger_url": "postgresql://u:p@h/d"})
    external.save(tmp_path, {"ledger_url": None, "spark_master": "spark://m:7077"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_settings_file(path) == {"STREAMOPS_BOOTSTRAP_SERVERS": "k1:9092", "STREAMOPS_SPARK_MASTER": "spark://m:7077"}

    s = Settings.from_env({"STREAMOPS_HOME": str(tmp_path)})
    assert (s.bootstrap_servers, s.spark_master, s.ledger_url) == ("k1:9092", "spark://m:7077", None)
    s = Settings.from_env({"STREAMOPS_HOME": str(tmp_path), "STREAMOPS_BOOTSTRAP_SERVERS": "k9:9092"})
    assert s.bootstrap_servers == "k9:9092"  # the environment wins
    assert Settings.from_env({"STREAMOPS_HOME": str(tmp_path / "other")}).bootstrap_servers is None

    path.write_text("STREAMOPS_NOPE=1\n")
    with pytest.raises(ConfigError, match=r"settings.env:1: expected NAME=value"):
        Settings.from_env({"STREAMOPS_HOME": str(tmp_path)})


def test_airflow_db_url_reaches_airflow() -> None:
    from streamops.platform.components import airflow_env

    s = Settings(airflow_db_url="postgresql+psycopg2://airflow@db/airflow")
    assert airflow_env(s)["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == "postgresql+psycopg2://airflow@db/airflow"
    assert "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" not in airflow_env(Settings())
