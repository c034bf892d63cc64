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

import os
import sys
import zipfile
from importlib.machinery import PathFinder
from pathlib import Path

MODULE = "streamops.spark.pydaemon"


def conf() -> dict[str, str]:
    """The Spark settings that make every Python worker of a session start through this daemon."""
    return {"spark.python.daemon.module": MODULE}


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
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
