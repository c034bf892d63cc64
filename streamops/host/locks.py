"""Exclusive locks held for a process's lifetime (``flock``), with who holds them.

The kernel releases an ``flock`` when its holder exits, however it exits (kill -9 included), so
a crash never leaves a stale lock behind and nothing has to guess whether a holder is alive. The
lock file also records the holder (pid, host, what, since) for the refusal message.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamops.exceptions import StreamopsError


class LockHeld(StreamopsError):
    """Another process holds the lock (a second driver for the same checkpoint, a second supervisor).

    Operator action: stop the holder named in the message (it still runs), or wait for it to exit.
    """

    def __init__(self, message: str, holder: dict[str, Any]) -> None:
        super().__init__(message)
        self.holder = holder


@dataclass
class HeldLock:
    path: Path
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the last descriptor drops the flock
            self.fd = -1


def holder(path: Path) -> dict[str, Any]:
    """Who wrote the lock file last ({} if unknown); meaningful while the lock is held."""
    try:
        return json.loads(path.read_text() or "{}")
    except (FileNotFoundError, ValueError):
        return {}


def acquire(path: Path, what: str, *, wait_s: float = 0.0, refused: str = "") -> HeldLock:
    """Take the lock at ``path`` for this process, waiting up to ``wait_s``; ``LockHeld`` names
    the holder (``refused``: what to tell the operator) if it stays taken. The descriptor is not
    inherited by child processes (PEP 446), so a JVM we start never keeps it alive after us."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                who = holder(path)
                since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(who["since"])) if "since" in who else "?"
                held_as = f"as {who['what']}, " if who.get("what") not in (None, what) else ""
                raise LockHeld(f"{what} is in use by pid {who.get('pid', '?')} on {who.get('host', '?')} "
                               f"({held_as}since {since}; lock {path}). {refused}".rstrip(), who) from None
            time.sleep(0.2)
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "what": what,
                              "since": time.time()}).encode(), 0)
    return HeldLock(path, fd)
