"""A fork's own apps beside the examples (issue 40, item 1): users add apps to `include/streams.yaml`
and `jobs/`, and the project's tests must still pass. A copy of the checkout gets a minimal app from
`streamops new-app` (its spec entry is three lines: every other field has a default), and the tests
that walk the spec run there: the spec's own checks, the CLI's list of apps and topics, the DAGs
and their forms, and the new app's own test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.fixtures.apps import CLI
from tests.fixtures.example_apps import EXAMPLE_APPS

REPO = Path(__file__).resolve().parents[3]
#: the tests that read include/streams.yaml as it is (each entry, generically)
SPEC_WALKERS = ("tests/unit/test_spec.py", "tests/unit/jobs/demo/test_produce.py", "tests/dags/test_app_dags.py",
                "tests/dags/test_dag_integrity.py")


def _fork(dest: Path) -> Path:
    """The checkout's tracked files (what a fork has), copied."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def test_the_spec_walking_tests_pass_with_a_users_minimal_app_added(tmp_path: Path) -> None:
    fork = _fork(tmp_path / "fork")
    # the fork's own code and tests; this run's pytest options (its report file) stay out of it
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "STREAMOPS_"))}
    env.update(PYTHONPATH=str(fork), STREAMOPS_REPO=str(fork))
    made = subprocess.run([*CLI, "new-app", "orders_total"], cwd=fork, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert made.returncode == 0, made.stderr[-2000:]
    apps = yaml.safe_load((fork / "include" / "streams.yaml").read_text())["apps"]
    assert set(apps) == {*EXAMPLE_APPS, "orders_total"}
    assert set(apps["orders_total"]) == {"job", "input_topics", "output_topic"}  # the defaults do the rest

    ran = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:randomly",
                          *SPEC_WALKERS, "tests/unit/jobs/test_orders_total.py"],
                         cwd=fork, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    assert " passed" in ran.stdout and " failed" not in ran.stdout and " skipped" not in ran.stdout, ran.stdout[-2000:]
