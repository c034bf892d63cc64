"""CLI contract: usage errors exit 2, operation errors exit 1 with a message, nothing started."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from streamops.cli import main

STREAMOPS = [sys.executable, "-m", "streamops.cli"]


@pytest.mark.parametrize(
    "argv",
    [
        ["no-such-command"],
        ["platform"],
        ["platform", "up", "--no-such-option"],
        ["platform", "up", "--only", "kafka,zookeeper"],
        ["platform", "down", "--timeout", "soon"],
        [],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "usage: streamops" in capsys.readouterr().err


def test_version_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["version"]


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).parent / "streamops"
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True).stdout
    assert "platform" in out


def test_invalid_setting_is_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "STREAMOPS_HOME": str(tmp_path), "STREAMOPS_KAFKA_PORT": "banana"}
    r = subprocess.run([*STREAMOPS, "platform", "status"], check=False, env=env, capture_output=True, text=True)
    assert r.returncode == 2
    assert "STREAMOPS_KAFKA_PORT" in r.stderr


def test_port_in_use_names_port_and_setting_and_starts_nothing(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        env = {**os.environ, "STREAMOPS_HOME": str(tmp_path), "STREAMOPS_KAFKA_PORT": str(port)}
        r = subprocess.run([*STREAMOPS, "platform", "up", "--only", "kafka"], check=False, env=env,
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert f"port {port}" in r.stderr and "STREAMOPS_KAFKA_PORT" in r.stderr
    assert f"pid {os.getpid()}" in r.stderr  # the owner is named
    assert not (tmp_path / "pids").exists() or not list((tmp_path / "pids").glob("*.pid"))


def test_missing_java_is_explained(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(STREAMOPS_HOME=str(tmp_path), PATH=str(tmp_path))
    r = subprocess.run([*STREAMOPS, "platform", "up"], check=False, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "Java" in r.stderr and "openjdk-17-jre-headless" in r.stderr


def test_platform_status_exits_1_when_components_are_down(tmp_path: Path) -> None:
    env = {**os.environ, "STREAMOPS_HOME": str(tmp_path)}
    r = subprocess.run([*STREAMOPS, "platform", "status", "--only", "kafka"], check=False, env=env, capture_output=True, text=True)
    assert r.returncode == 1, r.stdout
    assert "not running: kafka" in r.stdout and "streamops platform up" in r.stdout
    r = subprocess.run([*STREAMOPS, "platform", "status", "--json"], check=False, env=env, capture_output=True, text=True)
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["healthy"] is False
    assert set(out["down"]) == {c["name"] for c in out["components"]}


@pytest.mark.parametrize("command", ["check", "verify"])
def test_check_and_verify_exit_2_when_they_cannot_compare_with_the_error_as_json(tmp_path: Path, command: str) -> None:
    """Exit 1 is kept for "differences found" (as diff does); nothing committed is "could not run"."""
    env = {**os.environ, "STREAMOPS_HOME": str(tmp_path)}
    r = subprocess.run([*STREAMOPS, command, "user_activity", "--json"], check=False, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr[-2000:])
    err = json.loads(r.stdout)
    assert err["exit_code"] == 2 and err["kind"] == "CouldNotRun" and "could not run" in err["error"]
    assert "error: could not run" in r.stderr


def test_unknown_app_under_json_is_a_json_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "STREAMOPS_HOME": str(tmp_path)}
    r = subprocess.run([*STREAMOPS, "check", "no_such_app", "--json"], check=False, env=env, capture_output=True, text=True)
    assert r.returncode == 2
    err = json.loads(r.stdout)
    assert err["kind"] == "UsageError" and "unknown app 'no_such_app'" in err["error"]


def test_a_second_supervisor_for_the_same_state_dir_is_refused(tmp_path: Path) -> None:
    """Two supervisors would launch and stop the same drivers against each other."""
    import time

    env = {**os.environ, "STREAMOPS_HOME": str(tmp_path)}
    first = subprocess.Popen([*STREAMOPS, "supervise", "--interval", "0.5"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not (tmp_path / "supervisor.json").exists():  # its first heartbeat: it holds the lock
            assert first.poll() is None and time.time() < deadline, "the first supervisor did not start"
            time.sleep(0.2)
        r = subprocess.run([*STREAMOPS, "supervise", "--once"], check=False, env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert f"in use by pid {first.pid}" in r.stderr and "Only one supervisor" in r.stderr
        assert first.poll() is None  # the first one goes on
    finally:
        first.terminate()
        first.wait(30)
    r = subprocess.run([*STREAMOPS, "supervise", "--once"], check=False, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr  # released with its holder


@pytest.mark.parametrize(("batch", "deployed", "stopped"), [
    (None, "running x2 (operation #7, no batch yet: nothing to read, 3.5 s)", "stopped before its first batch (operation #7, 3.5 s)"),
    (4, "running x2 (operation #7, batch 4, 3.5 s)", "stopped at batch 4 (operation #7, 3.5 s)"),
])
def test_deploy_and_stop_say_where_the_app_stands_also_before_its_first_batch(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], batch: int | None, deployed: str,
        stopped: str) -> None:
    """An app deployed before any input has committed no batch: "batch None" told a person nothing."""
    from types import SimpleNamespace

    from streamops.cli import apps

    out = SimpleNamespace(parallelism=2, operation_id=7, after={"batch": batch}, seconds=3.5)
    monkeypatch.setattr(apps, "run_operation", lambda *_a, **_k: (SimpleNamespace(name="app1"), out))
    assert apps.cmd_deploy(SimpleNamespace(parallelism=None, timeout=60, json=False)) == 0
    assert apps.cmd_stop(SimpleNamespace(now=False, timeout=60, json=False)) == 0
    assert capsys.readouterr().out.splitlines() == [f"app1: {deployed}", f"app1: {stopped}"]
