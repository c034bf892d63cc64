"""Find a Java runtime Spark 4 can use (17 or newer)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from streamops.host.exceptions import JavaMissingError

MIN_JAVA = 17
INSTALL_HINT = (
    "install Java 17 or newer (Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless; "
    "or run scripts/bootstrap.sh, which does it) or set JAVA_HOME to one"
)


def java_major(version_output: str) -> int | None:
    """Major version from ``java -version`` output ('1.8.0_x' -> 8, '17.0.15' -> 17)."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def find_java(environ: dict[str, str] | None = None) -> tuple[Path, int]:
    """Return (java binary, major version) or raise JavaMissingError saying what to install."""
    environ = dict(os.environ) if environ is None else environ
    java_home = environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if not candidate.exists():
            raise JavaMissingError(f"JAVA_HOME={java_home} has no bin/java; {INSTALL_HINT}")
    else:
        found = shutil.which("java", path=environ.get("PATH"))
        if not found:
            raise JavaMissingError(f"Java not found on PATH; {INSTALL_HINT}")
        candidate = Path(found)
    try:
        out = subprocess.run(
            [str(candidate), "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaMissingError(f"{candidate} -version failed ({exc}); {INSTALL_HINT}") from None
    major = java_major(out)
    if major is None:
        raise JavaMissingError(f"cannot tell the version of {candidate}; {INSTALL_HINT}")
    if major < MIN_JAVA:
        raise JavaMissingError(f"Java {major} at {candidate} is too old for Spark 4; {INSTALL_HINT}")
    return candidate, major


def java_home_of(java: Path) -> Path:
    return java.resolve().parent.parent
