"""docker-compose.yaml renders with a compose client, and its secrets come only from the env.

Needs a compose client: ``docker compose`` (v2 plugin) or Debian's ``docker-compose`` (v1.29),
which the project's bootstrap installs. ``config`` only renders the file: no Docker engine,
image or network is needed.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yaml"

EXPECTED_SERVICES = {
    "kafka",
    "postgres",
    "spark-master",
    "spark-worker-1",
    "spark-worker-2",
    "airflow-init",
    "airflow-api-server",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "supervisor",
}
AIRFLOW_SERVICES = sorted(s for s in EXPECTED_SERVICES if s.startswith("airflow-"))
#: the containers that run streamops: the same platform settings in each
STREAMOPS_SERVICES = [*AIRFLOW_SERVICES, "supervisor"]

#: .env variable -> Airflow setting it feeds (same value in every Airflow container)
SECRET_ENV = {
    "AIRFLOW_JWT_SECRET": "AIRFLOW__API_AUTH__JWT_SECRET",
    "AIRFLOW_API_SECRET_KEY": "AIRFLOW__API__SECRET_KEY",
    "AIRFLOW_FERNET_KEY": "AIRFLOW__CORE__FERNET_KEY",
}
SECRET_VARS = ("POSTGRES_PASSWORD", "SPARK_AUTH_SECRET", *SECRET_ENV)
SPARK_SERVICES = ("spark-master", "spark-worker-1", "spark-worker-2")

TIMEOUT_S = 10


@lru_cache(maxsize=1)
def compose_cmd() -> tuple[str, ...]:
    """``docker compose`` when the v2 plugin works, else ``docker-compose``; fail if neither."""
    docker = shutil.which("docker")
    if docker:
        try:
            probe = subprocess.run(
                [docker, "compose", "version"],
                check=False,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired):
            probe = None
        if probe is not None and probe.returncode == 0:
            return (docker, "compose")
    legacy = shutil.which("docker-compose")
    if legacy:
        return (legacy,)
    pytest.fail(
        "no compose client found: neither `docker compose version` works nor is `docker-compose` "
        "on PATH. Install one (the bootstrap does: `apt-get install -y docker-compose`).",
        pytrace=False,
    )


def clean_env() -> dict[str, str]:
    """The caller's environment without the secrets, so only the env file can provide them."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARS}
    env.pop("COMPOSE_FILE", None)
    env.pop("COMPOSE_PROJECT_NAME", None)
    return env


def run_config(env_file: Path) -> subprocess.CompletedProcess[str]:
    # --env-file and -f are top-level options: before the subcommand for docker-compose v1.
    cmd = [*compose_cmd(), "--env-file", str(env_file), "-f", str(COMPOSE_FILE), "config"]
    return subprocess.run(
        cmd, check=False, cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT_S
    )


def environment(service: dict) -> dict[str, str]:
    """A rendered service's environment as a dict (compose may render a list or a mapping)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return {k: (None if v is None else str(v)) for k, v in env.items()}


@pytest.fixture
def secret_values() -> dict[str, str]:
    values = {name: secrets.token_urlsafe(32) for name in SECRET_VARS}
    # A real Fernet key has this shape (urlsafe base64 of 32 bytes); generated without
    # importing cryptography so the test needs nothing beyond the compose client.
    values["AIRFLOW_FERNET_KEY"] = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    return values


def test_compose_config_renders_with_secrets_from_env_file(tmp_path, secret_values):
    env_file = tmp_path / "compose.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in secret_values.items()))

    result = run_config(env_file)
    assert result.returncode == 0, f"`{' '.join(compose_cmd())} config` failed:\n{result.stderr}"

    rendered = yaml.safe_load(result.stdout)
    services = rendered["services"]
    missing = EXPECTED_SERVICES - set(services)
    assert not missing, f"services missing from docker-compose.yaml: {sorted(missing)}"

    assert str(services["kafka"]["image"]).startswith("apache/kafka"), services["kafka"]["image"]

    raw = COMPOSE_FILE.read_text()
    for name, value in secret_values.items():
        assert value not in raw, f"value of {name} is written literally in docker-compose.yaml"

    postgres_env = environment(services["postgres"])
    assert postgres_env["POSTGRES_PASSWORD"] == secret_values["POSTGRES_PASSWORD"]

    for svc in AIRFLOW_SERVICES:
        env = environment(services[svc])
        for var, setting in SECRET_ENV.items():
            assert env.get(setting) == secret_values[var], f"{svc}: {setting} is not ${{{var}}}"
        conn = env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN") or ""
        assert f":{secret_values['POSTGRES_PASSWORD']}@postgres:5432/" in conn, (
            f"{svc}: SQL_ALCHEMY_CONN does not use $POSTGRES_PASSWORD"
        )
        # the DLQ assets' watchers consume through this connection (streamops_airflow.assets)
        kafka_conn = json.loads(env["AIRFLOW_CONN_STREAMOPS_KAFKA"])
        assert kafka_conn["conn_type"] == "kafka" and kafka_conn["extra"]["bootstrap.servers"] == "kafka:9092"
        assert kafka_conn["extra"]["isolation.level"] == "read_committed"
        assert kafka_conn["extra"]["group.protocol"] == "consumer"  # see components.kafka_connection
        # the drivers started here prove the Spark cluster's secret (streamops.spark.security)
        assert env["_SPARK_AUTH_SECRET"] == secret_values["SPARK_AUTH_SECRET"], svc

    for svc in SPARK_SERVICES:  # Spark's RPC authentication on, with the one secret, on every daemon
        env = environment(services[svc])
        opts = env["SPARK_MASTER_OPTS" if svc == "spark-master" else "SPARK_WORKER_OPTS"]
        assert "-Dspark.authenticate=true" in opts.split(), (svc, opts)
        assert env["_SPARK_AUTH_SECRET"] == secret_values["SPARK_AUTH_SECRET"], svc
    # the supervisor converges what the Airflow tasks ask for: one ledger (PostgreSQL), one platform
    sup = services["supervisor"]
    assert sup["command"] == ["streamops", "supervise"]
    ledger = f"postgresql+psycopg2://airflow:{secret_values['POSTGRES_PASSWORD']}@postgres:5432/streamops"
    for svc in STREAMOPS_SERVICES:
        env = environment(services[svc])
        assert env["STREAMOPS_LEDGER_URL"] == ledger, svc
        assert (env["STREAMOPS_SPARK_MASTER"], env["STREAMOPS_BOOTSTRAP_SERVERS"]) == \
            ("spark://spark-master:7077", "kafka:9092"), svc
        assert env["_SPARK_AUTH_SECRET"] == secret_values["SPARK_AUTH_SECRET"], svc
    assert {"postgres", "kafka", "spark-master"} <= set(sup["depends_on"])
    # ... whose database the postgres image makes at its first start
    init = [v for v in services["postgres"]["volumes"] if "docker-entrypoint-initdb.d" in str(v)]
    assert len(init) == 1
    assert "CREATE DATABASE streamops" in (REPO / "docker" / "postgres-init.sql").read_text()
    # what is published is published on loopback only
    published = [p for spec in services.values() for p in spec.get("ports", [])]
    assert len(published) == 2 and all(
        (p.get("host_ip") if isinstance(p, dict) else str(p).split(":")[0]) == "127.0.0.1" for p in published), published
    # no REST submission server (it takes jobs without the secret), and its port is nowhere
    assert "-Dspark.master.rest.enabled=false" in environment(services["spark-master"])["SPARK_MASTER_OPTS"].split()
    assert not [svc for svc, spec in services.items()
                if any("6066" in str(p) for p in [*spec.get("expose", []), *spec.get("ports", [])])]


def test_compose_config_refuses_to_render_without_secrets(tmp_path):
    # An empty env file (not "no --env-file") so a developer's own .env cannot leak in.
    env_file = tmp_path / "empty.env"
    env_file.write_text("")

    result = run_config(env_file)
    assert result.returncode != 0, "compose rendered the file although no secret was provided"
    output = result.stdout + result.stderr
    assert any(name in output for name in SECRET_VARS), f"error does not name the missing secret:\n{output}"
