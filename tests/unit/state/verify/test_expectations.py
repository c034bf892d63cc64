"""``streamops verify``'s Great Expectations suites (the real files in include/expectations) and
its HTML report folders."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from streamops.state import quality as q
from streamops.state.verify.expectations import (
    REPORTS_KEPT,
    RESULT_SUITE,
    _report_dir,
    result_frame,
    state_frame,
)
from tests.unit.state.verify.test_report import STATE, profile, view

REPO = Path(__file__).resolve().parents[4]
SUITES = q.suites_dir(REPO)


# -- Great Expectations suites (the real files in include/expectations) -----------------------------
def good_state() -> pd.DataFrame:
    return pd.DataFrame({
        "user_id": ["u1", "u2", "u3"],
        "last_login_ts": pd.array([1_767_225_600_000, None, 1_767_225_700_000], dtype="Int64"),
        "purchases": [0, 2, 1], "total_amount": [0.0, 12.5, 0.01], "events": [1, 5, 1],
    })


@pytest.fixture(scope="module")
def gx_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, q.QualityReport]:
    """GX is slow to import: run the clean and the broken inputs once for the tests below."""
    clean_views = [view("changelog", dict(STATE)), view("output", dict(STATE))]
    bad = good_state()
    bad.loc[1, "user_id"] = "u1"  # duplicate key
    bad.loc[2, "purchases"] = -1
    bad.loc[0, "last_login_ts"] = 1_900_000_000_000  # after now_ms below
    bad.loc[0, "events"] = 0
    bad.loc[1, "purchases"] = 6  # more purchases than events
    bad_views = [view("changelog", {**STATE, "u2": profile("u2", events=4)}),
                 view("output", {k: p for k, p in STATE.items() if k != "u1"})]
    now = {"now_ms": 1_800_000_000_000}
    docs = tmp_path_factory.mktemp("gx") / "report"
    return {
        "clean": q.run_checks([q.Check("state", SUITES / "user_activity_state.json", good_state()),
                               q.Check("result", SUITES / RESULT_SUITE, result_frame(clean_views))],
                              parameters=now, docs_dir=docs, run_name="t-batch1"),
        "bad": q.run_checks([q.Check("state", SUITES / "user_activity_state.json", bad),
                             q.Check("result", SUITES / RESULT_SUITE, result_frame(bad_views))],
                            parameters=now),
    }


def test_suites_pass_on_clean_state_and_write_html(gx_runs) -> None:
    r = gx_runs["clean"]
    assert r.ok, r.summary_lines()
    assert [x.suite for x in r.results] == ["user_activity_state", "verify_result"]
    assert all(x.evaluated >= 5 and not x.failures for x in r.results)
    assert r.report_html and Path(r.report_html).is_file()
    assert all(x.page and Path(x.page).is_file() for x in r.results)
    assert "t-batch1" in r.results[0].page


def test_suites_report_each_violation_readably(gx_runs) -> None:
    r = gx_runs["bad"]
    assert not r.ok and r.report_html is None
    state, result = r.results
    failed = {(f.expectation, f.kwargs.get("column")) for f in state.failures}
    assert failed == {
        ("expect_column_values_to_be_unique", "user_id"),
        ("expect_column_values_to_be_between", "purchases"),
        ("expect_column_values_to_be_between", "events"),
        ("expect_column_values_to_be_between", "last_login_ts"),
        ("expect_column_pair_values_a_to_be_greater_than_b", None),
    }
    assert {f.kwargs["column"] for f in result.failures} == {"missing", "different"}
    text = "\n".join(r.summary_lines())
    assert "state (user_activity_state): 4/9 expectations passed" in text
    assert 'expect_column_values_to_be_between(column="purchases", min_value=0.0): 1 of 3 rows unexpected, ' \
           "e.g. [-1]" in text
    assert "1900000000000" in text  # the future last login is shown
    json.dumps(r.to_dict())  # JSON-safe (no numpy scalars)


def test_suite_file_errors(tmp_path: Path) -> None:
    from streamops.exceptions import ConfigError

    with pytest.raises(ConfigError, match="no expectation suite"):
        q.load_suite(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text('{"name": "x"}')
    with pytest.raises(ConfigError, match="expected a GX suite"):
        q.load_suite(tmp_path / "bad.json")
    assert q.load_suite(SUITES / RESULT_SUITE)["name"] == "verify_result"


def test_report_folders_are_pruned_to_the_newest(tmp_path) -> None:
    from streamops.settings import Settings

    settings = Settings(home=tmp_path)
    root = settings.state_dir / "reports" / "verify" / "app"
    for i in range(REPORTS_KEPT + 5):
        (root / f"20260101T0000{i:02d}.000000Z-batch{i}").mkdir(parents=True)
    new = _report_dir(settings, "app", 99)
    new.mkdir()
    kept = sorted(p.name for p in root.iterdir())
    assert len(kept) == REPORTS_KEPT and kept[-1] == new.name
    assert kept[0].endswith(f"-batch{6}")  # the 6 oldest went


def test_the_sessions_output_suite_judges_closed_sessions() -> None:
    """A job that writes windows only once they close: verify's output suite takes its output
    records (no state explains them), here the fold's output of the sessions sample."""
    import pyarrow as pa

    from jobs.sessions import Sessions, generate
    from streamops.state.lint import sample_records
    from streamops.state.oracle import fold_input

    out = fold_input(Sessions, sample_records(Sessions, "clicks", 3, generate(400, seed=5, users=12,
                                                                              step_ms=20_000))).output
    frame = state_frame(pa.Table.from_pylist(list(out.values())))
    bad = frame.copy()
    bad.loc[0, "pages"] = bad.loc[0, "clicks"] + 1  # more distinct pages than clicks
    bad.loc[1, "end"] = bad.loc[1, "start"]
    now = {"now_ms": 1_800_000_000_000}
    (clean,) = q.run_checks([q.Check("output", SUITES / "sessions_output.json", frame)], parameters=now).results
    (broken,) = q.run_checks([q.Check("output", SUITES / "sessions_output.json", bad)], parameters=now).results
    assert len(frame) > 5 and not clean.failures and clean.evaluated == 7
    assert {f.expectation for f in broken.failures} == {"expect_column_pair_values_a_to_be_greater_than_b"}
    assert len(broken.failures) == 2
