"""The pinned Java jars the project resolves with Maven (``scripts/resolve-jars.sh``): Apache
Kafka for the embedded broker and its tools, Spark's own Kafka connector for every Spark session.

The pins live in ``include/maven/*.pom.xml`` and the checksums in ``include/maven/jars.sha256``;
``scripts/bootstrap.sh`` resolves them into ``.jars/<name>/`` of the checkout. Everything that needs
a jar asks here, so a missing or altered jar is one clear error naming the remedy. It also owns
``.jars/native/``: RocksDB's JNI library, unpacked once for every Spark JVM's library path.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from streamops.host.exceptions import PlatformError

KAFKA_BROKER = "kafka-broker"
SPARK_KAFKA = "spark-kafka"
#: overrides where the resolved jars are (a folder holding kafka-broker/ and spark-kafka/)
JARS_DIR_VAR = "STREAMOPS_JARS_DIR"
REMEDY = "run scripts/bootstrap.sh (it resolves them with mvn), or set STREAMOPS_JARS_DIR to a folder that has them"


class JarsError(PlatformError):
    """A pinned jar is missing or does not match its checksum.

    Operator action: run ``scripts/bootstrap.sh`` (it resolves the pinned jars with Maven and
    checks them against ``include/maven/jars.sha256``).
    """


def project_root() -> Path:
    return Path(__file__).resolve().parent.parent.parent


def jars_dir() -> Path:
    return Path(os.environ.get(JARS_DIR_VAR) or project_root() / ".jars")


def lock_file() -> Path:
    return project_root() / "include" / "maven" / "jars.sha256"


def pinned(group: str) -> list[tuple[str, str]]:
    """(sha256, file name) of each jar the lock pins for ``group``."""
    out = []
    for line in lock_file().read_text().splitlines():
        digest, _, rel = line.strip().partition("  ")
        name, _, jar = rel.partition("/")
        if name == group and jar:
            out.append((digest, jar))
    return out


def jars(group: str) -> list[Path]:
    """The group's jars, all present (``JarsError`` otherwise)."""
    folder = jars_dir() / group
    want = pinned(group)
    missing = [jar for _d, jar in want if not (folder / jar).is_file()]
    if not want or missing:
        what = f"{len(missing)} of {len(want)} jars ({', '.join(missing[:3])}...)" if missing else "its jars"
        raise JarsError(f"{group}: {what} missing from {folder}; {REMEDY}")
    return [folder / jar for _d, jar in want]


def classpath(group: str) -> str:
    return os.pathsep.join(str(p) for p in jars(group))


def verify(group: str) -> None:
    """Check each of the group's jars against its pinned sha256 (``JarsError`` naming the first
    that differs): a tampered, truncated or hand-replaced jar never reaches a JVM of ours."""
    folder = jars_dir() / group
    jars(group)
    for digest, jar in pinned(group):
        h = hashlib.sha256()
        with open(folder / jar, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        if h.hexdigest() != digest:
            raise JarsError(f"{folder / jar} does not match its checksum in {lock_file()} (sha256 "
                            f"{h.hexdigest()[:16]}..., pinned {digest[:16]}...); remove {folder} and {REMEDY}")


def spark_conf() -> dict[str, str]:
    """``spark.jars`` for Spark's own Kafka connector: on the driver's and every executor's classpath
    (the driver JVM gets it at launch, as ``--conf`` of spark-submit; executors fetch it from the driver).
    Nothing where Spark's own jars already hold the connector (the Docker image puts it there)."""
    native = rocksdb_library_conf()
    if connector_in_spark_jars():
        return native
    return {"spark.jars": ",".join(str(p) for p in jars(SPARK_KAFKA)), **native}


#: the RocksDB JNI library's name in the rocksdbjni jar, by machine (glibc Linux)
ROCKSDB_JNI = {"x86_64": "librocksdbjni-linux64.so", "aarch64": "librocksdbjni-linux-aarch64.so"}


def rocksdb_library_conf() -> dict[str, str]:
    """``spark.{driver,executor}.extraLibraryPath`` at a folder holding RocksDB's JNI library,
    unpacked once from PySpark's rocksdbjni jar.

    Why: RocksDB loads its library from the library path if it is there, and otherwise unpacks
    the 14.7 MB file from its jar into /tmp in every JVM that opens a state store, to be deleted
    at the JVM's exit; a driver or executor that is killed (SIGKILL, the OOM killer, a crash) leaves
    its copy behind for good. Nothing (RocksDB unpacks as before) where the folder cannot be made."""
    folder = rocksdb_library_dir()
    if folder is None:
        return {}
    return {"spark.driver.extraLibraryPath": str(folder), "spark.executor.extraLibraryPath": str(folder)}


def rocksdb_library_dir() -> Path | None:
    import platform
    import zipfile

    name = ROCKSDB_JNI.get(platform.machine())
    jar = next(iter(_pyspark_jars("rocksdbjni-*.jar")), None)
    if name is None or jar is None:
        return None
    folder = jars_dir() / "native" / jar.stem
    if (folder / name).is_file():
        return folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(jar) as z, z.open(name) as src:
            tmp = folder / f".{name}.{os.getpid()}"
            with open(tmp, "wb") as out:
                while block := src.read(1 << 20):
                    out.write(block)
        tmp.replace(folder / name)  # atomic: a JVM never maps a half-written library
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    return folder


def _pyspark_jars(pattern: str) -> list[Path]:
    import importlib.util

    found = importlib.util.find_spec("pyspark")
    if found is None or not found.submodule_search_locations:
        return []
    return sorted(p for loc in found.submodule_search_locations for p in (Path(loc) / "jars").glob(pattern))


def connector_in_spark_jars() -> bool:
    return bool(_pyspark_jars("spark-sql-kafka-0-10_*.jar"))
