"""Which pyspark Spark's Python daemon puts on its workers' path (``spark.pydaemon``)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pyspark
import pytest

from streamops.spark.pydaemon import prefer_installed_pyspark

pytestmark = pytest.mark.unit

VERSION = (Path(pyspark.__file__).parent / "version.py").read_text()


def _zips(tmp_path: Path, version: str) -> list[str]:
    lib = tmp_path / "python" / "lib"
    lib.mkdir(parents=True)
    with zipfile.ZipFile(lib / "pyspark.zip", "w") as z:
        z.writestr("pyspark/version.py", version)
    (lib / "py4j-0.10.9.9-src.zip").write_bytes(b"")
    return [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]


def test_the_zips_are_dropped_when_the_same_pyspark_is_installed(tmp_path: Path) -> None:
    zips = _zips(tmp_path, VERSION)
    path = [*zips, "/opt/jobs", *sys.path]
    assert prefer_installed_pyspark(path) == ["/opt/jobs", *sys.path]


def test_another_spark_version_keeps_its_zips(tmp_path: Path) -> None:
    zips = _zips(tmp_path, '__version__: str = "3.5.1"\n')
    path = [*zips, "/opt/jobs", *sys.path]
    assert prefer_installed_pyspark(path) == path


def test_a_path_without_the_zips_is_left_alone() -> None:
    path = ["/opt/jobs", "/usr/lib/python3/dist-packages"]
    assert prefer_installed_pyspark(path) == path
