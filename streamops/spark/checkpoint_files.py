"""How Spark writes a checkpoint's files on a local disk: ``plugin/LocalCheckpointFileManager.java``,
as the ``spark.sql.streaming.checkpointFileManagerClass`` of every app's session.

Why: Spark's default manager writes each checkpoint file through Hadoop's local file system,
which, without Hadoop's native library, runs a shell command per permission change and symbolic
link check: about 40 ms per file (measured: ``bench/checkpoint_files.py``), i.e. the offsets and
commit logs' ~80 ms per micro-batch on the driver and the state store's changelog file per state
partition and batch on the executors. The manager writes local files with java.nio (the same
temporary file and rename) and hands any other file system to Spark's own managers.

The class ships in the plugin jar (``warmup_plugin.plugin_jar``, compiled from ``plugin/*.java``);
the jar goes on the driver's and executors' class path, as the warm-up plugin's does, so an
executor must see the driver's file system (the embedded cluster does). Without ``javac`` there
is no jar and Spark's default manager is used.
"""

from __future__ import annotations

#: the manager's class, in the plugin jar
MANAGER_CLASS = "io.streamops.spark.LocalCheckpointFileManager"
#: the Spark setting naming it (read by Spark's ``CheckpointFileManager.create`` on the driver and executors)
MANAGER_SETTING = "spark.sql.streaming.checkpointFileManagerClass"


def checkpoint_files_conf() -> dict[str, str]:
    """Spark settings that make a session's checkpoint files go through the manager (none without the jar)."""
    from streamops.spark.warmup_plugin import plugin_jar

    jar = plugin_jar()
    if jar is None:
        return {}
    return {MANAGER_SETTING: MANAGER_CLASS, "spark.driver.extraClassPath": str(jar),
            "spark.executor.extraClassPath": str(jar)}
