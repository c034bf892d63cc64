"""The warm-up plugin's jar, built from its source (also a Java agent that starts executors
niced), and the FAIR pools of drivers that resize live (``spark.warmup_plugin``)."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from streamops.spark import warmup_plugin


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK's javac")
def test_the_plugin_jar_builds_from_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = tmp_path / "build" / "streamops-warmup.jar"
    monkeypatch.setattr(warmup_plugin, "PLUGIN_JAR", jar)
    assert warmup_plugin.plugin_jar() == jar
    names = zipfile.ZipFile(jar).namelist()
    assert "io/streamops/spark/WarmupPlugin.class" in names
    manifest = zipfile.ZipFile(jar).read("META-INF/MANIFEST.MF").decode()
    assert f"Premain-Class: {warmup_plugin.AGENT_CLASS}" in manifest
    conf = warmup_plugin.plugin_conf()
    assert conf["spark.plugins"] == warmup_plugin.PLUGIN_CLASS and conf["spark.executor.extraClassPath"] == str(jar)
    assert conf["spark.scheduler.mode"] == "FAIR" and Path(conf["spark.scheduler.allocation.file"]).exists()
    assert conf["spark.executor.extraJavaOptions"] == f"-javaagent:{jar}={warmup_plugin.WARMUP_NICE}"


@pytest.mark.skipif(shutil.which("javac") is None or shutil.which("renice") is None, reason="needs javac and renice")
def test_the_agent_starts_a_jvm_niced_when_its_priority_can_be_raised_again(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A JVM started with the agent reports nice 10 in /proc, as root; unprivileged, it stays at 0."""
    import os
    import subprocess

    jar = tmp_path / "build" / "streamops-warmup.jar"
    monkeypatch.setattr(warmup_plugin, "PLUGIN_JAR", jar)
    warmup_plugin.plugin_jar()
    probe = tmp_path / "Probe.java"
    probe.write_text("public class Probe { public static void main(String[] a) throws Exception {"
                     " String s = java.nio.file.Files.readString(java.nio.file.Path.of(\"/proc/self/stat\"));"
                     " System.out.println(s.substring(s.lastIndexOf(')') + 2).split(\" \")[16]); } }")
    out = subprocess.run(["java", f"-javaagent:{jar}=10", str(probe)], capture_output=True, text=True,
                         timeout=60, check=True, env={**os.environ, "JAVA_TOOL_OPTIONS": ""})
    expected = "10" if os.geteuid() == 0 else "0"
    assert out.stdout.strip().splitlines()[-1] == expected, out.stdout + out.stderr


def _pools() -> dict[str, tuple[int, int]]:
    import xml.etree.ElementTree as ET

    root = ET.parse(warmup_plugin.POOL_FILE).getroot()
    return {p.get("name"): (int(p.findtext("minShare")), int(p.findtext("weight"))) for p in root.iter("pool")}


def _fair_first(pools: dict[str, tuple[int, int]], running: dict[str, int]) -> str:
    """The pool Spark's FAIR scheduler offers a free core to first (FairSchedulingAlgorithm:
    needy pools first, then by minShare ratio or tasks per weight, ties by name)."""
    import functools

    def before(a: str, b: str) -> int:
        (ma, wa), (mb, wb) = pools[a], pools[b]
        ra, rb = running[a], running[b]
        na, nb = ra < ma, rb < mb
        if na != nb:
            return -1 if na else 1
        ka, kb = (ra / max(ma, 1), rb / max(mb, 1)) if na else (ra / wa, rb / wb)
        if ka != kb:
            return -1 if ka < kb else 1
        return -1 if a < b else 1

    return min(running, key=functools.cmp_to_key(before))


def test_a_free_core_goes_to_the_warm_up_only_while_none_of_its_tasks_runs() -> None:
    pools = _pools()
    assert set(pools) == {warmup_plugin.POOL, warmup_plugin.QUERY_POOL}
    for q in (0, 1, 2, 8):  # the query's running tasks
        # the new executor's first offer, or its next one after a warm-up task ended
        assert _fair_first(pools, {warmup_plugin.POOL: 0, warmup_plugin.QUERY_POOL: q}) == warmup_plugin.POOL
        # while a warm-up task runs, the other executors' free cores go to the query
        assert _fair_first(pools, {warmup_plugin.POOL: 1, warmup_plugin.QUERY_POOL: q}) == warmup_plugin.QUERY_POOL
