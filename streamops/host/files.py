"""The one way streamops writes a JSON state file: whole, atomically and durably.

A temp file beside the target, fsync'ed, then renamed over it: a reader sees the old file or the
new one, never half of one, and a crash right after the write does not leave an empty file. The
temp file is the writer's own (process and thread in its name): two threads writing one file at
once (a driver's batch and its progress listener both write its heartbeat) each rename their own,
where a shared name let one rename the other's and the second rename fail.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any


def write_json(path: Path, payload: Any) -> None:
    """``payload`` as ``path``, atomically and durably."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w") as f:
        json.dump(payload, f, default=str)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def read_json(path: Path) -> Any:
    """The file's JSON, or None when it is missing or unreadable (writes are atomic: only a file
    written by something else can be half there)."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def write_private(path: Path, text: str) -> None:
    """``text`` as ``path``, whole and readable only by this user (mode 0600 from the first byte):
    for files that hold a secret. Its folder, when made here, is the user's alone too."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o600)  # an existing temp file keeps its mode under O_CREAT
    tmp.replace(path)
