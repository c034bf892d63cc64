"""Detached child processes tracked by pid files, stopped with their whole process tree.

A pid file records pid, process-group id and the process's start time, so a recycled pid is
never mistaken for our process and ``down`` never signals a stranger.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import psutil

from streamops.host.files import write_json

_CHILDREN: dict[int, subprocess.Popen] = {}


class _ProcStat(NamedTuple):
    state: str  # the state letter ("Z": zombie)
    ticks: int  # start time in clock ticks since boot
    threads: int

    @property
    def exited(self) -> bool:
        """A zombie with no thread left: gone but for its exit status.

        A multi-threaded process's leader turns zombie as soon as its own thread exits, while the
        others may still be exiting and still hold the process's files: a SIGKILLed JVM looked
        gone while its listening socket was open, and the broker's restart found its port in use."""
        return self.state == "Z" and self.threads <= 1


def _stat(pid: int) -> _ProcStat | None:
    """``/proc/PID/stat``'s state, start ticks and threads; None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rindex(b")") + 2:].split()
        return _ProcStat(fields[0].decode(), int(fields[19]), int(fields[17]))
    except (OSError, ValueError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux ``/proc/PID/stat`` field 22).

    Unlike a wall-clock create time it does not move when the system clock is stepped or slewed
    (psutil derives create times from the current boot time, which does), so it identifies a
    process exactly.
    """
    st = _stat(pid)
    return st.ticks if st else None


_HAVE_PROC = Path("/proc/self/stat").exists()


@dataclass(frozen=True)
class Tracked:
    """A process we may signal, identified by pid and start ticks.

    Not a long-held ``psutil.Process``: psutil's identity is (pid, create time derived from the
    boot time); when the clock is adjusted the same process looks "reused", psutil then reports
    it gone and refuses to signal it, and a terminate would leave it running.
    """

    pid: int
    ticks: int | None

    @classmethod
    def of(cls, pid: int) -> Tracked:
        return cls(pid, start_ticks(pid))

    def running(self) -> bool:
        if not _HAVE_PROC:  # no /proc: psutil's view
            try:
                return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
            except psutil.Error:
                return False
        st = _stat(self.pid)
        return st is not None and not st.exited and (self.ticks is None or st.ticks == self.ticks)

    def signal(self, sig: int) -> None:
        if self.running():
            try:
                os.kill(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


@dataclass(frozen=True)
class PidRecord:
    pid: int
    pgid: int
    create_time: float
    started_at: float
    argv: list[str]
    ticks: int | None = None  # start_ticks(pid) when recorded (None: not on Linux / old record)

    def _same_start(self, proc: psutil.Process) -> bool:
        if self.ticks is not None:
            ticks = start_ticks(proc.pid)
            if ticks is not None:
                return ticks == self.ticks
        return abs(proc.create_time() - self.create_time) <= 1.0

    def process(self) -> psutil.Process | None:
        """The live process this record describes, or None (gone, zombie, or pid recycled)."""
        try:
            proc = psutil.Process(self.pid)
            if not self._same_start(proc):
                return None
            st = _stat(proc.pid) if _HAVE_PROC else None
            if st is not None:
                return None if st.exited else proc
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None

    @property
    def alive(self) -> bool:
        return self.process() is not None


def read_pid(path: Path) -> PidRecord | None:
    try:
        return PidRecord(**json.loads(path.read_text()))
    except (FileNotFoundError, ValueError, TypeError):
        return None


#: a ``-Dname=value`` whose name says it holds a secret (e.g. a keystore password in ``KAFKA_OPTS``)
_SECRET_PROPERTY = re.compile(r"^(-D[^=]*(?:password|secret|token|credential)[^=]*=).+$", re.IGNORECASE)


def shown(argv: Sequence[str]) -> list[str]:
    """``argv`` as logs and pid files may show it: secret-looking system properties masked."""
    return [_SECRET_PROPERTY.sub(r"\1******", a) for a in argv]


def rotate_log(path: Path, max_bytes: int) -> bool:
    """Bound a log a running process appends to: past ``max_bytes`` its content moves to
    ``path.1`` (the one before is dropped) and ``path`` is emptied in place, so the writer, which
    opened it with O_APPEND (``spawn``), goes on at its new end ("copytruncate", as logrotate's: a
    line written between the copy and the truncation is lost, and the copy can end inside a line
    being written, whose rest goes with the truncation). Returns whether it rotated."""
    try:
        if path.stat().st_size <= max_bytes:
            return False
    except FileNotFoundError:
        return False
    import shutil

    old = path.with_name(path.name + ".1")
    tmp = path.with_name(f".{path.name}.1.tmp")
    shutil.copyfile(path, tmp)
    tmp.replace(old)
    with open(path, "r+b") as f:
        f.truncate(0)
    return True


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log_path: Path,
    pid_path: Path,
    cwd: Path | None = None,
) -> PidRecord:
    """Start ``argv`` in its own session (so it outlives us and can be stopped as a group)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    pid_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(shown(argv))}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=str(cwd) if cwd else None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        create_time = psutil.Process(proc.pid).create_time()
    except psutil.NoSuchProcess:
        create_time = time.time()
    record = PidRecord(proc.pid, proc.pid, create_time, time.time(), shown(argv), start_ticks(proc.pid))
    write_json(pid_path, asdict(record))
    _CHILDREN[proc.pid] = proc  # kept so this process can reap it; others track it by pid file
    return record


def _tree(record: PidRecord) -> list[Tracked]:
    """The leader, its descendants, and anything still in its process group."""
    procs: dict[int, Tracked] = {}
    leader = record.process()
    if leader is not None:
        procs[leader.pid] = Tracked(leader.pid, record.ticks if record.ticks is not None else start_ticks(leader.pid))
        try:
            for child in leader.children(recursive=True):
                procs[child.pid] = Tracked.of(child.pid)
        except psutil.NoSuchProcess:
            pass
    if _group_recycled(record):  # the group id is now a stranger's pid: so is the group
        return [p for p in procs.values() if p.running()]
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == record.pgid and _started_after(proc, record):
                procs.setdefault(proc.pid, Tracked.of(proc.pid))
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return [p for p in procs.values() if p.running()]


def _group_recycled(record: PidRecord) -> bool:
    """Is the record's process-group id now the pid of another process?

    Linux does not hand out a pid that is still some group's id, so while any member of our
    group lives the id is ours; once a process with that pid but another start exists, the
    group with that id (if any) was made by a stranger, after ours died out.
    """
    if record.pgid != record.pid or record.ticks is None:
        return False
    holder = start_ticks(record.pgid)
    return holder is not None and holder != record.ticks


def _started_after(proc: psutil.Process, record: PidRecord) -> bool:
    """Started no earlier than the record's leader (so not an older process reusing the pgid)."""
    if record.ticks is not None:
        ticks = start_ticks(proc.pid)
        if ticks is not None:
            return ticks >= record.ticks
    return proc.create_time() >= record.create_time - 1


def _reap(procs: Iterable[Tracked | psutil.Process]) -> None:
    """Collect exit statuses of our own children so they do not linger as zombies."""
    for p in procs:
        child = _CHILDREN.get(p.pid)
        if child is not None and child.poll() is not None:
            del _CHILDREN[p.pid]
            continue
        try:
            os.waitpid(p.pid, os.WNOHANG)
        except (ChildProcessError, OSError):
            pass


def kill(record: PidRecord, timeout: float = 10.0) -> bool:
    """SIGKILL the whole tree at once, as a crash ends it, and reap it; True if something ran."""
    procs = _tree(record)
    if procs:
        _kill_and_reap(procs, timeout)
    return bool(procs)


def _kill_and_reap(procs: list[Tracked], timeout: float) -> None:
    for p in procs:
        p.signal(signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(procs)
        if not any(p.running() for p in procs):
            break
        time.sleep(0.05)


def terminate(record: PidRecord, timeout: float = 20.0) -> bool:
    """SIGTERM the whole tree, wait up to ``timeout``, then SIGKILL what is left.

    Returns True if something had to be killed.
    """
    procs = _tree(record)
    if not procs:
        return False
    for p in procs:
        p.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(procs)
        procs = [p for p in procs if p.running()] + [p for p in _tree(record) if p not in procs]
        if not procs:
            return False
        time.sleep(0.2)
    _kill_and_reap(procs, 5.0)
    return True


def port_in_use(host: str, port: int) -> bool:
    """True if something listens on (host, port); TIME_WAIT leftovers do not count."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def tail(path: Path, lines: int = 25) -> str:
    """Last ``lines`` lines of a log file (reads only the end of big files)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return f"(no log at {path})"
    return "\n".join(data.splitlines()[-lines:])
