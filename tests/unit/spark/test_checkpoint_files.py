"""The checkpoint file manager (``plugin/LocalCheckpointFileManager.java``) in a real local JVM:
Spark's contract for checkpoint files (whole on close, never replacing unless asked, nothing
after a cancel), Hadoop's checksum files beside them, and a stateful streaming query that
checkpoints through it and resumes exactly."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest

from streamops.settings import Settings
from streamops.spark.checkpoint_files import MANAGER_CLASS, MANAGER_SETTING
from streamops.spark.session import ROCKSDB_PROVIDER, session_conf
from streamops.spec import AppSpec
from streamops.state.verify.state_read import checksum_failures


def hadoop_checksum(data: bytes, chunk: int = 512) -> bytes:
    """What Hadoop's ChecksumFileSystem writes beside ``data``."""
    sums = b"".join(struct.pack(">I", zlib.crc32(data[i:i + chunk])) for i in range(0, len(data), chunk))
    return b"crc\x00" + struct.pack(">i", chunk) + sums


@pytest.fixture
def manager(spark, tmp_path: Path):
    jvm = spark._jvm
    root = jvm.org.apache.hadoop.fs.Path(tmp_path.as_uri())
    return jvm.io.streamops.spark.LocalCheckpointFileManager(root, spark._jsc.hadoopConfiguration())


def _path(spark, p: Path):
    return spark._jvm.org.apache.hadoop.fs.Path(p.as_uri())


def _write(spark, manager, p: Path, data: bytes, *, overwrite: bool = False, close: bool = True):
    out = manager.createAtomic(_path(spark, p), overwrite)
    out.write(data)
    if close:
        out.close()
    return out


def _hadoop_read(spark, p: Path) -> bytes:
    """The file read through Hadoop's local file system, which checks its checksum file."""
    fs = spark._jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    stream = fs.open(_path(spark, p))
    try:
        return bytes(spark._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
    finally:
        stream.close()


def test_the_session_of_every_app_writes_its_checkpoint_through_the_manager(tmp_path: Path) -> None:
    spec = AppSpec.model_validate({"name": "a", "job": "jobs.a", "input_topics": ["in"], "output_topic": "out"})
    for live in (True, False):
        conf = session_conf(spec, Settings(home=tmp_path), live=live)
        assert conf[MANAGER_SETTING] == MANAGER_CLASS
        jar = conf["spark.driver.extraClassPath"]  # the driver's and executors' JVMs load it
        assert jar == conf["spark.executor.extraClassPath"] and Path(jar).is_file()


def test_a_file_appears_whole_on_close_with_the_checksum_hadoop_writes(spark, manager, tmp_path: Path) -> None:
    data = bytes(range(256)) * 5 + b"tail"  # three 512-byte chunks, the last one short
    out = _write(spark, manager, tmp_path / "7", data, close=False)
    assert not (tmp_path / "7").exists()  # nothing is visible before close
    out.close()
    assert (tmp_path / "7").read_bytes() == data
    assert (tmp_path / ".7.crc").read_bytes() == hadoop_checksum(data)
    assert _hadoop_read(spark, tmp_path / "7") == data
    assert sorted(p.name for p in tmp_path.iterdir()) == [".7.crc", "7"]  # no temporary file left
    # an empty file has a header-only checksum, as Hadoop writes it
    _write(spark, manager, tmp_path / "8", b"")
    assert (tmp_path / ".8.crc").read_bytes() == hadoop_checksum(b"")


def test_a_changed_byte_fails_hadoops_read_and_streamops_verify(spark, manager, tmp_path: Path) -> None:
    state = tmp_path / "state" / "0" / "0"
    state.mkdir(parents=True)
    _write(spark, manager, state / "1.changelog", b"x" * 1000)
    assert checksum_failures(tmp_path / "state") == []
    (state / "1.changelog").write_bytes(b"x" * 999 + b"y")
    assert checksum_failures(tmp_path / "state") == ["state/0/0/1.changelog"]
    with pytest.raises(Exception, match="ChecksumException"):
        _hadoop_read(spark, state / "1.changelog")


def test_it_never_replaces_a_file_unless_asked(spark, manager, tmp_path: Path) -> None:
    _write(spark, manager, tmp_path / "3", b"first")
    with pytest.raises(Exception, match="FileAlreadyExistsException"):
        _write(spark, manager, tmp_path / "3", b"second")  # a concurrent writer of batch 3 loses
    assert (tmp_path / "3").read_bytes() == b"first" and _hadoop_read(spark, tmp_path / "3") == b"first"
    _write(spark, manager, tmp_path / "3", b"third", overwrite=True)
    assert (tmp_path / "3").read_bytes() == b"third" and _hadoop_read(spark, tmp_path / "3") == b"third"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".3.crc", "3"]


def test_a_stale_checksum_is_replaced_not_trusted(spark, manager, tmp_path: Path) -> None:
    """A file deleted without its checksum (by hand) and written again reads back through Hadoop."""
    (tmp_path / ".4.crc").write_bytes(hadoop_checksum(b"old bytes"))
    _write(spark, manager, tmp_path / "4", b"new bytes!")
    assert _hadoop_read(spark, tmp_path / "4") == b"new bytes!"


def test_a_cancelled_file_leaves_nothing(spark, manager, tmp_path: Path) -> None:
    out = _write(spark, manager, tmp_path / "5", b"half", close=False)
    out.cancel()
    out.close()  # Spark may close after cancelling: still nothing
    assert list(tmp_path.iterdir()) == []


def test_listing_exists_and_delete(spark, manager, tmp_path: Path) -> None:
    for name in ("1", "2", "10"):
        _write(spark, manager, tmp_path / "log" / name, name.encode())
    (tmp_path / "log" / ".11.abc.tmp").write_bytes(b"")  # a writer's temporary file
    listed = manager.list(_path(spark, tmp_path / "log"))
    assert sorted(s.getPath().getName() for s in listed) == [".11.abc.tmp", "1", "10", "2"]  # no .crc
    assert {s.getPath().toUri().getScheme() for s in listed} == {"file"}
    assert {s.getPath().getName(): s.getLen() for s in listed}["10"] == 2
    assert manager.exists(_path(spark, tmp_path / "log" / "2"))
    manager.delete(_path(spark, tmp_path / "log" / "2"))
    assert not (tmp_path / "log" / "2").exists() and not (tmp_path / "log" / ".2.crc").exists()
    manager.delete(_path(spark, tmp_path / "log" / "nothing"))  # a missing path is not an error
    with pytest.raises(Exception, match="FileNotFoundException"):
        manager.list(_path(spark, tmp_path / "nowhere"))
    manager.delete(_path(spark, tmp_path / "log"))
    assert not (tmp_path / "log").exists()


def test_a_stateful_query_checkpoints_through_it_and_resumes_exactly(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    session = spark.newSession()
    for key, value in {MANAGER_SETTING: MANAGER_CLASS, "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
                       "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
                       "spark.sql.shuffle.partitions": "2"}.items():
        session.conf.set(key, value)
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    src.mkdir()

    def feed(n: int, keys: list[str]) -> None:
        (src / f"{n}.json").write_text("".join(json.dumps({"k": k}) + "\n" for k in keys))

    def run() -> dict[str, int]:
        counts = session.readStream.schema("k string").option("maxFilesPerTrigger", 1).json(str(src)) \
            .groupBy("k").agg(F.count("*").alias("n"))
        seen: dict[str, int] = {}

        def sink(df, _batch: int) -> None:
            for row in df.collect():
                seen[row["k"]] = row["n"]

        q = counts.writeStream.outputMode("update").foreachBatch(sink) \
            .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
        q.awaitTermination(120)
        assert q.exception() is None
        return seen

    feed(0, ["a", "b", "a"])
    feed(1, ["b", "c"])
    assert run() == {"a": 2, "b": 2, "c": 1}
    feed(2, ["a", "c", "c"])  # a new query on the same checkpoint: the state comes back from its files
    assert run() == {"a": 3, "c": 3}
    jvm = spark._jvm
    made = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.create(
        _path(spark, ckpt), session._jsparkSession.sessionState().newHadoopConf())
    assert made.getClass().getName() == MANAGER_CLASS
    assert sorted(p.name for p in (ckpt / "commits").iterdir()) == [".0.crc", ".1.crc", ".2.crc", "0", "1", "2"]
    changelogs = sorted((ckpt / "state").rglob("*.changelog"))
    assert changelogs and all((c.parent / f".{c.name}.crc").read_bytes() == hadoop_checksum(c.read_bytes())
                              for c in changelogs)
    assert checksum_failures(ckpt / "state") == []
    assert not [p for p in ckpt.rglob("*.tmp")]
