"""A fork's own apps beside the examples (issue 40, item 1): users add apps to `include/streams.yaml`
and `jobs/`, and the project's tests must still pass. A copy of the checkout gets three apps of its
own: a minimal one from `streamops new-app` (its spec entry is three lines: every other field has a
default), click sessions with an idle timeout and an as-of join of orders to prices over two
topics (both with stream time). Every test of the checkout that reads its spec runs there (found
the way they find it: `include/streams.yaml`, `default_spec_path`, `load_specs`, `get_app`), with
the new app's own test, and `app lint` passes for each of the three."""

from __future__ import annotations

import json
import os
import re
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


#: what marks a test file as one that reads the checkout's spec
READS_SPEC = re.compile(r"streams\.yaml|default_spec_path|load_specs\(|get_app\(")
#: the user's apps with stream time: (module, the example it is written from, topic renames, spec entry)
USER_APPS = {
    "user_sessions": ("jobs/sessions.py", {}, {"input_topics": ["web-clicks"], "output_topic": "web-sessions",
                                               "input_partitions": 3, "idle_timeouts": {"web-clicks": "5 minutes"}}),
    "priced_orders": ("jobs/enriched_orders.py", {"orders-placed": "shop-orders", "product-prices": "shop-prices"},
                      {"input_topics": ["shop-orders", "shop-prices"], "output_topic": "shop-priced-orders",
                       "input_partitions": 3, "idle_timeouts": {"shop-prices": "1 hour"}}),
}


def _spec_readers() -> list[str]:
    """Every unit and DAG test file of the checkout that reads its spec."""
    return sorted(str(p.relative_to(REPO)) for d in ("tests/unit", "tests/dags") for p in (REPO / d).rglob("test_*.py")
                  if READS_SPEC.search(p.read_text()))


def _suffix(apps: dict, names: list[str]) -> str:
    """A suffix that gives each of ``names`` a name no app of the checkout has (a fork may have
    added apps of these names already: its tests must pass too)."""
    n, suffix = 1, ""
    while any(f"{name}{suffix}" in apps for name in names):
        n += 1
        suffix = str(n)
    return suffix


def test_the_spec_walking_tests_pass_with_a_users_minimal_app_added(tmp_path: Path) -> None:
    fork = _fork(tmp_path / "fork")
    # the fork's own code and tests; this run's pytest options (its report file) stay out of it
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "STREAMOPS_"))}
    env.update(PYTHONPATH=str(fork), STREAMOPS_REPO=str(fork))
    spec_path = fork / "include" / "streams.yaml"
    before = yaml.safe_load(spec_path.read_text())["apps"]
    assert set(EXAMPLE_APPS) <= set(before)
    sfx = _suffix(before, ["orders_total", *USER_APPS])
    minimal = f"orders_total{sfx}"
    made = subprocess.run([*CLI, "new-app", minimal], cwd=fork, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert made.returncode == 0, made.stderr[-2000:]
    apps = yaml.safe_load(spec_path.read_text())["apps"]
    assert set(apps) == {*before, minimal}
    assert set(apps[minimal]) == {"job", "input_topics", "output_topic"}  # the defaults do the rest
    text = spec_path.read_text()
    added = [minimal]
    for base, (example, renames, entry) in USER_APPS.items():
        name = f"{base}{sfx}"
        code = (REPO / example).read_text()
        for old, new in renames.items():
            code = code.replace(f'"{old}"', f'"{new}{sfx}"')
        (fork / "jobs" / f"{name}.py").write_text(code)
        topics = {t: f"{t}{sfx}" for t in [*entry["input_topics"], entry["output_topic"]]}
        fields = {**entry, "input_topics": [topics[t] for t in entry["input_topics"]],
                  "output_topic": topics[entry["output_topic"]],
                  "idle_timeouts": {topics[t]: v for t, v in entry["idle_timeouts"].items()}}
        text += f"\n  {name}:\n" + "".join(f"    {k}: {json.dumps(v)}\n" for k, v in {"job": f"jobs.{name}", **fields}.items())
        added.append(name)
    spec_path.write_text(text)
    assert set(yaml.safe_load(spec_path.read_text())["apps"]) == {*before, *added}
    for name in added:
        lint = subprocess.run([*CLI, "app", "lint", name, "--no-spark", "--events", "1500", "--json"], cwd=fork, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert lint.returncode == 0 and json.loads(lint.stdout)["ok"], lint.stdout[-2000:] + lint.stderr[-2000:]

    readers = sorted({*_spec_readers(), *SPEC_WALKERS})  # the DAGs' tests read it through the DAG files
    ran = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:randomly",
                          *readers, f"tests/unit/jobs/test_{minimal}.py"],
                         cwd=fork, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    assert " passed" in ran.stdout and " failed" not in ran.stdout and " skipped" not in ran.stdout, ran.stdout[-2000:]
