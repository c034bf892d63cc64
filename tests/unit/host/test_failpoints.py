"""Failpoints fire only when armed, and say what fired."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streamops.host import failpoints


def test_unarmed_failpoints_do_nothing(monkeypatch) -> None:
    monkeypatch.delenv(failpoints.ENV, raising=False)
    failpoints.hit("reset.rewind")
    monkeypatch.setenv(failpoints.ENV, "restore.rewind=raise")
    failpoints.hit("reset.rewind")  # another one is armed


def test_raise_and_kill(monkeypatch) -> None:
    monkeypatch.setenv(failpoints.ENV, "reset.rewind=raise, undo.install=kill")
    assert failpoints.armed() == {"reset.rewind": "raise", "undo.install": "kill"}
    with pytest.raises(failpoints.FailpointError, match="failpoint reset.rewind fired"):
        failpoints.hit("reset.rewind")
    r = subprocess.run([sys.executable, "-c", ("from streamops.host import failpoints as f; "
                                               "f.hit('undo.install'); print('survived')")],
                       capture_output=True, text=True, check=False)
    assert r.returncode == -9 and "survived" not in r.stdout


def test_an_unknown_action_is_an_error() -> None:
    with pytest.raises(failpoints.FailpointError, match="must be one of raise, once, kill"):
        failpoints.armed("reset.rewind=explode")


def test_once_raises_the_first_time_only(monkeypatch) -> None:
    """A fault a retry gets past (the driver's sink failing after its commit, then restarting)."""
    monkeypatch.setenv(failpoints.ENV, "sink.committed=once")
    monkeypatch.setattr(failpoints, "_fired", set())
    with pytest.raises(failpoints.FailpointError, match="failpoint sink.committed fired"):
        failpoints.hit("sink.committed")
    failpoints.hit("sink.committed")
    failpoints.hit("sink.committed")
