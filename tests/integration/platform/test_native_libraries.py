"""Spark's JVMs load RocksDB's JNI library from the folder the platform unpacked it into once, not
from a copy in /tmp (which a killed JVM leaves behind for good)."""

from __future__ import annotations

import json
import platform
from pathlib import Path

from streamops.host import jars
from streamops.spark.session import ROCKSDB_PROVIDER


def _mapped_rocksdb_files(pid: int) -> set[str]:
    return {line.split(None, 5)[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
            if "rocksdbjni" in line}


def test_a_rocksdb_state_store_maps_the_unpacked_library(spark, tmp_path: Path) -> None:
    folder = jars.rocksdb_library_dir()
    assert folder is not None
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text("\n".join(json.dumps({"k": k % 3}) for k in range(10)))
    before = spark.conf.get("spark.sql.streaming.stateStore.providerClass", None)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    try:
        counts = spark.readStream.schema("k int").json(str(tmp_path / "in")).groupBy("k").count()
        q = (counts.writeStream.outputMode("complete").format("memory").queryName("native_rocksdb")
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert sorted(tuple(r) for r in spark.sql("SELECT k, count FROM native_rocksdb").collect()) == [
            (0, 4), (1, 3), (2, 3)]
    finally:
        if before is None:
            spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
        else:
            spark.conf.set("spark.sql.streaming.stateStore.providerClass", before)
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    mapped = _mapped_rocksdb_files(pid)
    assert mapped == {str(folder / jars.ROCKSDB_JNI[platform.machine()])}, mapped
