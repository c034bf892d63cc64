"""``streamops new-app``: the scaffolded job, spec entry and unit test work as written."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from streamops.cli import main
from streamops.spec import default_spec_path, load_specs


@pytest.fixture
def checkout(tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The parts of a checkout new-app touches (specs, jobs/, tests/unit/jobs/)."""
    (tmp_path / "include").mkdir()
    shutil.copy(default_spec_path(repo), tmp_path / "include" / "streams.yaml")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "__init__.py").write_text("")
    monkeypatch.setenv("STREAMOPS_REPO", str(tmp_path))
    monkeypatch.setenv("STREAMOPS_HOME", str(tmp_path / "home"))
    return tmp_path


def test_new_app_writes_a_job_its_spec_entry_and_a_passing_test(checkout: Path, repo: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new-app", "shop_totals", "--dry-run"]) == 0
    assert not (checkout / "jobs" / "shop_totals.py").exists()  # the dry run wrote nothing
    assert "shop_totals" not in load_specs(default_spec_path(checkout))
    assert main(["new-app", "shop_totals"]) == 0
    assert "streamops app lint shop_totals" in capsys.readouterr().out
    spec = load_specs(default_spec_path(checkout))["shop_totals"]
    assert (spec.job, spec.input_topics) == ("jobs.shop_totals", ("shop_totals-input",))
    # the entry is the minimal one; the rest are the documented defaults
    entry = yaml.safe_load(default_spec_path(checkout).read_text())["apps"]["shop_totals"]
    assert set(entry) == {"job", "input_topics", "output_topic"}
    assert (spec.changelog_topic, spec.dlq_topic, spec.savepoints.schedule, spec.parallelism.max) == (
        "shop_totals-state-changelog", "shop_totals-dlq", "0 * * * *", 2)
    # the apps that were there keep their entries as written
    assert load_specs(default_spec_path(repo)) == {k: v for k, v in load_specs(default_spec_path(checkout)).items()
                                                   if k != "shop_totals"}
    test = checkout / "tests" / "unit" / "jobs" / "test_shop_totals.py"
    imported = {n.module for n in ast.walk(ast.parse(test.read_text())) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(ast.parse(test.read_text())) if isinstance(n, ast.Import) for a in n.names}
    assert {m for m in imported if m.startswith("streamops")} == {"streamops.job", "streamops.testing"}, imported
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(Path(__file__).resolve().parents[2])])}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                        str(test), "--rootdir", str(checkout)], capture_output=True, text=True, env=env,
                       cwd=checkout, check=False, timeout=300)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "streamops.cli", "app", "lint", "shop_totals", "--no-spark", "--json"],
                       capture_output=True, text=True, env=env, cwd=checkout, check=False, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_new_app_refuses_a_known_name_or_a_bad_one(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new-app", "page_stats"]) == 2
    assert "already an app" in capsys.readouterr().err
    assert main(["new-app", "Bad-Name"]) == 2
    assert "lower case letters" in capsys.readouterr().err
    (checkout / "jobs" / "taken.py").write_text("")
    assert main(["new-app", "taken"]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
