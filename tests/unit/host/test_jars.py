"""RocksDB's JNI library, unpacked once into the jars folder for every Spark JVM's library path."""

from __future__ import annotations

import hashlib
import platform
import zipfile
from pathlib import Path

import pytest

from streamops.host import jars


@pytest.fixture
def jars_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(jars.JARS_DIR_VAR, str(tmp_path))
    return tmp_path


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_library_is_unpacked_once_byte_for_byte_and_named_in_both_library_paths(jars_dir: Path) -> None:
    name = jars.ROCKSDB_JNI[platform.machine()]
    jar = jars._pyspark_jars("rocksdbjni-*.jar")[0]
    conf = jars.rocksdb_library_conf()
    folder = jars_dir / "native" / jar.stem
    assert conf == {"spark.driver.extraLibraryPath": str(folder), "spark.executor.extraLibraryPath": str(folder)}
    with zipfile.ZipFile(jar) as z:
        assert _digest((folder / name).read_bytes()) == _digest(z.read(name))
    assert sorted(p.name for p in folder.iterdir()) == [name]  # no temporary file left
    stat = (folder / name).stat()
    assert jars.rocksdb_library_conf() == conf
    assert (folder / name).stat().st_mtime_ns == stat.st_mtime_ns  # not written again


def test_a_folder_that_cannot_be_made_leaves_rocksdb_to_unpack_as_before(jars_dir: Path) -> None:
    (jars_dir / "native").write_text("a file where the folder should be")
    assert jars.rocksdb_library_conf() == {}
