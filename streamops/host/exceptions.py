"""Errors of this machine's processes and tools (Java, the pinned jars, process tracking)."""

from __future__ import annotations

from streamops.exceptions import StreamopsError


class PlatformError(StreamopsError):
    """Something about the platform's processes or the tools they need went wrong."""


class JavaMissingError(PlatformError):
    """No usable Java runtime was found.

    Operator action: install Java 17 or newer (Debian: ``apt-get install openjdk-17-jre-headless``)
    or point ``JAVA_HOME`` at one.
    """
