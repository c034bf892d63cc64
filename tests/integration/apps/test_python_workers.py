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


PROBE = "tests.fixtures.warm_probe"


def _found(batches):
    """Each task: its worker's pid, and whether the probe module was loaded before the task began."""
    import os
    import sys

    import pyarrow as pa

    loaded = PROBE in sys.modules
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "loaded": [loaded]})


def test_the_startup_warm_up_leaves_each_slot_a_worker_with_the_jobs_imports(spark) -> None:
    """The driver's startup warm-up (``startup_warmup``): one Python worker per task slot, each
    with the modules imported; the next job's tasks run in those workers and find them loaded
    (without the warm-up the probe is in no worker: only this test imports it)."""
    from streamops.spark.driver.startup_warmup import warm_slots

    done = warm_slots(spark, ("pyarrow", PROBE), rocksdb=True)
    assert done.slots == spark.sparkContext.defaultParallelism == 2
    assert len(done.workers) == 2 and done.rocksdb
    rows = spark.range(0, 2, 1, 2).mapInArrow(_found, "pid long, loaded boolean").collect()
    assert [r.loaded for r in rows] == [True, True]
    assert {int(r.pid) for r in rows} <= {pid for _host, pid in done.workers}
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    with open(f"/proc/{jvm_pid}/maps") as maps:  # RocksDB's JNI library is in the (local) executor's JVM
        assert "librocksdbjni" in maps.read()
