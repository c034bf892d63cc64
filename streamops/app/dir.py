"""One owner of an app's directory (``<state_dir>/apps/<app>``): its files, their formats and the
one way they are written.

The driver, the supervisor, the CLI and the Airflow tasks meet through these files: the driver's
pid and log, a pending live resize, its heartbeat and per-batch
progress, a standby's readiness and go signal, the supervisor's restart count for the app, a
reprocess's run file and the drivers' scratch checkpoints. Every JSON file is written whole and
atomically (temp file, fsync, rename), so a reader never sees half of one and a crash never leaves
one empty.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamops.host import process
from streamops.host.files import read_json, write_json

if TYPE_CHECKING:
    from streamops.settings import Settings
    from streamops.spec import AppSpec


#: a progress file rotates at this size: the two files hold 40-80 MiB, at about 950 bytes a batch
#: (its observed metrics and hottest keys included) 44,000-88,000 batches: at one batch every 0.5 s
#: (the default trigger, under steady input), 6 to 12 hours of history per app (the Streams
#: view's charts; docs/operations.md, "Files and rotation")
PROGRESS_MAX_BYTES = 40 * 1024 * 1024


class AppDir:
    """An app's directory and the names of its files (see module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def of(cls, settings: Settings, app: str) -> AppDir:
        return cls(settings.state_dir / "apps" / app)

    @property
    def app(self) -> str:
        return self.root.name

    # the files --------------------------------------------------------------------------------
    @property
    def pid(self) -> Path:
        """The driver's pid record (``host.process``)."""
        return self.root / "driver.pid"

    @property
    def standby_pid(self) -> Path:
        return self.root / "standby.pid"

    @property
    def log(self) -> Path:
        return self.root / "driver.log"

    @property
    def control(self) -> Path:
        """``{"parallelism", "requested_at"}``: a live resize the running driver has yet to apply."""
        return self.root / "control.json"

    @property
    def heartbeat(self) -> Path:
        """The driver's heartbeat: status, last batch, ``heartbeat_ms``."""
        return self.root / "driver.json"

    @property
    def progress(self) -> Path:
        """One JSON line per micro-batch (rates, durations, offsets, state size); rotated at
        ``PROGRESS_MAX_BYTES`` into ``batches.jsonl.1`` (``append_progress``)."""
        return self.root / "batches.jsonl"

    def progress_files(self) -> list[Path]:
        """The progress files, oldest first (the rotated one, then the current one)."""
        return [p for p in (self.progress.with_name(self.progress.name + ".1"), self.progress) if p.exists()]

    @property
    def standby_ready(self) -> Path:
        """``{"pid", "ready_at"}``: a standby driver has its SparkContext and waits."""
        return self.root / "standby.json"

    @property
    def standby_go(self) -> Path:
        """Present: the standby is promoted."""
        return self.root / "standby.go"

    @property
    def restarts(self) -> Path:
        """The supervisor's restart count and backoff for this app (a restarted supervisor goes on)."""
        return self.root / "restarts.json"

    @property
    def alerts(self) -> Path:
        """``{alert key: firing since}``: what the app's watch has alerted on (``observe.alerts``)."""
        return self.root / "alerts.json"

    @property
    def dlq_cursor(self) -> Path:
        """``{"offsets": {partition: next offset}}``: where the DLQ summary stopped (``observe.dlq``)."""
        return self.root / "dlq-cursor.json"

    @property
    def batch_events(self) -> Path:
        """``{"batch_id", "at_ms"}``: the last batch the output asset's watcher announced
        (``observe.events``)."""
        return self.root / "batch-events.json"

    @property
    def reprocess_run(self) -> Path:
        """The range and output version of a reprocess driver (``--reprocess FILE``)."""
        return self.root / "reprocess.json"

    @property
    def spec(self) -> Path:
        """The app's spec as its last deploy applied it (``lifecycle.specs``): the fields a driver
        reads at its start stay as they were until the next deploy of the stopped app."""
        return self.root / "spec.json"

    def scratch(self, name: str) -> Path:
        """A driver's scratch checkpoint (standby rehearsal, executor warm-up), removed after use."""
        return self.root / name

    # reading and writing ----------------------------------------------------------------------
    def read(self, path: Path) -> dict[str, Any] | None:
        data = read_json(path)
        return data if isinstance(data, dict) else None

    def write(self, path: Path, payload: dict[str, Any]) -> None:
        write_json(path, payload)

    def tail_progress(self, max_bytes: int = 512 * 1024) -> list[dict[str, Any]]:
        """The newest lines of the progress files, about ``max_bytes`` of them, oldest first."""
        import json

        chunks: list[bytes] = []
        left = max_bytes
        for path in reversed(self.progress_files()):
            try:
                with open(path, "rb") as f:
                    f.seek(0, 2)
                    size = f.tell()
                    f.seek(max(0, size - left))
                    data = f.read()
            except FileNotFoundError:
                continue
            if size > left:  # started mid-line
                data = data.split(b"\n", 1)[1] if b"\n" in data else b""
            chunks.insert(0, data)
            left -= len(data)
            if left <= 0:
                break
        out = []
        for raw in b"\n".join(chunks).splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                out.append(line)
        return out

    def last_progress(self) -> dict[str, Any] | None:
        """The newest line of the progress file (read from its end)."""
        import json

        try:
            with open(self.progress, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 65536))
                lines = f.read().splitlines()
        except FileNotFoundError:
            return None
        for raw in reversed(lines):
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                return line
        return None

    def append_progress(self, line: dict[str, Any], max_bytes: int | None = None) -> None:
        """Append one batch's line; once the file passes ``max_bytes`` it becomes ``batches.jsonl.1``
        (replacing the one before), so the history kept is between one and two files' worth."""
        import json

        path = self.progress
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(json.dumps(line, default=str) + "\n")
            size = f.tell()
        if size >= (PROGRESS_MAX_BYTES if max_bytes is None else max_bytes):
            path.replace(path.with_name(path.name + ".1"))

    def pinned_spec(self) -> AppSpec | None:
        """The spec the app's last deploy applied (None: never deployed, or deployed before pins)."""
        from streamops.specfile import spec_from_json

        return spec_from_json(self.read(self.spec))

    def pin_spec(self, spec: AppSpec) -> None:
        from streamops.specfile import spec_to_json

        self.write(self.spec, spec_to_json(spec))

    # the processes its pid files name ---------------------------------------------------------
    def driver(self) -> process.PidRecord | None:
        rec = process.read_pid(self.pid)
        return rec if rec is not None and rec.alive else None

    def stop_driver(self, *, now: bool = False, timeout: float = 120.0) -> bool:
        """Stop the driver: graceful (SIGTERM to the Python driver, bounded wait) or ``now``
        (SIGKILL). True if it was running. Whatever outlives the wait is killed, the JVM included."""
        rec = process.read_pid(self.pid)
        if rec is None or not rec.alive:
            self.pid.unlink(missing_ok=True)
            return False
        if not now:
            leader = rec.process()
            if leader is not None:
                leader.send_signal(signal.SIGTERM)
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline and rec.alive:
                    process._reap([leader])
                    time.sleep(0.2)
        process.terminate(rec, timeout=0 if now else 10)
        self.pid.unlink(missing_ok=True)
        return True

    def clear_standby(self) -> bool:
        """Kill a standby that was never promoted and forget it (True if one was running)."""
        rec = process.read_pid(self.standby_pid)
        for path in (self.standby_ready, self.standby_go, self.standby_pid):
            path.unlink(missing_ok=True)
        if rec is not None and rec.alive:
            process.terminate(rec, timeout=10)
            return True
        return False
