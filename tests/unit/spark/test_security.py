"""Which Spark properties file a driver loads for the cluster's authentication, and how it gets it."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from streamops.exceptions import ConfigError
from streamops.platform import components, spark_auth
from streamops.settings import Settings
from streamops.spark import security
from streamops.spark.security import SECRET_ENV, SUBMIT_ARGS, driver_properties, embedded_auth_properties


@pytest.fixture(autouse=True)
def _no_inherited_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    monkeypatch.delenv(SUBMIT_ARGS, raising=False)


def test_the_embedded_master_gets_the_platforms_own_secret_once_it_exists(tmp_path: Path) -> None:
    s = Settings(home=tmp_path)
    embedded = "spark://127.0.0.1:7077"
    assert driver_properties(s, embedded) is None  # a cluster started before it had a secret
    auth = spark_auth.ensure(s)
    assert driver_properties(s, embedded) == embedded_auth_properties(s)
    assert driver_properties(s, "local[2]") is None  # local mode: no cluster to prove anything to
    assert driver_properties(s, "spark://elsewhere:7077") is None  # another cluster: not our secret
    # generated once: a restarted master and the drivers still running agree
    assert spark_auth.ensure(s) == auth and len(auth[spark_auth.SECRET]) == 64
    assert auth[spark_auth.AUTH] == "true"
    assert embedded_auth_properties(s).stat().st_mode & 0o777 == 0o600


def test_another_cluster_takes_the_file_the_settings_name_and_a_missing_one_is_an_error(tmp_path: Path) -> None:
    props = tmp_path / "cluster.properties"
    s = Settings(home=tmp_path, spark_master="spark://c:7077", spark_client_properties=props)
    with pytest.raises(ConfigError, match="STREAMOPS_SPARK_CLIENT_PROPERTIES=.*no such file"):
        driver_properties(s, "spark://c:7077")
    props.write_text("spark.authenticate true\nspark.authenticate.secret x\n")
    assert driver_properties(s, "spark://c:7077") == props
    assert driver_properties(s, "local[1]") is None


def test_a_secret_in_sparks_own_variable_is_written_to_a_private_file(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "from-the-env")
    s = Settings(home=tmp_path, spark_master="spark://spark-master:7077")
    path = driver_properties(s, "spark://spark-master:7077")
    assert path == security.from_env_properties(s)
    assert path.read_text() == "spark.authenticate true\nspark.authenticate.secret from-the-env\n"
    assert path.stat().st_mode & 0o777 == 0o600


def test_the_file_reaches_spark_submit_as_a_properties_file_not_a_conf(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    s = Settings(home=tmp_path)
    spark_auth.ensure(s)
    assert security.use_for_driver(s, "local[2]") is None and SUBMIT_ARGS not in os.environ
    monkeypatch.setenv(SUBMIT_ARGS, "--conf spark.eventLog.enabled=true pyspark-shell")  # a caller's own
    path = security.use_for_driver(s, "spark://127.0.0.1:7077")
    words = shlex.split(os.environ[SUBMIT_ARGS])
    assert words == ["--properties-file", str(path), "--conf", "spark.eventLog.enabled=true", "pyspark-shell"]
    security.use_for_driver(s, "spark://127.0.0.1:7077")  # a second session in the process: not twice
    assert shlex.split(os.environ[SUBMIT_ARGS]) == words
    assert spark_auth.read(s)[spark_auth.SECRET] not in " ".join(words)
    assert security.submit_args(Path("/a b/p"), None) == "--properties-file '/a b/p' pyspark-shell"


def test_the_daemons_properties_turn_authentication_on_and_the_rest_server_off(tmp_path: Path) -> None:
    s = Settings(home=tmp_path)
    path = components.write_spark_properties(s)
    lines = path.read_text().splitlines()
    secret = spark_auth.read(s)[spark_auth.SECRET]
    assert {"spark.authenticate true", f"spark.authenticate.secret {secret}",
            "spark.master.rest.enabled false"} <= set(lines)
    assert path.stat().st_mode & 0o777 == 0o600
    assert components.write_spark_properties(s).read_text() == path.read_text()  # the same secret next time
