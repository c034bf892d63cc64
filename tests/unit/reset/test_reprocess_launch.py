"""A reprocess run's driver holds none of the launching task's standard streams."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from streamops.app.dir import AppDir
from streamops.app.outputs import reprocess_spec
from streamops.lifecycle import driver
from streamops.reset.reprocess import _launch
from streamops.settings import Settings
from streamops.spec import AppSpec


def test_the_driver_does_not_inherit_the_tasks_stdin_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow's task supervisor talks to the task over a socket on fd 0 and waits until every end of
    it closes. A driver that inherited it kept the deferred task's workload open until the run ended,
    and the executor's late event failed the resumed task (CI: all three backfill runs failed)."""
    settings = Settings(home=tmp_path)
    spec = AppSpec(name="ua", job="jobs.x", input_topics=("in",), output_topic="out", changelog_topic="cl",
                   dlq_topic="dlq")
    derived = reprocess_spec(spec, "v2")
    AppDir.of(settings, derived.name).root.mkdir(parents=True)
    probe = "import os; print('stdin ->', os.readlink('/proc/self/fd/0'))"
    monkeypatch.setattr(driver, "job_argv", lambda _spec: [sys.executable, "-c", probe])

    task_end, supervisor_end = socket.socketpair()  # fd 0 of an Airflow task
    saved = os.dup(0)
    os.dup2(task_end.fileno(), 0)
    try:
        proc = _launch(settings, spec, derived, tmp_path / "run.json", 1, None)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        task_end.close()
    try:
        assert proc.wait(30) == 0
        assert "stdin -> /dev/null" in AppDir.of(settings, derived.name).log.read_text()
        supervisor_end.settimeout(5)
        assert supervisor_end.recv(1) == b""  # every other end is closed: the supervisor sees the task end
    finally:
        supervisor_end.close()
