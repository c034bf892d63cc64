"""The spec file as live configuration: reload on change, a broken file refused as a whole (line and
field named) with the last good specs kept, and a running app's restart-only fields kept pinned."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamops.exceptions import ConfigError
from streamops.spec import AppSpec, parse_specs
from streamops.specfile import SpecFile, diff, effective, restart_changes

ONE = """apps:
  a:
    job: jobs.a
    input_topics: [in-a]
    output_topic: out-a
    changelog_topic: a-changelog
    dlq_topic: a.dlq
"""
TWO = ONE + """  b:
    job: jobs.b
    input_topics: [in-b]
    output_topic: out-b
    changelog_topic: b-changelog
    dlq_topic: b.dlq
"""


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    st = path.stat()  # a new mtime even within the same clock tick
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def test_an_added_changed_and_removed_app_is_picked_up_on_refresh(tmp_path) -> None:
    f = tmp_path / "streams.yaml"
    _write(f, ONE)
    sf = SpecFile(f)
    assert sf.refresh() is not None and sorted(sf.specs) == ["a"] and sf.error is None
    assert sf.refresh() is None  # unchanged: not even parsed again
    _write(f, TWO)
    changes = sf.refresh()
    assert changes.added == ("b",) and changes.removed == () and not changes.changed
    _write(f, TWO.replace("out-b", "out-b2"))
    changes = sf.refresh()
    assert [(c.field, c.before, c.after) for c in changes.changed["b"]] == [("output_topic", "out-b", "out-b2")]
    _write(f, ONE)
    assert sf.refresh().removed == ("b",) and sorted(sf.specs) == ["a"]


def test_a_file_that_does_not_load_is_refused_whole_and_the_last_good_stays(tmp_path) -> None:
    f = tmp_path / "streams.yaml"
    _write(f, ONE)
    sf = SpecFile(f, keep=tmp_path / "keep.yaml")
    sf.refresh()
    # b is fine, a is broken: neither is applied (no half-applied file)
    broken = TWO.replace("input_topics: [in-a]", "input_topics: [in-a]\n    state_partitions: many")
    _write(f, broken)
    assert sf.refresh() is None
    assert sorted(sf.specs) == ["a"] and sf.specs["a"].state_partitions == 4
    assert "line 5: apps.a.state_partitions" in sf.error
    # a component started while the file is broken runs on the kept last good one
    late = SpecFile(f, keep=tmp_path / "keep.yaml")
    assert late.refresh() is None and sorted(late.specs) == ["a"] and "line 5" in late.error
    _write(f, TWO)
    assert sf.refresh().added == ("b",) and sf.error is None


def test_errors_name_line_and_field_for_every_bad_field() -> None:
    text = TWO.replace("dlq_topic: b.dlq", "dlq_topic: b.dlq\n    trigger_interval: soon\n    colour: red")
    with pytest.raises(ConfigError) as exc:
        parse_specs(text, Path("streams.yaml"))
    msg = str(exc.value)
    assert "line 14: apps.b.trigger_interval: Value error, not a duration: 'soon'" in msg
    assert "line 15: apps.b.colour: Extra inputs are not permitted" in msg


def _spec(**kw) -> AppSpec:
    base = {"name": "a", "job": "jobs.a", "input_topics": ("in",), "output_topic": "o", "changelog_topic": "c",
            "dlq_topic": "d"}
    return AppSpec(**{**base, **kw})


def test_effective_keeps_the_pinned_restart_fields_and_takes_the_rest_from_the_file() -> None:
    pinned = _spec(state_partitions=4, description="old")
    current = _spec(state_partitions=2, description="new", savepoints={"schedule": "5 * * * *"})
    assert [c.field for c in restart_changes(pinned, current)] == ["state_partitions"]
    eff = effective(pinned, current)
    assert (eff.state_partitions, eff.description, eff.savepoints.schedule) == (4, "new", "5 * * * *")
    assert effective(None, current) == current and effective(pinned, None) == pinned
    assert restart_changes(pinned, _spec(state_partitions=4, description="x")) == ()
    assert diff({"a": pinned}, {"a": pinned}).changed == {}


def test_effective_keeps_the_pinned_spec_when_the_files_other_fields_do_not_fit_it() -> None:
    pinned = _spec(input_partitions=2, state_partitions=2, parallelism={"default": 1, "min": 1, "max": 2})
    # the file raises the partitions and the parallelism range together: alone, the range does
    # not fit the pinned partitions, so the running app keeps its pinned spec whole
    current = _spec(input_partitions=4, state_partitions=4, parallelism={"default": 1, "min": 1, "max": 4})
    eff = effective(pinned, current)
    assert (eff.input_partitions, eff.state_partitions, eff.parallelism.max) == (2, 2, 2)


def test_status_and_stop_work_on_the_last_good_file_while_the_file_is_broken(tmp_path) -> None:
    import subprocess
    import sys

    repo = tmp_path / "repo"
    (repo / "include").mkdir(parents=True)
    spec_path = repo / "include" / "streams.yaml"
    _write(spec_path, TWO)
    env = {**os.environ, "STREAMOPS_REPO": str(repo), "STREAMOPS_HOME": str(tmp_path / "home"),
           "STREAMOPS_BOOTSTRAP_SERVERS": "127.0.0.1:1"}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "streamops.cli", *args], env=env, capture_output=True,
                              text=True, timeout=120, check=False)

    assert cli("status", "--no-lag").returncode == 0  # loads the file: kept as the last good one
    _write(spec_path, TWO.replace("output_topic: out-b", "output_topic: out-b\n    trigger_interval: soon"))
    r = cli("status", "--no-lag")
    assert r.returncode == 0, r.stderr
    assert "b: not deployed" in r.stdout and "the spec file is refused, shown on the last good one" in r.stdout
    assert "line 12: apps.b.trigger_interval" in r.stdout
    r = cli("check", "b")  # commands that would act on the file name its error
    assert r.returncode == 2 and "line 12: apps.b.trigger_interval" in r.stderr
    r = cli("stop", "b")  # stop resolves the app on the last good file (then needs a supervisor)
    assert r.returncode == 1 and "supervisor is not running" in r.stderr, r.stderr
