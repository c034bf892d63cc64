"""Which pyspark Spark's Python daemon puts on its workers' path (``spark.pydaemon``)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pyspark
import pytest

from streamops.spark.pydaemon import prefer_installed_pyspark, private_socket_dir

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


def test_with_unix_sockets_the_daemon_binds_in_a_directory_of_its_own() -> None:
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp") as given:  # short enough for a socket path
        environ = {"PYTHON_UNIX_DOMAIN_ENABLED": "true", "PYTHON_WORKER_FACTORY_SOCK_DIR": given}
        made = private_socket_dir(environ)
        assert made is not None and Path(made).parent == Path(given)
        assert environ["PYTHON_WORKER_FACTORY_SOCK_DIR"] == made
        assert Path(made).stat().st_mode & 0o777 == 0o700


def test_without_unix_sockets_nothing_is_made(tmp_path: Path) -> None:
    environ = {"PYTHON_WORKER_FACTORY_SOCK_DIR": str(tmp_path)}
    assert private_socket_dir(environ) is None
    assert environ == {"PYTHON_WORKER_FACTORY_SOCK_DIR": str(tmp_path)} and not any(tmp_path.iterdir())


def test_a_sessions_python_workers_are_reached_over_a_private_unix_socket(spark) -> None:
    """What a Python task sees: the daemon's socket is a Unix one, in a 0700 directory of its own."""
    import stat

    def where(batches):
        import os

        import pyarrow as pa

        for _ in batches:
            folder = os.environ.get("PYTHON_WORKER_FACTORY_SOCK_DIR", "")
            socks = [n for n in os.listdir(folder) if n.endswith(".sock")] if folder else []
            mode = os.stat(folder).st_mode if folder else 0
            kinds = [stat.S_ISSOCK(os.stat(os.path.join(folder, n)).st_mode) for n in socks]
            yield pa.RecordBatch.from_pydict({"folder": [folder], "mode": [mode & 0o777], "socks": [len(socks)],
                                              "all_sockets": [all(kinds) and bool(kinds)]})

    row = spark.range(1).mapInArrow(where, "folder string, mode long, socks long, all_sockets boolean").collect()[0]
    assert Path(row.folder).name.startswith("streamops-py-")
    assert row.mode == 0o700 and row.socks == 1 and row.all_sockets


def test_a_directory_too_deep_for_a_socket_gives_way_to_the_system_temp(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 80)
    deep.mkdir()
    environ = {"PYTHON_UNIX_DOMAIN_ENABLED": "true", "PYTHON_WORKER_FACTORY_SOCK_DIR": str(deep)}
    made = private_socket_dir(environ)
    try:
        assert made is not None and len(made) + 43 <= 107 and not any(deep.iterdir())
        assert Path(made).name.startswith("streamops-py-") and Path(made).stat().st_mode & 0o777 == 0o700
    finally:
        if made is not None:
            Path(made).rmdir()
