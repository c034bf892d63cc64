"""Where streamops keeps its state and which loopback ports the embedded platform uses.

Every value can be changed with an environment variable (named in ``ENV_VARS``), so error
messages can tell the operator exactly which setting to change.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from streamops.exceptions import ConfigError

#: field name -> environment variable that sets it
ENV_VARS: dict[str, str] = {
    "home": "STREAMOPS_HOME",
    "repo": "STREAMOPS_REPO",
    "host": "STREAMOPS_HOST",
    "kafka_port": "STREAMOPS_KAFKA_PORT",
    "kafka_controller_port": "STREAMOPS_KAFKA_CONTROLLER_PORT",
    "kafka_heap": "STREAMOPS_KAFKA_HEAP",
    "spark_master_port": "STREAMOPS_SPARK_MASTER_PORT",
    "spark_ui_port": "STREAMOPS_SPARK_UI_PORT",
    "spark_worker_ui_port": "STREAMOPS_SPARK_WORKER_UI_PORT",
    "spark_workers": "STREAMOPS_SPARK_WORKERS",
    "spark_worker_cores": "STREAMOPS_SPARK_WORKER_CORES",
    "spark_worker_memory": "STREAMOPS_SPARK_WORKER_MEMORY",
    "airflow_port": "STREAMOPS_AIRFLOW_PORT",
    "airflow_worker_log_port": "STREAMOPS_AIRFLOW_WORKER_LOG_PORT",
    "airflow_trigger_log_port": "STREAMOPS_AIRFLOW_TRIGGER_LOG_PORT",
    "metrics_port": "STREAMOPS_METRICS_PORT",
    "bootstrap_servers": "STREAMOPS_BOOTSTRAP_SERVERS",
    "spark_master": "STREAMOPS_SPARK_MASTER",
    "ledger_url": "STREAMOPS_LEDGER_URL",
    "airflow_db_url": "STREAMOPS_AIRFLOW_DB_URL",
    "kafka_security": "STREAMOPS_KAFKA_SECURITY",
    "kafka_client_properties": "STREAMOPS_KAFKA_CLIENT_PROPERTIES",
    "spark_client_properties": "STREAMOPS_SPARK_CLIENT_PROPERTIES",
    "topic_replication": "STREAMOPS_TOPIC_REPLICATION",
    "topic_min_insync": "STREAMOPS_TOPIC_MIN_INSYNC",
    "spark_image": "STREAMOPS_SPARK_IMAGE",
    "k8s_namespace": "STREAMOPS_K8S_NAMESPACE",
    "k8s_service_account": "STREAMOPS_K8S_SERVICE_ACCOUNT",
    "k8s_state_claim": "STREAMOPS_K8S_STATE_CLAIM",
    "supervisor_lease_s": "STREAMOPS_SUPERVISOR_LEASE_S",
}

Port = int


def default_repo() -> Path:
    """The project checkout: the folder holding ``dags/`` next to this package, else the cwd."""
    here = Path(__file__).resolve().parent.parent
    if (here / "dags").is_dir():
        return here
    return Path.cwd()


class Settings(BaseModel):
    """Resolved platform settings; frozen so one object describes one platform instance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo: Path = Field(default_factory=default_repo)
    home: Path | None = None
    host: str = "127.0.0.1"
    kafka_port: Port = Field(9092, ge=1, le=65535)
    #: the embedded broker's KRaft controller listener (loopback only)
    kafka_controller_port: Port = Field(9093, ge=1, le=65535)
    #: the embedded broker's JVM heap (-Xmx; -Xms is a quarter of it): small data on 2 cores
    kafka_heap: str = Field("512m", pattern=r"^\d+[mMgG]$")
    spark_master_port: Port = Field(7077, ge=1, le=65535)
    spark_ui_port: Port = Field(8090, ge=1, le=65535)
    spark_worker_ui_port: Port = Field(8091, ge=1, le=65535)
    spark_workers: int = Field(2, ge=1, le=8)
    spark_worker_cores: int = Field(2, ge=1, le=64)
    spark_worker_memory: str = Field("2g", pattern=r"^\d+[mMgG]$")
    airflow_port: Port = Field(8080, ge=1, le=65535)
    airflow_worker_log_port: Port = Field(8793, ge=1, le=65535)
    airflow_trigger_log_port: Port = Field(8794, ge=1, le=65535)
    #: the platform's Prometheus endpoint (``/metrics``, served by the supervisor)
    metrics_port: Port = Field(9464, ge=1, le=65535)
    #: external services (production); default to the embedded ones
    bootstrap_servers: str | None = None
    spark_master: str | None = None
    #: SQLAlchemy URL of the operations ledger; default SQLite under the state dir
    ledger_url: str | None = None
    #: SQLAlchemy URL of Airflow's metadata database (``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN``);
    #: None: that variable if set, else Airflow's SQLite under the state dir
    airflow_db_url: str | None = None
    #: the embedded broker's client listener: ``plaintext`` or ``sasl_ssl`` (SCRAM-SHA-512 over TLS);
    #: None: as it last ran (``streamops.kafka.security.embedded_security``)
    kafka_security: Literal["plaintext", "sasl_ssl"] | None = None
    #: a Java client properties file: every Kafka client's defaults (``streamops.kafka.security``)
    kafka_client_properties: Path | None = None
    #: a Spark properties file every driver on ``spark_master`` loads: that cluster's
    #: ``spark.authenticate`` and secret (``streamops.spark.security``); None: the embedded cluster's own
    spark_client_properties: Path | None = None
    #: replication factor and ``min.insync.replicas`` of the topics the platform creates; None: by
    #: the cluster's size, 3 and 2 from three brokers, else 1 and 1 (``streamops.kafka.replication``)
    topic_replication: int | None = Field(None, ge=1, le=16)
    topic_min_insync: int | None = Field(None, ge=1, le=16)
    #: on a ``k8s://`` master (``streamops.spark.kubernetes``, docs/production.md): the executors'
    #: image, their namespace and service account, and the ReadWriteMany claim of the state dir
    spark_image: str | None = None
    k8s_namespace: str = Field("streamops", pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
    k8s_service_account: str = Field("streamops-spark", pattern=r"^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$", max_length=253)
    k8s_state_claim: str = Field("streamops-state", pattern=r"^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$", max_length=253)
    #: seconds the ledger's supervisor lease lasts unrenewed (renewed every pass, every 2 s): how long
    #: a supervisor on another host waits after this one's host is gone (``ledger.supervisor_lease``)
    supervisor_lease_s: float = Field(30.0, ge=5, le=3600)

    @field_validator("repo", "home", "kafka_client_properties", "spark_client_properties")
    @classmethod
    def _absolute(cls, v: Path | None) -> Path | None:
        return None if v is None else Path(v).expanduser().resolve()

    @field_validator("kafka_security", mode="before")
    @classmethod
    def _lower(cls, v: object) -> object:
        return v.strip().lower() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _distinct_ports(self) -> Settings:
        seen: dict[int, str] = {}
        for name, port in self.ports().items():
            if port in seen:
                raise ValueError(
                    f"{ENV_VARS.get(name, name)}={port} collides with {ENV_VARS.get(seen[port], seen[port])}"
                )
            seen[port] = name
        return self

    @model_validator(mode="after")
    def _security_of_the_embedded_broker(self) -> Settings:
        if self.kafka_security == "sasl_ssl" and self.bootstrap_servers and self.kafka_client_properties is None:
            raise ValueError(f"{ENV_VARS['kafka_security']}=sasl_ssl secures the embedded broker; for "
                             f"{ENV_VARS['bootstrap_servers']} give that cluster's client properties in "
                             f"{ENV_VARS['kafka_client_properties']}")
        return self

    # -- derived -------------------------------------------------------------------------------
    @property
    def state_dir(self) -> Path:
        return self.home if self.home is not None else self.repo / ".streamops"

    @property
    def kafka_bootstrap(self) -> str:
        return self.bootstrap_servers or f"{self.host}:{self.kafka_port}"

    @property
    def kafka_external(self) -> bool:
        """The clients go to a Kafka cluster the platform does not start (``platform up --external kafka=``)."""
        return bool(self.bootstrap_servers) and self.bootstrap_servers != f"{self.host}:{self.kafka_port}"

    @property
    def spark_master_url(self) -> str:
        return self.spark_master or f"spark://{self.host}:{self.spark_master_port}"

    @property
    def ledger_db_url(self) -> str:
        return self.ledger_url or f"sqlite:///{self.state_dir / 'ledger.db'}"

    @property
    def airflow_url(self) -> str:
        return f"http://{self.host}:{self.airflow_port}"

    @property
    def airflow_home(self) -> Path:
        return self.state_dir / "airflow"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    def worker_ui_ports(self) -> list[int]:
        return [self.spark_worker_ui_port + i for i in range(self.spark_workers)]

    def ports(self) -> dict[str, int]:
        """Every fixed port, keyed by setting name (worker UI ports share one setting)."""
        out = {
            "kafka_port": self.kafka_port,
            "kafka_controller_port": self.kafka_controller_port,
            "spark_master_port": self.spark_master_port,
            "spark_ui_port": self.spark_ui_port,
            "airflow_port": self.airflow_port,
            "airflow_worker_log_port": self.airflow_worker_log_port,
            "airflow_trigger_log_port": self.airflow_trigger_log_port,
            "metrics_port": self.metrics_port,
        }
        for i, p in enumerate(self.worker_ui_ports()):
            out["spark_worker_ui_port" if i == 0 else f"spark_worker_ui_port+{i}"] = p
        return out

    def env(self) -> dict[str, str]:
        """These settings as STREAMOPS_* variables, so child processes resolve the same platform."""
        out = {"STREAMOPS_HOME": str(self.state_dir), "STREAMOPS_REPO": str(self.repo)}
        for name, var in ENV_VARS.items():
            value = getattr(self, name)
            if name not in ("home", "repo") and value is not None:
                out[var] = str(value)
        return out

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Build from the state dir's settings file (``SETTINGS_FILE``: what ``platform up --external``
        saved), then STREAMOPS_* variables over it; explicit keyword overrides win."""
        environ = os.environ if environ is None else environ
        home = overrides.get("home") or environ.get(ENV_VARS["home"]) or None
        repo = overrides.get("repo") or environ.get(ENV_VARS["repo"]) or None
        state_dir = Path(str(home)).expanduser() if home else Path(str(repo or default_repo())) / ".streamops"
        saved = read_settings_file(state_dir / SETTINGS_FILE)
        values: dict[str, object] = {
            name: environ.get(var) or saved[var] for name, var in ENV_VARS.items()
            if environ.get(var, "") != "" or saved.get(var, "") != ""
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                field = str(err["loc"][0]) if err["loc"] else ""
                where = ENV_VARS.get(field, field) or "settings"
                problems.append(f"{where}: {err['msg']}")
            raise ConfigError("invalid settings: " + "; ".join(problems)) from None


#: under the state dir: STREAMOPS_* settings kept for every later command of this platform
#: (``platform up --external``), one ``NAME=value`` per line, mode 0600 (a URL may hold a password)
SETTINGS_FILE = "settings.env"


def read_settings_file(path: Path) -> dict[str, str]:
    """The saved settings (none when the file does not exist); a name that is not a setting is an error."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    known = set(ENV_VARS.values())
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or name.strip() not in known:
            raise ConfigError(f"{path}:{n}: expected NAME=value with NAME one of the STREAMOPS_* settings, got "
                              f"{line.strip()[:80]!r}")
        out[name.strip()] = value.strip()
    return out


def settings_file_text(values: Mapping[str, str]) -> str:
    """The file ``read_settings_file`` reads back as ``values`` (``platform.external`` writes it)."""
    return ("# written by `streamops platform up --external`; the environment wins over it\n"
            + "".join(f"{k}={v}\n" for k, v in sorted(values.items())))
