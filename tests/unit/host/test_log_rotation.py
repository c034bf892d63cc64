"""``process.rotate_log``: a log a running process appends to (as ``spawn`` opens it, O_APPEND)
is bounded: past the limit its content moves to ``.1`` and the writer goes on in the emptied file."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamops.host.process import rotate_log

pytestmark = pytest.mark.unit

WRITER = """
import sys, time
for i in range(400):
    print(f"line {i:04d} " + "x" * 90, flush=True)
    time.sleep(0.005)
"""


def test_a_running_writers_log_is_bounded_and_goes_on(tmp_path: Path) -> None:
    log = tmp_path / "driver.log"
    with open(log, "ab") as out:  # as process.spawn opens it
        proc = subprocess.Popen([sys.executable, "-c", WRITER], stdout=out, stderr=subprocess.STDOUT)
    rotations = 0
    while proc.poll() is None:
        rotations += rotate_log(log, 8_000)
        time.sleep(0.05)
    rotations += rotate_log(log, 8_000)
    assert proc.returncode == 0 and rotations >= 3
    assert log.stat().st_size <= 8_000 + 2_000 and log.with_name("driver.log.1").stat().st_size > 8_000
    rotated, current = log.with_name("driver.log.1").read_text().splitlines(), log.read_text().splitlines()
    whole = re.compile(r"line (\d{4}) x{90}")
    if rotated and not whole.fullmatch(rotated[-1]):
        # the copy can end inside a line being written (a write that crosses a page is seen in two
        # steps); the truncation waits for that write and takes the line's rest: one cut line at most
        rotated = rotated[:-1]
    kept = rotated + current
    assert all(whole.fullmatch(ln) for ln in kept), [ln for ln in kept if not whole.fullmatch(ln)]
    numbers = [int(whole.fullmatch(ln).group(1)) for ln in kept]
    assert numbers == sorted(numbers) and numbers[-1] == 399  # in order, the newest kept
    assert "\x00" not in log.read_text()  # no hole: the writer appends at the new end
    assert rotate_log(tmp_path / "nothing.log", 10) is False
