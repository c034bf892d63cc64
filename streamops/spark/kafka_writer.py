"""A batch's records written by the tasks that hold them, each partition in its own Kafka
transaction (issue 39, item 3): ``write_transactional`` from inside ``foreachBatch``, through
``TransactionalKafkaSink`` (writer/TransactionalKafkaSink.java), a DataSource V2 batch write whose
producers live in the executors' JVMs (docs/architecture.md, "Where the per-task transactions can
live").

The jar is compiled here from its source against pyspark's jars and the Kafka client the connector
ships (``host.jars``), and must be on ``spark.jars`` beside them: the writer's classes and the
Kafka client's must come from the same class loader.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from streamops.kafka.config import KafkaConfig

log = logging.getLogger(__name__)

WRITER_SOURCE = Path(__file__).resolve().parent / "writer" / "TransactionalKafkaSink.java"
WRITER_JAR = WRITER_SOURCE.parent / "build" / "streamops-kafka-writer.jar"
FORMAT = "io.streamops.spark.TransactionalKafkaSink"


def writer_jar() -> Path | None:
    """The writer's jar, compiled from its source if missing or older (None without ``javac``)."""
    if WRITER_JAR.exists() and WRITER_JAR.stat().st_mtime >= WRITER_SOURCE.stat().st_mtime:
        return WRITER_JAR
    javac = shutil.which("javac")
    if javac is None:
        log.warning("no javac: no transactional writer on the executors")
        return None
    import pyspark

    from streamops.host.jars import SPARK_KAFKA, jars

    cp = os.pathsep.join([f"{Path(pyspark.__file__).resolve().parent / 'jars'}/*", *map(str, jars(SPARK_KAFKA))])
    WRITER_JAR.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=WRITER_JAR.parent) as tmp:
        classes = Path(tmp) / "classes"
        proc = subprocess.run([javac, "-nowarn", "-d", str(classes), "-cp", cp, str(WRITER_SOURCE)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"the transactional writer did not compile: {proc.stderr.strip()[-2000:]}")
        part = Path(tmp) / "writer.jar"
        with zipfile.ZipFile(part, "w") as jar:
            for f in sorted(classes.rglob("*.class")):
                jar.write(f, f.relative_to(classes).as_posix())
        os.replace(part, WRITER_JAR)
    return WRITER_JAR


def writer_conf(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` (the session's) with the executors' transactional writer's jar on ``spark.jars``,
    beside the connector's Kafka client (one class loader for both); unchanged without the jar
    (no ``javac``: the driver commits, ``driver.loop``)."""
    jar = writer_jar()
    if jar is None:
        return conf
    jars = [j for j in conf.get("spark.jars", "").split(",") if j]
    return {**conf, "spark.jars": ",".join([*jars, str(jar)])}


def write_transactional(df: Any, *, kafka: KafkaConfig, transactional_prefix: str, marker_topic: str,
                        marker_group_prefix: str, batch_id: int, timeout_s: float = 60.0) -> None:
    """Write ``df``'s rows (topic, key, value[, headers]) as Kafka records, each of its partitions in
    one transaction under ``{transactional_prefix}-p{partition}``, with batch ``batch_id`` committed
    as the offset of group ``{marker_group_prefix}-p{partition}`` on ``marker_topic``'s partition 0 in
    the same transaction; a partition whose group already holds ``batch_id`` or later writes nothing."""
    writer = (df.write.format(FORMAT).mode("append")
              .option("kafka.bootstrap.servers", kafka.bootstrap)
              .option("transactional.id.prefix", transactional_prefix)
              .option("marker.topic", marker_topic)
              .option("marker.group.prefix", marker_group_prefix)
              .option("batch.id", str(batch_id))
              .option("timeout.ms", str(int(timeout_s * 1000))))
    for k, v in kafka.spark_options().items():  # the client security, ``kafka.``-prefixed
        writer = writer.option(k, v)
    writer.save()
