"""The files an app's driver and its steerers signal through: a live resize request, a standby's flag."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from streamops.app import control
from streamops.app.dir import AppDir


@pytest.mark.parametrize("master,ok", [("spark://h:7077", True), ("k8s://https://api:6443", True),
                                       ("local[2]", False), ("yarn", False)])
def test_live_needs_a_master_that_adds_executors(master: str, ok: bool) -> None:
    assert control.supports_live(master) is ok


def test_request_round_trip_and_unreadable_files(tmp_path: Path) -> None:
    assert control.read_request(AppDir(tmp_path)) is None
    req = control.write_request(AppDir(tmp_path), 3)
    assert control.read_request(AppDir(tmp_path)) == req and req.parallelism == 3
    AppDir(tmp_path).control.write_text("{not json")
    assert control.read_request(AppDir(tmp_path)) is None
    AppDir(tmp_path).control.write_text(json.dumps({"parallelism": "x", "requested_at": 1}))
    assert control.read_request(AppDir(tmp_path)) is None


def test_the_standby_flag_is_read_once(monkeypatch) -> None:
    monkeypatch.setenv(control.STANDBY_ENV, "1")
    assert control.standby_requested() is True
    assert control.STANDBY_ENV not in os.environ  # the JVM and Python workers must not inherit it
    assert control.standby_requested() is False
