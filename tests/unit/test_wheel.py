"""The wheel built from the repository holds every file of the package, and so every file the
runtime opens beside its modules (the wheel used to lack the live-resize pools' fairscheduler.xml)."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from streamops.ledger import store
from streamops.platform import kafka_broker
from streamops.spark import kafka_writer, local_log, warmup_plugin

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "streamops"
SKIP = {"__pycache__", "build"}  # bytecode; the plugin jar the first driver compiles


def _uv() -> str:
    """The uv the bootstrap installs (``scripts/bootstrap.sh``: on the PATH or in ~/.local/bin)."""
    found = shutil.which("uv") or shutil.which("uv", path=str(Path.home() / ".local" / "bin"))
    assert found, "no uv: run `make bootstrap-test`"
    return found


def _package_files(root: Path) -> set[str]:
    return {p.relative_to(root.parent).as_posix() for p in root.rglob("*")
            if p.is_file() and not SKIP.intersection(p.relative_to(root).parts) and p.suffix != ".pyc"}


def _runtime_files() -> set[Path]:
    """What the runtime opens from its own folder, as the modules name it."""
    return {warmup_plugin.POOL_FILE, warmup_plugin.PLUGIN_SOURCE, *warmup_plugin.PLUGIN_SOURCE.parent.glob("*.java"),
            kafka_writer.WRITER_SOURCE, local_log.LOG4J2_CONFIG,
            Path(kafka_broker.__file__).with_name("kafka_tools_log4j2.properties"),
            store.MIGRATIONS / "script.py.mako", store.MIGRATIONS / "env.py"}


def test_the_wheel_holds_every_file_of_the_package_and_what_the_runtime_opens(tmp_path: Path) -> None:
    src = tmp_path / "src"  # a copy: setuptools writes build/ and egg-info beside the project
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(PACKAGE, src / "streamops", ignore=shutil.ignore_patterns(*SKIP, "*.pyc"))
    out = subprocess.run([_uv(), "build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(src)],
                         capture_output=True, text=True, timeout=300, check=False,
                         env={**os.environ, "UV_NO_PROGRESS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("streamops-*.whl")
    inside = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("streamops/")}
    runtime = {p.resolve().relative_to(REPO).as_posix() for p in _runtime_files()}
    assert "streamops/spark/plugin/fairscheduler.xml" in runtime and all((REPO / p).is_file() for p in runtime)
    assert runtime <= inside, sorted(runtime - inside)
    assert _package_files(PACKAGE) - inside == set()
