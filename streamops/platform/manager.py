"""Start, observe and stop the embedded platform (``streamops platform up|status|down``)."""

from __future__ import annotations

import hashlib
import json
import os
import secrets as pysecrets
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from streamops.host.java import find_java, java_home_of
from streamops.host.process import PidRecord, kill, port_in_use, read_pid, spawn, tail, terminate
from streamops.platform import components as compmod
from streamops.platform import external
from streamops.platform.components import GROUPS, Component, Group
from streamops.platform.exceptions import ComponentStartError, PortInUseError
from streamops.platform.health import check_all
from streamops.settings import Settings

if TYPE_CHECKING:
    from streamops.kafka.config import KafkaConfig

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    group: str
    pid: int | None
    ports: list[int]
    running: bool
    healthy: bool
    since: str | None
    log: str

    def to_dict(self) -> dict:
        return asdict(self)


# -- paths -------------------------------------------------------------------------------------
def pid_path(settings: Settings, name: str) -> Path:
    return settings.state_dir / "pids" / f"{name}.pid"


def log_path(settings: Settings, name: str) -> Path:
    return settings.state_dir / "logs" / f"{name}.log"


def password_file(settings: Settings) -> Path:
    return settings.airflow_home / "simple_auth_manager_passwords.json.generated"


def select(settings: Settings, only: Iterable[Group] | None = None) -> list[Component]:
    """The components of ``only`` (all groups by default) that run here: none of a group an
    external service stands for (``platform.external.groups``)."""
    groups = set(only or GROUPS) - external.groups(settings)
    return [c for c in compmod.build(settings) if c.group in groups]


# -- secrets and one-time preparation ----------------------------------------------------------
def ensure_secrets(settings: Settings) -> dict[str, str]:
    """Airflow's shared secrets, generated once per state dir and kept out of the repo."""
    path = settings.state_dir / "secrets.json"
    if path.exists():
        return json.loads(path.read_text())
    from cryptography.fernet import Fernet

    values = {
        "AIRFLOW__API_AUTH__JWT_SECRET": pysecrets.token_urlsafe(48),
        "AIRFLOW__API__SECRET_KEY": pysecrets.token_urlsafe(32),
        "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(values, f)
    return values


def migrate_airflow_db(settings: Settings, env: dict[str, str], progress: Progress) -> None:
    """``airflow db migrate`` once per (Airflow version, database URL); it is idempotent but slow."""
    from importlib.metadata import version

    conn = env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "default-sqlite")
    stamp = hashlib.sha256(f"{version('apache-airflow-core')}|{conn}".encode()).hexdigest()[:16]
    marker = settings.airflow_home / ".streamops-migrated"
    if marker.exists() and marker.read_text() == stamp:
        return
    settings.airflow_home.mkdir(parents=True, exist_ok=True)
    log = log_path(settings, "airflow-db-migrate")
    log.parent.mkdir(parents=True, exist_ok=True)
    progress("migrating the Airflow metadata database (first start only) ...")
    with open(log, "ab") as out:
        rc = subprocess.run(
            [str(compmod.bin_dir() / "airflow"), "db", "migrate"],
            env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=900, check=False,
        ).returncode
    if rc != 0:
        raise ComponentStartError(
            f"airflow db migrate failed (exit {rc}). Last lines of {log}:\n{tail(log)}"
        )
    marker.write_text(stamp)


# -- observe -----------------------------------------------------------------------------------
def _record(settings: Settings, comp: Component) -> PidRecord | None:
    rec = read_pid(pid_path(settings, comp.name))
    return rec if rec is not None and rec.alive else None


def _kafka(settings: Settings, comps: list[Component]) -> KafkaConfig | None:
    """The platform's Kafka client configuration, to ask the broker among ``comps`` (if it is)."""
    from streamops.kafka.security import kafka_config

    return kafka_config(settings) if any(c.group == "kafka" for c in comps) else None


def status(settings: Settings, only: Iterable[Group] | None = None) -> list[ComponentStatus]:
    comps = select(settings, only)
    records = {c.name: _record(settings, c) for c in comps}
    live = [c for c in comps if records[c.name] is not None]
    health = check_all(settings, live, _kafka(settings, live)) if live else {}
    out = []
    for c in comps:
        rec = records[c.name]
        out.append(
            ComponentStatus(
                name=c.name,
                group=c.group,
                pid=rec.pid if rec else None,
                ports=[p for p, _ in c.ports],
                running=rec is not None,
                healthy=bool(rec is not None and health.get(c.name)),
                since=(
                    datetime.fromtimestamp(rec.started_at, UTC).isoformat(timespec="seconds")
                    if rec else None
                ),
                log=str(log_path(settings, c.name)),
            )
        )
    return out


def _port_owner(port: int) -> str:
    try:
        for conn in psutil.net_connections(kind="inet"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                proc = psutil.Process(conn.pid)
                return f" by pid {conn.pid} ({proc.name()})"
    except (psutil.Error, PermissionError):
        pass
    return ""


# -- up / down ---------------------------------------------------------------------------------
def up(
    settings: Settings,
    only: Iterable[Group] | None = None,
    progress: Progress = lambda _msg: None,
) -> list[ComponentStatus]:
    """Start what is not running, wait until everything selected is healthy.

    Idempotent: running components are left alone. On any failure, everything this call
    started is stopped again and ComponentStartError carries the failing log's last lines.
    """
    java_bin, _major = find_java()
    secrets = ensure_secrets(settings)
    comps = select(settings, only)
    env = compmod.base_env(settings, java_home_of(java_bin), secrets)
    to_start = [c for c in comps if _record(settings, c) is None]
    airflow_db = env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN") if any(c.group == "airflow" for c in to_start) else None
    for svc in external.check(settings, airflow_db):  # before anything starts: an error starts nothing
        progress(f"{svc.kind}: external, {svc.at} ({svc.setting}) answers")
    if any(c.group == "spark" for c in to_start):  # not under a running master: it keeps what it read
        compmod.write_spark_properties(settings)
    _check_ports(settings, to_start)
    _prepare(settings, comps, to_start, env, progress)
    kafka = _kafka(settings, comps)  # after _prepare: a secured broker's client properties come with it
    started: list[Component] = []
    begun: dict[str, float] = {}
    try:
        for c in to_start:
            if c.group == "airflow" and not any(s.group == "airflow" for s in started):
                migrate_airflow_db(settings, env, progress)
            progress(f"starting {c.name}")
            spawn(c.argv, env={**env, **c.extra_env}, log_path=log_path(settings, c.name),
                  pid_path=pid_path(settings, c.name), cwd=settings.state_dir)
            started.append(c)
            begun[c.name] = time.monotonic()
        _wait_healthy(settings, comps, started, begun, progress, kafka)
    except BaseException as exc:
        if started:
            progress("stopping what this 'up' started: " + ", ".join(c.name for c in started))
            _stop(settings, reversed(started))
        if isinstance(exc, ComponentStartError):
            raise
        if isinstance(exc, Exception):
            raise ComponentStartError(f"platform up failed: {exc}") from exc
        raise
    return status(settings, only)


def _check_ports(settings: Settings, to_start: list[Component]) -> None:
    """Every fixed port a component to start needs is free (else ``PortInUseError`` naming its owner)."""
    for c in to_start:
        for port, var in c.ports:
            if port_in_use(settings.host, port):
                raise PortInUseError(
                    f"port {port} on {settings.host}, needed by {c.name}, is already in use"
                    f"{_port_owner(port)}; set {var} to a free port (or stop that process)"
                )


def _prepare(settings: Settings, comps: list[Component], to_start: list[Component], env: dict[str, str],
             progress: Progress) -> None:
    """Before anything starts: a running broker's security agrees with the settings; a broker to
    start has its jars, security, config and storage; Spark has its connector's jars."""
    from streamops.host import jars
    from streamops.kafka import security
    from streamops.platform import kafka_auth, kafka_broker

    running_broker = any(c.group == "kafka" for c in comps) and not any(c.group == "kafka" for c in to_start)
    if running_broker and (conflict := kafka_auth.running_mode_conflict(settings)):
        from streamops.exceptions import ConfigError

        raise ConfigError(conflict)
    if any(c.group == "kafka" for c in to_start):
        jars.verify(jars.KAFKA_BROKER)
        if kafka_auth.prepare(settings) == "sasl_ssl":
            progress(f"kafka: SASL_SSL listener ({kafka_auth.MECHANISM}), client properties in "
                     f"{security.embedded_client_properties(settings)}")
        kafka_broker.write_config(settings)
        progress("kafka: " + kafka_broker.prepare_storage(settings, env))
    if any(c.group == "spark" for c in to_start):
        jars.verify(jars.SPARK_KAFKA)  # every driver and executor of the platform's apps loads them


def _wait_healthy(
    settings: Settings,
    comps: list[Component],
    started: list[Component],
    begun: dict[str, float],
    progress: Progress,
    kafka: KafkaConfig | None,
) -> None:
    t0 = time.monotonic()
    pending = {c.name: c for c in comps}
    while pending:
        health = check_all(settings, list(pending.values()), kafka)
        for name in [n for n, ok in health.items() if ok]:
            progress(f"{name} healthy ({time.monotonic() - begun.get(name, t0):.1f}s)")
            pending.pop(name, None)
        for c in list(pending.values()):
            reason = None
            if _record(settings, c) is None:
                reason = "exited during start-up" if c in started else "is not running"
            elif time.monotonic() - begun.get(c.name, t0) > c.start_timeout:
                reason = f"not healthy after {c.start_timeout:.0f}s"
            if reason:
                log = log_path(settings, c.name)
                raise ComponentStartError(
                    f"{c.name} {reason}. Last lines of {log}:\n{tail(log)}"
                )
        if pending:
            time.sleep(0.5)


def _stop(settings: Settings, comps: Iterable[Component], timeout: float = 20.0) -> list[dict]:
    out = []
    for c in comps:
        path = pid_path(settings, c.name)
        rec = read_pid(path)
        if rec is None:
            continue
        was_running = rec.alive
        killed = terminate(rec, timeout=timeout)
        path.unlink(missing_ok=True)
        out.append({"name": c.name, "pid": rec.pid, "was_running": was_running, "killed": killed})
    return out


def crash(settings: Settings, name: str) -> bool:
    """SIGKILL a component's process tree, as a crash or the OOM killer would (the chaos benchmark,
    crash tests); ``up`` starts it again. True if it ran."""
    rec = read_pid(pid_path(settings, name))
    return rec is not None and kill(rec)


def down(
    settings: Settings, only: Iterable[Group] | None = None, timeout: float = 20.0
) -> list[dict]:
    """Stop components in reverse start order: SIGTERM, bounded wait, then SIGKILL.

    With the supervisor gone, the app drivers it launched are stopped too (gracefully, at a
    batch boundary): nothing the platform started outlives ``down``.
    """
    comps = list(reversed(select(settings, only)))
    sup = [c for c in comps if c.group == "supervisor"]
    drivers: list[dict] = []
    signalled: set[str] = set()
    if sup:
        # the drivers are the supervisor's children: signal only the supervisor itself first (a
        # tree-wide SIGTERM would hit each driver's JVM mid-batch), then stop them gracefully
        for c in sup:
            rec = _record(settings, c)
            leader = rec.process() if rec else None
            if leader is not None:
                signalled.add(c.name)
                leader.terminate()
                try:
                    leader.wait(timeout)
                except psutil.TimeoutExpired:
                    pass
        drivers = stop_drivers(settings)
    out = [{**d, "was_running": d["was_running"] or d["name"] in signalled}
           for d in _stop(settings, sup, timeout=timeout)] + drivers
    return out + _stop(settings, [c for c in comps if c.group != "supervisor"], timeout=timeout)


def stop_drivers(settings: Settings) -> list[dict]:
    from streamops.app.dir import AppDir

    out = []
    apps = settings.state_dir / "apps"
    for pid_file in sorted(apps.glob("*/standby.pid")) if apps.exists() else []:
        if AppDir(pid_file.parent).clear_standby():  # a handover cut short
            out.append({"name": f"standby:{pid_file.parent.name}", "pid": None, "was_running": True,
                        "killed": True})
    for pid_file in sorted(apps.glob("*/driver.pid")) if apps.exists() else []:
        app = pid_file.parent.name
        rec = read_pid(pid_file)
        if AppDir(pid_file.parent).stop_driver():
            out.append({"name": f"driver:{app}", "pid": rec.pid if rec else None, "was_running": True,
                        "killed": False})
    return out
