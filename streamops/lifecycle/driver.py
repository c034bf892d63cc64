"""Launching and stopping an app's driver process (detached, own session, pid record, log).

The driver is ``python -m streamops.spark.driver --app NAME --parallelism N`` in this venv, which
runs the app's declared job (started by module name: nothing here imports the driver package);
PySpark's gateway starts the JVM through ``spark-submit`` in client mode as its child. Graceful
stop signals only the Python driver (SIGTERM: stop at a batch boundary, then ``spark.stop()``);
the JVM exits with it. Anything left after the timeout is killed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

from streamops.app import control
from streamops.app.control import STANDBY_ENV
from streamops.app.dir import AppDir
from streamops.host import process
from streamops.settings import Settings
from streamops.spec import AppSpec


def pid_path(settings: Settings, app: str) -> Path:
    return AppDir.of(settings, app).pid


def log_path(settings: Settings, app: str) -> Path:
    return AppDir.of(settings, app).log


#: the driver's entry point, run as ``python -m`` (``streamops/spark/driver/__main__.py``)
DRIVER_MODULE = "streamops.spark.driver"


def job_argv(spec: AppSpec) -> list[str]:
    """The driver command of any declared job (``streamops.spark.driver``)."""
    return [sys.executable, "-m", DRIVER_MODULE, "--app", spec.name]


def driver_env(settings: Settings, master: str | None = None) -> dict[str, str]:
    """``master``: where the driver runs (default the platform's); one elsewhere gets no
    ``SPARK_LOCAL_IP`` of loopback (``control.advertised_locally``)."""
    env = {**os.environ, **settings.env(), "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    if control.advertised_locally(master or settings.spark_master_url):
        env["SPARK_LOCAL_IP"] = settings.host
    from streamops.host.java import find_java

    with contextlib.suppress(Exception):  # the driver will say what is missing in its log
        java, _major = find_java(env)
        env.setdefault("JAVA_HOME", str(java.parent.parent))
    return env


def running(settings: Settings, app: str) -> process.PidRecord | None:
    return AppDir.of(settings, app).driver()


def standby_pid_path(settings: Settings, app: str) -> Path:
    return AppDir.of(settings, app).standby_pid


def launch(spec: AppSpec, settings: Settings, parallelism: int, *, standby: bool = False) -> process.PidRecord:
    """Start a driver. ``standby``: it starts its JVM and SparkContext, then waits for
    ``promote`` before it touches the checkpoint (see ``streamops.spark.driver.standby``)."""
    argv = [*job_argv(spec), "--parallelism", str(parallelism)]
    env = driver_env(settings, spec.spark_master)
    if standby:
        clear_standby(settings, spec.name)
        env[STANDBY_ENV] = "1"
        return process.spawn(argv, env=env, log_path=log_path(settings, spec.name),
                             pid_path=standby_pid_path(settings, spec.name), cwd=AppDir.of(settings, spec.name).root)
    AppDir.of(settings, spec.name).control.unlink(missing_ok=True)  # asked of a previous driver
    rec = process.spawn(argv, env=env, log_path=log_path(settings, spec.name),
                        pid_path=pid_path(settings, spec.name), cwd=AppDir.of(settings, spec.name).root)
    return rec


def standby_ready(settings: Settings, app: str, rec: process.PidRecord) -> bool:
    """Has this standby driver got its SparkContext and is waiting to be promoted?"""
    return control.standby_ready(AppDir.of(settings, app), rec.pid)


def promote(settings: Settings, app: str, rec: process.PidRecord) -> None:
    """Make a ready standby the app's driver (the previous one must be stopped already)."""
    AppDir.of(settings, app).control.unlink(missing_ok=True)
    standby_pid_path(settings, app).replace(pid_path(settings, app))
    control.release_standby(AppDir.of(settings, app))


def clear_standby(settings: Settings, app: str) -> bool:
    """Kill a standby that was never promoted (returns True if one was running)."""
    return AppDir.of(settings, app).clear_standby()


def request_parallelism(settings: Settings, app: str, parallelism: int) -> control.ControlRequest:
    """Ask the running driver to resize itself (live); it applies it from its main loop."""
    return control.write_request(AppDir.of(settings, app), parallelism)


def live_request(settings: Settings, app: str) -> control.ControlRequest | None:
    return control.read_request(AppDir.of(settings, app))


def stop(settings: Settings, app: str, *, now: bool = False, timeout: float = 120.0) -> bool:
    """Stop the driver (``AppDir.stop_driver``); True if it was running."""
    return AppDir.of(settings, app).stop_driver(now=now, timeout=timeout)


def heartbeat_age(settings: Settings, app: str) -> float | None:
    """Seconds since the driver's last heartbeat (driver.json), None if it never wrote one."""
    d = AppDir.of(settings, app)
    try:
        return max(0.0, time.time() - (d.read(d.heartbeat) or {})["heartbeat_ms"] / 1000)
    except (KeyError, TypeError):
        return None


def log_tail(settings: Settings, app: str, lines: int = 30) -> str:
    return process.tail(log_path(settings, app), lines)

