"""Spark's Python workers import the installed pyspark (compiled bytecode), not pyspark.zip."""

from __future__ import annotations

import sysconfig


def _modules(_):
    import pyspark
    import pyspark.worker

    return pyspark.__file__, pyspark.worker.__file__


def test_python_workers_import_the_installed_pyspark(spark) -> None:
    files = set(spark.sparkContext.parallelize(range(4), 2).map(_modules).collect())
    site = sysconfig.get_paths()["purelib"]
    assert files == {(f"{site}/pyspark/__init__.py", f"{site}/pyspark/worker.py")}
