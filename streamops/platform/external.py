"""Services the platform uses but does not run: an existing Kafka cluster, Spark master, and
PostgreSQL for the ledger and Airflow (``platform up --external``, or the STREAMOPS_* settings).

``platform up`` starts only what is not external, and before it starts anything it asks each
external service what a client would: a metadata round trip to the Kafka cluster (and whether it
has the brokers the replication factor needs), a connection to the Spark master's RPC port, a login
to each database. Any refusal is one error naming the service, the setting that points there and
what to change, with nothing started.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from streamops.exceptions import ConfigError, UsageError
from streamops.host.exceptions import PlatformError
from streamops.host.files import write_private
from streamops.settings import ENV_VARS, SETTINGS_FILE, Settings, read_settings_file, settings_file_text
from streamops.spark.security import embedded_master_url

#: ``--external KIND=VALUE``: the setting each kind sets
KINDS: dict[str, str] = {"kafka": "bootstrap_servers", "spark": "spark_master", "ledger": "ledger_url",
                         "airflow-db": "airflow_db_url"}
#: ``--external KIND=embedded``: back to the platform's own
EMBEDDED = "embedded"


class ExternalServiceError(PlatformError):
    """An external service did not answer, or refused the platform's login.

    Operator action: the message names the service, its setting and what it answered; make it
    reachable or correct the setting (``platform up --external KIND=VALUE``), then run ``up`` again.
    Nothing was started.
    """


@dataclass(frozen=True)
class External:
    """One service of the platform that runs elsewhere."""

    kind: str  # a key of KINDS
    at: str  # where, any password masked
    setting: str  # the STREAMOPS_* variable that points there


def parse(values: Iterable[str]) -> dict[str, str | None]:
    """``KIND=VALUE`` items -> {settings field: value, None for ``embedded``}; a usage error else."""
    out: dict[str, str | None] = {}
    for item in values:
        kind, sep, value = item.partition("=")
        kind, value = kind.strip().lower(), value.strip()
        if not sep or kind not in KINDS or not value:
            raise UsageError(f"--external {item!r}: expected KIND=VALUE with KIND one of {', '.join(KINDS)} "
                             f"(e.g. kafka=b1:9092,b2:9092, spark=spark://host:7077, "
                             f"ledger=postgresql+psycopg2://user:password@host/db), or KIND={EMBEDDED}")
        out[KINDS[kind]] = None if value == EMBEDDED else value
    return out


def save(state_dir: Path, values: Mapping[str, str | None]) -> dict[str, str]:
    """Merge ``values`` (settings field -> value; None: back to the embedded one) into the state
    dir's settings file (mode 0600: a URL may hold a password); returns what it holds now."""
    path = state_dir / SETTINGS_FILE
    saved = read_settings_file(path)
    for field, value in values.items():
        if value is None:
            saved.pop(ENV_VARS[field], None)
        else:
            saved[ENV_VARS[field]] = value
    write_private(path, settings_file_text(saved))
    return saved


def masked(url: str) -> str:
    """A database URL with its password hidden (for errors, logs and status)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(an unparsable URL)"


def services(settings: Settings, airflow_db: str | None = None) -> list[External]:
    """What of ``settings`` runs elsewhere (``airflow_db``: Airflow's database URL as its
    components get it, when not SQLite)."""
    out = []
    if settings.kafka_external:
        out.append(External("kafka", settings.bootstrap_servers, ENV_VARS["bootstrap_servers"]))
    if settings.spark_master and settings.spark_master != embedded_master_url(settings):
        out.append(External("spark", settings.spark_master, ENV_VARS["spark_master"]))
    if settings.ledger_url and not settings.ledger_url.startswith("sqlite"):
        out.append(External("ledger", masked(settings.ledger_url), ENV_VARS["ledger_url"]))
    if airflow_db and not airflow_db.startswith("sqlite"):
        out.append(External("airflow-db", masked(airflow_db),
                            ENV_VARS["airflow_db_url"] if settings.airflow_db_url else "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"))
    return out


def groups(settings: Settings) -> set[str]:
    """The component groups ``platform up`` leaves to an external service: the broker on an
    external Kafka cluster, the master and workers under any other Spark master (``local[N]`` too)."""
    kinds = {s.kind for s in services(settings)}
    return {g for g in ("kafka", "spark") if g in kinds}


def check(settings: Settings, airflow_db: str | None, timeout: float = 10.0) -> list[External]:
    """Ask each external service what a client would (module docstring); the first refusal raises
    ``ExternalServiceError`` (or ``ConfigError`` for a setting that cannot work)."""
    found = services(settings, airflow_db)
    for svc in found:
        check_one(settings, svc, airflow_db, timeout)
    return found


def reachable(settings: Settings, airflow_db: str | None, timeout: float = 5.0) -> list[tuple[External, str | None]]:
    """Each external service with what it answered: None when it answers as ``check`` wants, else
    the refusal (``platform status``)."""
    out: list[tuple[External, str | None]] = []
    for svc in services(settings, airflow_db):
        try:
            check_one(settings, svc, airflow_db, timeout)
            out.append((svc, None))
        except (ExternalServiceError, ConfigError) as exc:
            out.append((svc, str(exc)))
    return out


def check_one(settings: Settings, svc: External, airflow_db: str | None, timeout: float) -> None:
    if svc.kind == "kafka":
        _check_kafka(settings, timeout)
    elif svc.kind == "spark":
        _check_spark(svc, timeout)
    elif svc.kind == "ledger":
        _check_database(svc, settings.ledger_url or "", "the operations ledger", timeout)
    else:
        _check_database(svc, airflow_db or "", "Airflow's metadata database", timeout)


def _check_kafka(settings: Settings, timeout: float) -> None:
    from confluent_kafka.admin import AdminClient

    from streamops.kafka import replication
    from streamops.kafka.admin import client_config, cluster_metadata
    from streamops.kafka.exceptions import BrokerUnavailableError
    from streamops.kafka.security import kafka_config

    kafka = kafka_config(settings)
    try:
        metadata = cluster_metadata(AdminClient(client_config(kafka)), kafka, timeout)
    except BrokerUnavailableError as exc:
        raise ExternalServiceError(f"the external Kafka cluster ({ENV_VARS['bootstrap_servers']}): {exc}") from None
    replication.wanted(kafka.replication, kafka.min_insync, replication.cluster_size(metadata), kafka.bootstrap)


def _check_spark(svc: External, timeout: float) -> None:
    """``spark://h1:7077[,h2:7077]``: one master answers on its RPC port (the standby of an HA pair
    may not: any one is enough). ``k8s://``: the API server takes the submission; it is not asked
    here (docs/production.md). ``local[N]``: nothing to ask."""
    if not svc.at.startswith("spark://"):
        return
    errors = []
    for hostport in svc.at.removeprefix("spark://").split(","):
        parts = urlsplit(f"//{hostport}")
        host, port = parts.hostname, parts.port or 7077
        if not host:
            raise ConfigError(f"{svc.setting}={svc.at}: {hostport!r} is not host:port")
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc.strerror or exc}")
    raise ExternalServiceError(f"the external Spark master {svc.at} ({svc.setting}) does not answer: "
                               f"{'; '.join(errors)}; start it, or point {svc.setting} at a running master")


def _check_database(svc: External, url: str, what: str, timeout: float) -> None:
    import sqlalchemy
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

    try:
        engine = sqlalchemy.create_engine(url, connect_args={"connect_timeout": int(timeout)}
                                          if url.startswith("postgresql") else {})
    except (ArgumentError, NoSuchModuleError) as exc:
        raise ConfigError(f"{svc.setting}: {svc.at} is not a database URL SQLAlchemy can use ({exc})") from None
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT 1"))
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise ExternalServiceError(
            f"{what} at {svc.at} ({svc.setting}) refused the platform: {reason}; create the database and its "
            f"user (docker/postgres-init.sql shows both), or correct {svc.setting}") from None
    finally:
        engine.dispose()
