"""Spark's RPC authentication (``spark.authenticate``): the properties file a driver loads.

On a standalone cluster the master, its workers, their executors and every driver share one secret
(Spark's security page: "``spark.authenticate.secret`` should be configured on each of the nodes").
The embedded platform generates its own (``streamops.platform.spark_auth``); for another cluster
``STREAMOPS_SPARK_CLIENT_PROPERTIES`` names a Spark properties file with that cluster's
``spark.authenticate`` and ``spark.authenticate.secret``; where the secret comes in Spark's own
variable ``_SPARK_AUTH_SECRET`` (the compose stack: the daemons read it from there), the driver's
file is written from it. A driver gets the file as spark-submit's
``--properties-file`` (through pyspark's ``PYSPARK_SUBMIT_ARGS``), never as a ``--conf``: a command
line is visible to every local user in ``ps``. Executors get the secret from their worker.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from streamops.exceptions import ConfigError
from streamops.host.files import write_private
from streamops.settings import ENV_VARS, Settings

SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"
AUTH, SECRET = "spark.authenticate", "spark.authenticate.secret"
#: where Spark's daemons and executors take the secret from (``SecurityManager.ENV_AUTH_SECRET``);
#: a driver on a cluster needs it as ``spark.authenticate.secret`` as well
SECRET_ENV = "_SPARK_AUTH_SECRET"


def embedded_auth_properties(settings: Settings) -> Path:
    """The embedded cluster's secret, as a Spark properties file (mode 0600, made by ``platform up``)."""
    return settings.state_dir / "spark" / "auth.properties"


def auth_properties_text(secret: str, comment: str = "") -> str:
    """A Spark properties file that turns authentication on with ``secret`` (the one format of both files)."""
    return (f"# {comment}\n" if comment else "") + f"{AUTH} true\n{SECRET} {secret}\n"


def from_env_properties(settings: Settings) -> Path:
    return settings.state_dir / "spark" / "auth-from-env.properties"


def embedded_master_url(settings: Settings) -> str:
    return f"spark://{settings.host}:{settings.spark_master_port}"


def driver_properties(settings: Settings, master: str) -> Path | None:
    """The properties file a driver on ``master`` loads, or None (local mode; a cluster without
    authentication; an embedded cluster started before it had a secret)."""
    if master.startswith("local"):
        return None
    if settings.spark_client_properties is not None:
        if not settings.spark_client_properties.is_file():
            raise ConfigError(f"{ENV_VARS['spark_client_properties']}={settings.spark_client_properties}: "
                              f"no such file (a Spark properties file with the cluster's spark.authenticate "
                              f"and spark.authenticate.secret)")
        return settings.spark_client_properties
    embedded = embedded_auth_properties(settings)
    if master == embedded_master_url(settings) and embedded.is_file():
        return embedded
    if secret := os.environ.get(SECRET_ENV):
        path = from_env_properties(settings)
        write_private(path, auth_properties_text(secret))
        return path
    return None


def submit_args(properties: Path, existing: str | None) -> str:
    """``PYSPARK_SUBMIT_ARGS`` that load ``properties`` and keep what was there (ending in
    ``pyspark-shell``, the primary resource pyspark's gateway needs)."""
    rest = (existing or "").strip() or "pyspark-shell"
    return f"--properties-file {shlex.quote(str(properties))} {rest}"


def use_for_driver(settings: Settings, master: str) -> Path | None:
    """Before this process starts its driver JVM: make pyspark's gateway load the cluster's
    authentication (once; a later call in the same process leaves the variable alone)."""
    props = driver_properties(settings, master)
    existing = os.environ.get(SUBMIT_ARGS)
    if props is not None and "--properties-file" not in shlex.split(existing or ""):
        os.environ[SUBMIT_ARGS] = submit_args(props, existing)
    return props
