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


def test_the_scaffolded_job_accepts_the_event_times_the_platform_accepts(checkout: Path) -> None:
    """Its ``ts`` check is the platform's range, named by its constants (``streamops.stream_time``),
    so a scaffolded job never keeps a time that a job with stream time would send to the DLQ."""
    import importlib.util

    from streamops.job import Record, Reject
    from streamops.stream_time import MAX_TS, MIN_TS

    assert main(["new-app", "ts_range"]) == 0
    path = checkout / "jobs" / "ts_range.py"
    source = ast.parse(path.read_text())
    checks = [n for n in ast.walk(source) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "is_int"
              and ast.unparse(n.args[0]) == "obj.get('ts')"]
    assert [[ast.unparse(a) for a in c.args[1:]] for c in checks] == [["MIN_TS", "MAX_TS"]]
    spec = importlib.util.spec_from_file_location("scaffolded_ts_range", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    job = module.TsRange()

    def parsed(ts: object) -> object:
        value = f'{{"key": "a", "amount": 1, "ts": {ts}}}'.encode()
        return job.parse(Record("ts_range-input", 0, 0, b"a", value))

    for ts in (MIN_TS, MAX_TS):
        assert parsed(ts) == {"key": "a", "amount": 1, "ts": ts}
    for ts in (MIN_TS - 1, 0, MAX_TS + 1, 2**63 - 1):
        assert parsed(ts) == Reject("bad_ts"), ts
