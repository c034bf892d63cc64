"""``streamops new-app``: the scaffolded job, spec entry and unit test work as written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_new_app_writes_a_job_its_spec_entry_and_a_passing_test(checkout: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new-app", "shop_totals", "--dry-run"]) == 0
    assert not (checkout / "jobs" / "shop_totals.py").exists()  # the dry run wrote nothing
    assert "shop_totals" not in load_specs(default_spec_path(checkout))
    assert main(["new-app", "shop_totals"]) == 0
    assert "streamops app lint shop_totals" in capsys.readouterr().out
    spec = load_specs(default_spec_path(checkout))["shop_totals"]
    assert (spec.job, spec.input_topics) == ("jobs.shop_totals", ("shop_totals-input",))
    test = checkout / "tests" / "unit" / "jobs" / "test_shop_totals.py"
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
