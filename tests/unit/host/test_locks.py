"""Process-lifetime locks: a second holder is refused with the first named; a crash frees it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamops.host.locks import LockHeld, acquire, holder

HOLD = """
import sys, time
from pathlib import Path
from streamops.host.locks import acquire
lock = acquire(Path(sys.argv[1]), "the test checkpoint")
print("held", flush=True)
time.sleep(300)
"""


def _holder_process(path: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_holder_is_refused_and_told_who_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.lock"
    proc = _holder_process(path)
    try:
        t0 = time.monotonic()
        with pytest.raises(LockHeld) as exc:
            acquire(path, "user_activity's checkpoint", wait_s=0.5, refused="Stop it first.")
        assert time.monotonic() - t0 >= 0.5  # waited as asked
        msg = str(exc.value)
        assert f"pid {proc.pid}" in msg and "the test checkpoint" in msg and msg.endswith("Stop it first.")
        assert exc.value.holder["pid"] == proc.pid == holder(path)["pid"]
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.lock"
    proc = _holder_process(path)
    os.kill(proc.pid, signal.SIGKILL)  # no cleanup runs: the kernel drops the flock
    proc.wait()
    lock = acquire(path, "after the crash")
    assert holder(path)["pid"] == os.getpid() and holder(path)["what"] == "after the crash"
    lock.release()
    acquire(path, "again").release()  # released: free again


def test_a_child_process_does_not_inherit_the_lock(tmp_path: Path) -> None:
    """A driver's JVM (a child) must not keep the checkpoint locked after the driver exits."""
    path = tmp_path / "ckpt.lock"
    lock = acquire(path, "parent")
    child = subprocess.Popen(["sleep", "30"], close_fds=False)
    try:
        lock.release()
        acquire(path, "next driver", wait_s=2).release()
    finally:
        child.kill()
        child.wait()


def test_the_refusal_names_what_the_holder_took_it_for_only_when_it_differs(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.lock"
    proc = _holder_process(path)  # holds it as "the test checkpoint"
    try:
        with pytest.raises(LockHeld) as same:
            acquire(path, "the test checkpoint")
        assert str(same.value).count("the test checkpoint") == 1
        with pytest.raises(LockHeld) as other:
            acquire(path, "another view of it")
        assert "as the test checkpoint, since" in str(other.value)
    finally:
        proc.kill()
        proc.wait()
