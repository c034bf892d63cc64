"""Root of every error streamops raises on purpose.

Each subclass carries an "Operator action" line in its docstring: what the user should do.
The CLI prints ``str(error)`` and exits 1; usage errors exit 2.
"""

from __future__ import annotations


class StreamopsError(Exception):
    """Base class: an expected failure with a message meant for the operator."""

    exit_code = 1


class UsageError(StreamopsError):
    """The command line or parameters are invalid.

    Operator action: fix the arguments shown in the message; nothing was changed.
    """

    exit_code = 2


class ConfigError(StreamopsError):
    """A setting (environment variable, spec field) has an invalid value.

    Operator action: correct the named setting and rerun.
    """

    exit_code = 2
