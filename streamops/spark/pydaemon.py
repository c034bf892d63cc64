"""Spark's Python daemon, importing pyspark from the installed package rather than ``pyspark.zip``.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on its Python workers'
path. Python caches no bytecode for a zip, so every worker the daemon forks compiles
``pyspark.worker`` and the SQL and Arrow modules it imports from source: about a second of CPU
per worker, paid by every driver start and every new executor. When the interpreter has the same
pyspark installed (the pip package whose ``spark-submit`` started it, bytecode compiled by
bootstrap), the daemon drops the zips from its path, so it and its workers import that copy.
Otherwise it changes nothing. Run by Spark as ``python -m streamops.spark.pydaemon``
(``spark.python.daemon.module``, see ``conf``); it must import nothing that starts a thread.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import zipfile

MODULE = "streamops.spark.pydaemon"


def conf() -> dict[str, str]:
    """The Spark settings that make every Python worker of a session start through this daemon."""
    return {"spark.python.daemon.module": MODULE}


def _is_spark_zip(path: str) -> bool:
    name = os.path.basename(path)
    return name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith("-src.zip"))


def _version_in(source: str | None, zip_path: str | None) -> str | None:
    """The text of pyspark/version.py, from the installed package or the zip (None if absent)."""
    try:
        if zip_path is not None:
            with zipfile.ZipFile(zip_path) as z:
                return z.read("pyspark/version.py").decode()
        if source is not None:
            with open(os.path.join(os.path.dirname(source), "version.py"), encoding="utf-8") as f:
                return f.read()
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    return None


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """``path`` without Spark's zips when the same pyspark (and py4j) is importable without them."""
    zips = [p for p in path if _is_spark_zip(p)]
    if not zips:
        return path
    rest = [p for p in path if p not in zips]
    saved = sys.path[:]
    sys.path[:] = rest
    try:
        installed = importlib.util.find_spec("pyspark")
        has_py4j = importlib.util.find_spec("py4j") is not None
    finally:
        sys.path[:] = saved
    spark_zip = next((p for p in zips if os.path.basename(p) == "pyspark.zip"), None)
    if installed is None or not has_py4j or spark_zip is None:
        return path
    same = _version_in(installed.origin, None)
    if same is None or same != _version_in(None, spark_zip):
        return path
    return rest


def main() -> None:
    sys.path[:] = prefer_installed_pyspark(sys.path)  # the forked workers inherit it
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
