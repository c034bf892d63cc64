"""Spark's Python daemon, importing pyspark from the installed package rather than ``pyspark.zip``.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on its Python workers'
path. Python caches no bytecode for a zip, so every worker the daemon forks compiles
``pyspark.worker`` and the SQL and Arrow modules it imports from source: about a second of CPU
per worker, paid by every driver start and every new executor. When the interpreter has the same
pyspark installed (the pip package whose ``spark-submit`` started it, bytecode compiled by
bootstrap), the daemon drops the zips from its path, so it and its workers import that copy.
Otherwise it changes nothing. Run by Spark as ``python -m streamops.spark.pydaemon``
(``spark.python.daemon.module``, see ``conf``); it must import nothing that starts a thread.

The session also has its JVM talk to the workers over Unix domain sockets instead of TCP on
loopback (``UNIX_SOCKETS``): each stateful Python operator's task waited about 50 ms on the TCP
path whatever its rows, twice per state partition and batch with a timeout, against about 22 on a
Unix socket (docs/benchmarks.md, "Python workers on Unix sockets"). On that path Spark's workers
skip the secret handshake and rely on who can open the socket, so the daemon puts its socket in a
directory of its own that only this user can enter (``private_socket_dir``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import zipfile
from importlib.machinery import PathFinder
from pathlib import Path

MODULE = "streamops.spark.pydaemon"
#: Spark's setting for the JVM's sockets to its Python workers (and the driver's to Python)
UNIX_SOCKETS = "spark.python.unix.domain.socket.enabled"
#: what Spark's JVM hands the daemon: whether its socket is a Unix one, and the directory for it
_UNIX_ENV, _DIR_ENV = "PYTHON_UNIX_DOMAIN_ENABLED", "PYTHON_WORKER_FACTORY_SOCK_DIR"
#: the longest path a Unix socket binds to on Linux (``sun_path``, less its NUL), and what the
#: daemon adds to the directory: "/." + a uuid + ".sock"
_SUN_PATH, _SOCKET_NAME = 107, 2 + 36 + 5


def conf() -> dict[str, str]:
    """The Spark settings that make every Python worker of a session start through this daemon,
    reached over a Unix domain socket."""
    return {"spark.python.daemon.module": MODULE, UNIX_SOCKETS: "true"}


def private_socket_dir(environ: dict[str, str] | os._Environ) -> str | None:
    """With Unix sockets on: a new directory (mode 0700) inside the one Spark gave, now the one the
    daemon binds its socket in (``environ`` is changed); else None."""
    if environ.get(_UNIX_ENV, "false").lower() != "true":
        return None
    path = tempfile.mkdtemp(prefix="streamops-py-", dir=environ.get(_DIR_ENV) or None)
    if len(path) + _SOCKET_NAME > _SUN_PATH:  # the socket could not be bound there: the system's temp dir
        os.rmdir(path)
        path = tempfile.mkdtemp(prefix="streamops-py-", dir="/tmp" if os.path.isdir("/tmp") else None)
    environ[_DIR_ENV] = path
    return path


def _is_spark_zip(path: str) -> bool:
    name = os.path.basename(path)
    return name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith("-src.zip"))


def _zip_text(zip_path: str, member: str) -> str:
    with zipfile.ZipFile(zip_path) as z:
        return z.read(member).decode()


def _read(open_text) -> str | None:
    try:
        return open_text()
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """``path`` without Spark's zips when the same pyspark (and py4j) is importable without them."""
    spark_zip = next((p for p in path if os.path.basename(p) == "pyspark.zip"), None)
    if spark_zip is None:
        return path
    rest = [p for p in path if not _is_spark_zip(p)]
    installed = PathFinder.find_spec("pyspark", rest)
    if installed is None or installed.origin is None or PathFinder.find_spec("py4j", rest) is None:
        return path
    here = _read(lambda: Path(installed.origin).with_name("version.py").read_text(encoding="utf-8"))
    with_zip = _read(lambda: _zip_text(spark_zip, "pyspark/version.py"))
    return rest if here is not None and here == with_zip else path


def main() -> None:
    sys.path[:] = prefer_installed_pyspark(sys.path)  # the forked workers inherit it
    private = private_socket_dir(os.environ)
    if private is not None:  # the daemon removes its socket as it exits (SIGTERM, stdin closed), then this
        atexit.register(shutil.rmtree, private, True)
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
