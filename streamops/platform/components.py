"""What the embedded platform runs: one ``Component`` per process, in start order."""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from streamops.platform import kafka_broker
from streamops.settings import ENV_VARS, Settings
from streamops.spark.security import embedded_master_url

log = logging.getLogger(__name__)

Group = Literal["kafka", "spark", "airflow", "supervisor"]
GROUPS: tuple[Group, ...] = ("kafka", "spark", "airflow", "supervisor")


@dataclass(frozen=True)
class Component:
    name: str
    group: Group
    argv: tuple[str, ...]
    #: (port, environment variable that changes it) for every fixed port it listens on
    ports: tuple[tuple[int, str], ...] = ()
    start_timeout: float = 120.0
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def port(self) -> int | None:
        return self.ports[0][0] if self.ports else None


def bin_dir() -> Path:
    """The virtualenv's bin folder (spark-class, airflow and the python for PySpark live there)."""
    return Path(sys.executable).parent


def spark_properties(settings: Settings) -> Path:
    return settings.state_dir / "spark" / "spark-defaults.conf"


def write_spark_properties(settings: Settings) -> Path:
    """The master's and workers' properties: Spark's RPC authentication on (the cluster's secret,
    so the file is mode 0600), no REST submission server (it would take jobs without the secret)."""
    from streamops.host.files import write_private
    from streamops.platform import spark_auth

    path = spark_properties(settings)
    auth = spark_auth.ensure(settings)
    write_private(path, "\n".join(
        [
            *(f"{key} {value}" for key, value in auth.items()),
            "spark.master.rest.enabled false",
            "spark.worker.cleanup.enabled true",
            "spark.worker.cleanup.appDataTtl 86400",
            "spark.ui.reverseProxy false",
            "",
        ]
    ))
    return path


def build(settings: Settings) -> list[Component]:
    """All components in start order (kafka, spark master, workers, airflow, the supervisor)."""
    env = ENV_VARS
    kafka = Component("kafka", "kafka", kafka_broker.argv(settings),
                      ports=((settings.kafka_port, env["kafka_port"]),
                             (settings.kafka_controller_port, env["kafka_controller_port"])),
                      start_timeout=90)
    # last: it launches app drivers, which need the broker and Spark
    supervisor = Component("supervisor", "supervisor", (sys.executable, "-m", "streamops.cli", "supervise"),
                           ports=((settings.metrics_port, env["metrics_port"]),),  # its /metrics
                           start_timeout=60)
    return [kafka, *_spark(settings), *_airflow(settings), supervisor]


def _spark(settings: Settings) -> list[Component]:
    """The standalone master and its workers, each on its own web UI port."""
    env, props, spark_class = ENV_VARS, str(spark_properties(settings)), str(bin_dir() / "spark-class")
    master = Component(
        "spark-master", "spark",
        (spark_class, "org.apache.spark.deploy.master.Master", "--host", settings.host,
         "--port", str(settings.spark_master_port), "--webui-port", str(settings.spark_ui_port),
         "--properties-file", props),
        ports=((settings.spark_master_port, env["spark_master_port"]), (settings.spark_ui_port, env["spark_ui_port"])),
        start_timeout=90)
    workers = [Component(
        f"spark-worker-{i}", "spark",
        (spark_class, "org.apache.spark.deploy.worker.Worker", embedded_master_url(settings),
         "--host", settings.host, "--cores", str(settings.spark_worker_cores),
         "--memory", settings.spark_worker_memory, "--webui-port", str(ui_port),
         "--work-dir", str(settings.state_dir / "spark" / f"worker-{i}"), "--properties-file", props),
        ports=((ui_port, env["spark_worker_ui_port"]),), start_timeout=90)
        for i, ui_port in enumerate(settings.worker_ui_ports(), start=1)]
    return [master, *workers]


def _airflow(settings: Settings) -> list[Component]:
    """Airflow's four components; the api-server, scheduler and triggerer hold a port each."""
    env, airflow = ENV_VARS, str(bin_dir() / "airflow")
    ports = {"api-server": (settings.airflow_port, env["airflow_port"]),
             "scheduler": (settings.airflow_worker_log_port, env["airflow_worker_log_port"]),
             "triggerer": (settings.airflow_trigger_log_port, env["airflow_trigger_log_port"])}
    argv = {"api-server": ("api-server", "--host", settings.host, "--port", str(settings.airflow_port),
                           "--workers", "1")}
    return [Component(f"airflow-{name}", "airflow", (airflow, *argv.get(name, (name,))),
                      ports=(ports[name],) if name in ports else (), start_timeout=180)
            for name in ("api-server", "scheduler", "dag-processor", "triggerer")]


def base_env(settings: Settings, java_home: Path | None, secrets: dict[str, str]) -> dict[str, str]:
    """Environment shared by every component and by jobs the platform launches."""
    env = dict(os.environ)
    env.update(settings.env())
    env["PATH"] = f"{bin_dir()}{os.pathsep}{env.get('PATH', '')}"
    if java_home is not None:
        env["JAVA_HOME"] = str(java_home)
    env["SPARK_LOCAL_IP"] = settings.host
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_DAEMON_MEMORY"] = env.get("SPARK_DAEMON_MEMORY", "512m")
    env["SPARK_LOCAL_DIRS"] = str(settings.state_dir / "spark" / "tmp")
    env["SPARK_LOG_DIR"] = str(settings.state_dir / "logs")
    env["SPARK_NO_DAEMONIZE"] = "1"
    env.update(airflow_env(settings))
    env.update(secrets)
    return env


def airflow_env(settings: Settings) -> dict[str, str]:
    """Point Airflow at the repo's airflow.cfg and this platform's ports and folders."""
    return {
        "AIRFLOW_HOME": str(settings.airflow_home),
        "AIRFLOW_CONFIG": str(settings.repo / "airflow.cfg"),
        "AIRFLOW__API__HOST": settings.host,
        "AIRFLOW__API__PORT": str(settings.airflow_port),
        "AIRFLOW__API__BASE_URL": settings.airflow_url,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{settings.airflow_url}/execution/",
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(settings.airflow_worker_log_port),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(settings.airflow_trigger_log_port),
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": settings.host,
        **kafka_connection(settings),
        **({"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": settings.airflow_db_url} if settings.airflow_db_url else {}),
    }


#: the consumer group of the connection streamops_kafka (the Kafka provider's consumers in users' DAGs)
ASSET_WATCHERS_GROUP = "streamops-asset-watchers"


def kafka_connection(settings: Settings) -> dict[str, str]:
    """The Airflow connection ``streamops_kafka`` (``streamops_airflow.assets.KAFKA_CONN_ID``) as an
    environment variable, for the Kafka provider's operators, sensors and triggers in users' DAGs:
    this platform's broker and client security, read_committed (an app's records count once its
    batch committed), offsets committed by the caller.

    The consumer group protocol (KIP-848, ``group.protocol=consumer``; Kafka 4.0 and later): the
    provider's message-queue trigger ends after each event and closes its consumer, so with the
    classic protocol each event rebalanced the whole group (every watcher on the connection), and a
    watcher on a topic that does not exist yet failed every second, rebalancing it again. With this
    protocol a member joins and leaves alone, and a missing topic is waited for
    (bench/dlq_watcher.py)."""
    from streamops.exceptions import ConfigError
    from streamops.kafka.security import kafka_config

    try:
        kafka = kafka_config(settings)
    except ConfigError as exc:  # the secured broker's files come with its first start: no watcher until then
        log.warning("no Airflow connection streamops_kafka: %s", exc)
        return {}
    extra = {"bootstrap.servers": kafka.bootstrap, "group.id": ASSET_WATCHERS_GROUP,
             "group.protocol": "consumer", "auto.offset.reset": "earliest", "enable.auto.commit": "false", "isolation.level": "read_committed",
             **kafka.librdkafka()}
    return {"AIRFLOW_CONN_STREAMOPS_KAFKA": json.dumps({"conn_type": "kafka", "extra": extra})}
