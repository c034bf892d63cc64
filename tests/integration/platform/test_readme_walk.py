"""The README's "Five minutes with the demo app", run as written on a fresh platform.

What ``make run`` leaves (broker, Spark cluster, supervisor, ``user_activity`` deployed), then
every command of the walk's code block in its order, through a shell from the checkout, exactly
as the README spells it (``SAVEPOINT_ID`` replaced by an id ``savepoints`` listed, as the README
says). Each must exit 0 and do what its comment promises.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

from streamops.kafka.admin import end_offsets
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.platform import manager
from tests.unit.test_docs import REPO, logical_lines, split_markdown

APP = "user_activity"


def walk() -> list[tuple[str, str]]:
    """(the comment above it, the command) for each line of the walk's block."""
    text = (REPO / "README.md").read_text().splitlines()
    heading = text.index("## Five minutes with the demo app") + 1
    blocks, _ = split_markdown(REPO / "README.md")
    block = next(b for b in blocks if b.first_line > heading and b.info == "bash")
    out, comment = [], ""
    for _no, line in logical_lines(block):
        if line.startswith("#"):
            comment = line.lstrip("# ")
        elif line.strip():
            out.append((comment, line))
    return out


def test_the_readme_walk_works_as_written(platform_factory) -> None:
    s = platform_factory("readme")
    manager.up(s, only=["kafka", "spark", "supervisor"])
    env = {**s.env(), "PATH": f"{REPO / '.venv' / 'bin'}:/usr/bin:/bin", "HOME": str(s.state_dir)}

    def sh(line: str, timeout: float = 600) -> subprocess.CompletedProcess:
        t0 = time.time()
        r = subprocess.run(["bash", "-c", line], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=timeout, check=False)
        print(f"{time.time() - t0:6.1f} s  rc {r.returncode}  {line}", flush=True)
        return r

    r = sh(f".venv/bin/streamops deploy {APP}")  # what `make run` does after `platform up`
    assert r.returncode == 0, r.stderr[-3000:]
    steps = walk()
    assert len(steps) >= 12 and steps[0][1].startswith(".venv/bin/streamops produce user-events"), steps
    ledger = Ledger.open(s.ledger_db_url)
    try:
        for comment, line in steps:
            if "SAVEPOINT_ID" in line:
                listed = json.loads(sh(f".venv/bin/streamops savepoints {APP} --json").stdout)
                line = line.replace("SAVEPOINT_ID", listed[0]["id"])
            ops_before = {o["id"] for o in ledger.operations(APP, limit=500)}
            r = sh(line)
            assert r.returncode == 0, f"{line}\n(# {comment})\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-3000:]}"
            new_ops = [o for o in ledger.operations(APP, limit=500) if o["id"] not in ops_before
                       and not o["kind"].startswith(("supervisor", "driver"))]
            words = line.split()
            verb = words[1]
            if verb == "produce":
                ends = end_offsets(s.kafka_bootstrap, "user-events")
                assert sum(hi for _lo, hi in ends.values()) == int(words[words.index("--events") + 1])
            elif verb == "status":
                assert re.search(rf"^{APP}: desired running x2, observed running x2", r.stdout, re.MULTILINE), r.stdout
            elif verb == "check":
                assert f"check {APP}: OK" in r.stdout, r.stdout
            elif verb == "stop":
                assert driver.running(s, APP) is None and "stopped at batch" in r.stdout
            elif verb in ("deploy", "resize"):
                n = int(words[words.index("--parallelism") + 1])
                assert ledger.observed(APP)["parallelism"] == n and f"x{n}" in r.stdout, r.stdout
                assert [o["kind"] for o in new_ops] == [verb] and new_ops[0]["outcome"] == "succeeded"
            elif "--dry-run" in words:  # a plan: nothing was done
                assert new_ops == [], new_ops
                assert r.stdout.strip(), "a dry run prints its plan"
            elif verb == "savepoint":
                assert [(o["kind"], o["outcome"]) for o in new_ops] == [("savepoint", "succeeded")]
            elif verb == "savepoints":
                assert re.search(r"b\d+", r.stdout), r.stdout
            elif verb == "reprocess":
                ends = end_offsets(s.kafka_bootstrap, "user-profiles.v2")
                assert sum(hi for _lo, hi in ends.values()) > 0
            else:
                raise AssertionError(f"the walk has a command this test does not know: {line}")
        assert ledger.output_version(APP) is None  # promote was a dry run
    finally:
        ledger.close()
        manager.down(s, timeout=30)
