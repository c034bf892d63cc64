"""Process tracking with real (tiny) processes: trees, ignored SIGTERM, recycled pids."""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
from pathlib import Path

import psutil

from streamops.host.process import PidRecord, kill, port_in_use, read_pid, shown, spawn, tail, terminate


def _env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin"}


def _wait_for_output_line(log: Path, line: str, timeout: float = 30) -> None:
    """Wait until the process itself printed ``line``.

    Not a substring of the whole log: ``spawn`` starts the log with a header that repeats the
    argv, so ``"ready" in tail(log)`` held before bash ran anything. Under load SIGTERM then
    reached bash before its ``trap '' TERM`` and killed it, and ``terminate`` rightly reported
    that nothing had to be SIGKILLed (the fresh-clone flake of this test)."""
    deadline = time.time() + timeout  # under load bash can take seconds to get there
    while line not in tail(log).splitlines() and time.time() < deadline:
        time.sleep(0.05)
    assert line in tail(log).splitlines(), f"the process never printed {line!r}: {tail(log)!r}"


def test_terminate_stops_the_whole_tree(tmp_path: Path) -> None:
    rec = spawn(["bash", "-c", "sleep 300 & sleep 300 & echo started; wait"], env=_env(),
                log_path=tmp_path / "a.log", pid_path=tmp_path / "a.pid")
    _wait_for_output_line(tmp_path / "a.log", "started")
    deadline = time.time() + 30  # both sleeps forked; under load their exec may still be under way
    while len(children := psutil.Process(rec.pid).children(recursive=True)) < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert len(children) == 2
    assert read_pid(tmp_path / "a.pid") == rec and rec.alive
    killed = terminate(rec, timeout=5)
    assert killed is False  # SIGTERM was enough
    assert not rec.alive
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)


def test_terminate_escalates_to_sigkill(tmp_path: Path) -> None:
    rec = spawn(["bash", "-c", "trap '' TERM; echo ready; while true; do sleep 0.1; done"], env=_env(),
                log_path=tmp_path / "b.log", pid_path=tmp_path / "b.pid")
    _wait_for_output_line(tmp_path / "b.log", "ready")  # printed after the trap is set
    t0 = time.monotonic()
    assert terminate(rec, timeout=1.0) is True
    assert time.monotonic() - t0 < 8
    assert not rec.alive


def test_recycled_pid_is_not_ours(tmp_path: Path) -> None:
    me = psutil.Process()
    stale = PidRecord(me.pid, me.pid, me.create_time() - 1000, time.time(), ["x"])
    assert not stale.alive
    assert terminate(stale) is False  # never signals a stranger
    assert me.is_running()


def test_identity_uses_start_ticks_not_the_wall_clock() -> None:
    from streamops.host.process import start_ticks

    me = psutil.Process()
    ticks = start_ticks(me.pid)
    assert ticks is not None
    # the wall clock was stepped by 100 s since the record was written: still our process
    assert PidRecord(me.pid, me.pid, me.create_time() + 100, time.time(), ["x"], ticks).alive
    # same pid and create time but another start: a recycled pid, not ours
    assert not PidRecord(me.pid, me.pid, me.create_time(), time.time(), ["x"], ticks + 1).alive


def test_read_pid_tolerates_garbage(tmp_path: Path) -> None:
    (tmp_path / "x.pid").write_text("not json")
    assert read_pid(tmp_path / "x.pid") is None
    assert read_pid(tmp_path / "missing.pid") is None
    (tmp_path / "y.pid").write_text(json.dumps({"pid": 1}))
    assert read_pid(tmp_path / "y.pid") is None


def test_port_in_use_sees_listeners_only() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.listen()
        assert port_in_use("127.0.0.1", port)
    assert not port_in_use("127.0.0.1", port)


#: a process whose main thread exits on its own (the ``exit`` system call, not ``exit_group``) while
#: another thread goes on holding a listening socket: its leader is a zombie, the process is not
_LEADER_EXITS_FIRST = """
import ctypes, socket, sys, threading, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
threading.Thread(target=time.sleep, args=(3600,)).start()
print(s.getsockname()[1], flush=True)
ctypes.CDLL(None).syscall({"x86_64": 60, "aarch64": 93}[sys.argv[1]], 0)
"""


def test_a_process_whose_leader_thread_exited_first_is_running_until_its_last_thread_ends(tmp_path: Path) -> None:
    """A SIGKILLed JVM's leader thread turns zombie before its other threads have exited and closed
    its sockets: taken for gone, the broker's crash test restarted it onto its own port, still in
    use (a CI failure). Here the leader exits first on purpose and the other thread stays."""
    log = tmp_path / "z.log"
    rec = spawn([sys.executable, "-c", _LEADER_EXITS_FIRST, platform.machine()], env=_env(),
                log_path=log, pid_path=tmp_path / "z.pid")
    deadline = time.time() + 30
    while not (lines := [x for x in tail(log).splitlines() if x.isdigit()]) and time.time() < deadline:
        time.sleep(0.05)
    port = int(lines[0])
    while psutil.Process(rec.pid).status() != psutil.STATUS_ZOMBIE and time.time() < deadline:
        time.sleep(0.05)
    assert psutil.Process(rec.pid).status() == psutil.STATUS_ZOMBIE  # the leader thread is gone
    assert port_in_use("127.0.0.1", port)
    assert rec.alive
    assert kill(rec) is True
    assert not rec.alive
    assert not port_in_use("127.0.0.1", port)


def test_tail_returns_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert tail(log, 3).splitlines() == ["line 97", "line 98", "line 99"]
    assert "no log" in tail(tmp_path / "nope.log")


def _until_sleeping(pid: int, timeout: float = 30.0) -> None:
    """Until ``bash -c "trap '' TERM; sleep ..."`` reached its sleep (exec'd in place or a child)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = psutil.Process(pid)
        if p.name() == "sleep" or any(c.name() == "sleep" for c in p.children()):
            return
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} never reached its sleep")


def test_a_tracked_process_is_known_by_its_start_ticks_not_psutils_create_time(tmp_path: Path) -> None:
    from streamops.host.process import Tracked, start_ticks

    rec = spawn(["bash", "-c", "trap '' TERM; sleep 300"], env=_env(),
                log_path=tmp_path / "c.log", pid_path=tmp_path / "c.pid")
    _until_sleeping(rec.pid)  # TERM is ignored only once bash ran the trap (a full run's load delayed it)
    me = Tracked.of(rec.pid)
    assert me.ticks == start_ticks(rec.pid) == rec.ticks and me.running()
    assert not Tracked(rec.pid, me.ticks + 1).running()  # same pid, another start: a recycled pid
    # psutil's identity check fails when its create time drifts (a clock adjustment): it then says
    # "not running" and refuses signals, while the process is alive; terminate must not care
    drifted = psutil.Process(rec.pid)
    if hasattr(drifted, "_ident"):  # psutil's private identity (pid, create time), as of psutil 7
        drifted._ident = (rec.pid, drifted.create_time() - 2.0)
        assert drifted.is_running() is False
    assert me.running()
    assert terminate(rec, timeout=0.5) is True  # TERM ignored: killed
    assert not me.running() and not rec.alive


def test_a_stale_record_never_signals_the_new_owner_of_its_pid_and_group(tmp_path: Path) -> None:
    """A pid file outlives its process; pid and group id come back as a stranger's (here: a new
    session leader with that pid, the way a recycled pid looks)."""
    rec = spawn(["bash", "-c", "trap '' TERM; sleep 300"], env=_env(),
                log_path=tmp_path / "d.log", pid_path=tmp_path / "d.pid")
    stale = PidRecord(rec.pid, rec.pgid, rec.create_time - 1000, rec.started_at - 1000, ["old"],
                      rec.ticks - 100_000)
    assert not stale.alive
    assert terminate(stale, timeout=0) is False
    time.sleep(0.3)
    assert rec.alive  # the stranger (and its group) untouched
    assert terminate(rec, timeout=0.5) is True and not rec.alive


def test_log_header_does_not_count_as_the_process_output(tmp_path: Path) -> None:
    """The regression behind the SIGKILL test's flake: a bash slow to reach its trap (as under
    load) must not be seen as ready because ``spawn``'s header repeats its argv."""
    rec = spawn(["bash", "-c", "sleep 1; trap '' TERM; echo ready; while true; do sleep 0.1; done"],
                env=_env(), log_path=tmp_path / "c.log", pid_path=tmp_path / "c.pid")
    assert "echo ready" in tail(tmp_path / "c.log")  # the header names the argv ...
    assert "ready" not in tail(tmp_path / "c.log").splitlines()  # ... but is no output line
    _wait_for_output_line(tmp_path / "c.log", "ready")
    assert terminate(rec, timeout=1.0) is True  # the trap was set: TERM ignored, SIGKILL needed
    assert not rec.alive


def test_secret_system_properties_are_masked_in_the_log_and_pid_file(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "pass", "-Djavax.net.ssl.keyStorePassword=hunter2", "-Dapi.TOKEN=t0k",
            "-Dplain=visible"]
    assert shown(argv)[3:] == ["-Djavax.net.ssl.keyStorePassword=******", "-Dapi.TOKEN=******", "-Dplain=visible"]
    rec = spawn(argv, env=os.environ, log_path=tmp_path / "x.log", pid_path=tmp_path / "x.pid")
    terminate(rec, timeout=10)
    for f in ("x.log", "x.pid"):
        text = (tmp_path / f).read_text()
        assert "hunter2" not in text and "t0k" not in text and "-Dplain=visible" in text
