"""Errors of the embedded platform (broker, Spark, Airflow processes)."""

from __future__ import annotations

from streamops.host.exceptions import JavaMissingError, PlatformError

__all__ = ["ComponentStartError", "JavaMissingError", "PlatformError", "PortInUseError"]


class PortInUseError(PlatformError):
    """A port a component needs is taken by a process streamops did not start.

    Operator action: stop that process or set the environment variable named in the message.
    """


class ComponentStartError(PlatformError):
    """A component exited or did not become healthy in time during ``platform up``.

    Operator action: read the log lines in the message (full log path included); everything
    this ``up`` started has been stopped again.
    """


class KafkaStorageError(PlatformError):
    """The embedded broker's storage folder is not one it can start on.

    Operator action: the message names the folder. Move it aside (its topics are then gone: the
    platform starts with an empty broker) or restore it from a copy, and run ``platform up`` again.
    """
