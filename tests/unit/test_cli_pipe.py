"""``streamops ... | head``: a reader that closes the pipe early ends the command quietly (exit 141,
128 + SIGPIPE, like ``cat``), never with a BrokenPipeError traceback."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent / "streamops"
CLI = [str(BIN)] if BIN.exists() else [sys.executable, "-m", "streamops.cli"]


def _closed_pipe_run(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run with stdout on a pipe whose reading end is already closed: every write fails (EPIPE),
    deterministically, whatever the output's size."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(CLI + args, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write)


@pytest.mark.parametrize("args, code", [
    (["version"], 141), (["version", "--json"], 141),
    (["--help"], 0), (["savepoint", "--help"], 0),  # argparse itself ignores a failed write of its help
])
def test_a_closed_pipe_ends_the_command_without_a_traceback(args: list[str], code: int) -> None:
    r = _closed_pipe_run(args)
    assert r.returncode == code, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr and "Exception ignored" not in r.stderr, \
        r.stderr


def test_piped_into_a_reader_that_leaves() -> None:
    """The way it is met, in a shell: the reader (here ``true``, which reads nothing) is gone before
    streamops has imported and written; with pipefail the pipeline reports streamops' 141."""
    r = subprocess.run(["bash", "-c", f"set -o pipefail; {shlex.join(CLI + ['version'])} | true; echo rc=$?"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.stdout.strip() == "rc=141", (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr[-2000:]
    r = subprocess.run(["bash", "-c", f"{shlex.join(CLI + ['--help'])} | head -1"], capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.stdout.startswith("usage: streamops") and r.stderr == "", (r.stdout, r.stderr)
