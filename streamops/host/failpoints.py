"""Failpoints: named places where a test or the chaos benchmark makes an operation fail half way.

As TiKV's ``fail`` points and FoundationDB's buggify: off unless the ``STREAMOPS_FAILPOINTS``
environment variable names them, e.g. ``reset.rewind=kill,restore.restart=raise``. ``raise`` raises
``FailpointError`` there (an operation that fails); ``once`` raises it the first time only (in this
process: a fault that a retry gets past); ``kill`` sends SIGKILL to this process (a holder killed by
an operator, the OOM killer or Airflow), which no ``finally`` survives.
"""

from __future__ import annotations

import os
import signal

from streamops.exceptions import StreamopsError

ENV = "STREAMOPS_FAILPOINTS"
ACTIONS = ("raise", "once", "kill")
#: failpoints with ``once`` that fired in this process
_fired: set[str] = set()


class FailpointError(StreamopsError):
    """A failpoint set in ``STREAMOPS_FAILPOINTS`` fired (tests and the chaos benchmark only).

    Operator action: unset ``STREAMOPS_FAILPOINTS``; undo the half-done operation (``streamops undo OP``).
    """


def armed(env: str | None = None) -> dict[str, str]:
    """The failpoints set: {name: action}."""
    out: dict[str, str] = {}
    for item in (os.environ.get(ENV, "") if env is None else env).split(","):
        name, _, action = item.strip().partition("=")
        if name:
            if action not in ACTIONS:
                raise FailpointError(f"{ENV}: {item!r}: the action must be one of {', '.join(ACTIONS)}")
            out[name] = action
    return out


def hit(name: str) -> None:
    """Fire the failpoint ``name`` if it is armed."""
    if ENV not in os.environ:
        return
    action = armed().get(name)
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "once":
        if name in _fired:
            return
        _fired.add(name)
        action = "raise"
    if action == "raise":
        raise FailpointError(f"failpoint {name} fired ({ENV})")
