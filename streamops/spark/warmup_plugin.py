"""The executor plugin that holds a new executor for its warm-up (``plugin/WarmupPlugin.java``,
built here into a jar when missing or older than its source) and the FAIR scheduler pools of
drivers that resize live (``plugin/fairscheduler.xml``), as the Spark settings of such a driver's
session (``session.session_conf``).

Part of the session's configuration, so it stays beside ``session`` in ``spark/`` rather than in
the driver package (which nothing but its entry point enters): the warm-up itself, and the pools'
use, are the driver's (``spark.driver.warmup``).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

log = logging.getLogger("streamops.warmup")

PLUGIN_CLASS = "io.streamops.spark.WarmupPlugin"
PLUGIN_SOURCE = Path(__file__).resolve().parent / "plugin" / "WarmupPlugin.java"
PLUGIN_JAR = PLUGIN_SOURCE.parent / "build" / "streamops-warmup.jar"
#: FAIR pools (plugin/fairscheduler.xml): a free core goes to the warm-up while none of its
#: tasks runs (so a new executor's next task is the warm-up's), else to the query (so the
#: executors already there, whose cores the query uses, run warm-up tasks only when it is idle)
POOL = "streamops-warmup"
QUERY_POOL = "streamops-workload"
POOL_FILE = PLUGIN_SOURCE.parent / "fairscheduler.xml"
#: longest the plugin holds an executor if the driver never releases it
HOLD_MS = 90_000
#: CPU priority (nice) of an executor JVM from its start until the query's first task on it
WARMUP_NICE = 10
AGENT_CLASS = "io.streamops.spark.WarmupAgent"


def plugin_jar() -> Path | None:
    """The plugin jar, compiled from its source if missing or older (None without ``javac``)."""
    sources = sorted(PLUGIN_SOURCE.parent.glob("*.java"))
    if PLUGIN_JAR.exists() and PLUGIN_JAR.stat().st_mtime >= max(f.stat().st_mtime for f in sources):
        return PLUGIN_JAR
    javac = shutil.which("javac")
    if javac is None:
        log.warning("no javac: new executors are not held for their warm-up (live scale-out pauses longer), and "
                    "checkpoint files are written by Spark's default manager (slower per batch)")
        return None
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    PLUGIN_JAR.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=PLUGIN_JAR.parent) as tmp:
        classes = Path(tmp) / "classes"
        proc = subprocess.run([javac, "-nowarn", "-d", str(classes), "-cp", f"{jars}/*", *map(str, sources)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            log.warning("the plugin jar (warm-up, checkpoint files) did not compile (%s); going without it",
                        proc.stderr.strip()[-500:])
            return None
        part = Path(tmp) / "plugin.jar"
        with zipfile.ZipFile(part, "w") as jar:
            # also a Java agent: executors start at a lower CPU priority (see the plugin's docs)
            jar.writestr("META-INF/MANIFEST.MF", f"Manifest-Version: 1.0\nPremain-Class: {AGENT_CLASS}\n")
            for f in sorted(classes.rglob("*.class")):
                jar.write(f, f.relative_to(classes).as_posix())
        os.replace(part, PLUGIN_JAR)  # atomic: drivers starting together each see a whole jar
    return PLUGIN_JAR


def plugin_conf() -> dict[str, str]:
    """Spark settings for drivers that resize live: the plugin (if it builds) and the FAIR pools."""
    conf = {"spark.scheduler.mode": "FAIR", "spark.scheduler.allocation.file": str(POOL_FILE)}
    jar = plugin_jar()
    if jar is not None:
        conf.update({
            "spark.plugins": PLUGIN_CLASS,
            "spark.driver.extraClassPath": str(jar),
            "spark.executor.extraClassPath": str(jar),
            # new executors start and warm up on the CPU the running query leaves free
            "spark.executor.extraJavaOptions": f"-javaagent:{jar}={WARMUP_NICE}",
            "spark.streamops.warmup.holdMs": str(HOLD_MS),
        })
    return conf
