"""The console of the local Spark sessions that streamops' commands start (``check``, ``verify``,
``compact``, ``rebuild-state``, ``app lint``): their output is the command's answer, so Spark's
start-up lines and warnings stay off the terminal and only its errors remain."""

from __future__ import annotations

from pathlib import Path

LOG4J2_CONFIG = Path(__file__).with_name("local_log4j2.properties")


def quiet_console_conf() -> dict[str, str]:
    """Spark settings for a local session: the driver's JVM reads our log4j2 file (errors only).

    With a file of its own, Spark also skips its "default log4j profile" and "default log level"
    banner. The JVM's own "Using incubator modules" line is printed before any logging starts.
    """
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}"}
