"""The pre-flight compatibility gate: a changed key, state or operator is refused before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.page_stats import PageStats
from jobs.user_activity import UserActivity
from streamops.app.shape import job_shape
from streamops.checkpoints import compat
from streamops.job import Max, Sum
from streamops.spark.query.plan import JobQuery


def shape(job_cls) -> compat.JobShape:
    return job_shape(job_cls)


def test_the_shape_counts_the_query_plans_scans_of_the_input() -> None:
    assert job_shape(UserActivity).sources == JobQuery(UserActivity, state_partitions=2).sources == 2
    assert job_shape(PageStats).sources == JobQuery(PageStats, state_partitions=2).sources == 1


def test_a_new_checkpoint_records_the_jobs_shape_and_the_same_job_passes(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    compat.gate("user_activity", ckpt, shape(UserActivity))
    rec = json.loads((ckpt / compat.FILE).read_text())
    assert rec == {"kind": "aggregate", "key": "user_id", "sources": 2, "stateful_operators": 1,
                   "state": ["last_login_ts:max:long", "purchases:sum:long", "total_cents:sum:long", "events:sum:long"]}
    compat.gate("user_activity", ckpt, shape(UserActivity))  # unchanged: passes


def test_a_changed_aggregation_is_refused_naming_the_change_and_the_migrations(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    compat.gate("user_activity", ckpt, shape(UserActivity))

    class MoreFields(UserActivity):
        aggregate = {**UserActivity.aggregate, "biggest": Max()}

    with pytest.raises(compat.IncompatibleCheckpointError) as err:
        compat.gate("user_activity", ckpt, shape(MoreFields))
    msg = str(err.value)
    assert "the state changed (now biggest:max:long)" in msg and "Nothing was started" in msg
    assert "streamops reset user_activity --to-earliest" in msg and "--output-version vN" in msg
    assert "rebuild-state" not in msg  # the changelog holds the old state: no rebuild from it
    assert err.value.exit_code == 2

    class OtherKey(UserActivity):
        key_name = "account"
        aggregate = {"last_login_ts": Max(), "purchases": Sum(), "total_cents": Sum(), "events": Sum()}

    with pytest.raises(compat.IncompatibleCheckpointError, match="the key changed from 'user_id' to 'account'"):
        compat.gate("user_activity", ckpt, shape(OtherKey))


def test_a_new_state_version_or_another_operator_is_refused(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    compat.gate("page_stats", ckpt, shape(PageStats))

    class V2(PageStats):
        state_version = 3

    with pytest.raises(compat.IncompatibleCheckpointError, match=r"was state_version:2; now state_version:3"):
        compat.gate("page_stats", ckpt, shape(V2))
    with pytest.raises(compat.IncompatibleCheckpointError, match="operator changed from update to aggregate"):
        compat.gate("page_stats", ckpt, compat.JobShape("aggregate", "page", ("views:sum:long",), 1, 2))
    with pytest.raises(compat.IncompatibleCheckpointError, match="stateful operators changed from 1 to 2") as err:
        compat.gate("page_stats", ckpt, compat.JobShape("update", "page", shape(PageStats).state, 2, 1))
    assert "rebuild-state page_stats --from-changelog" in str(err.value)  # same serialized state: rebuildable


def test_the_driver_is_refused_before_any_spark_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        repo: Path) -> None:
    from streamops.spark.driver import loop, main

    monkeypatch.setenv("STREAMOPS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("STREAMOPS_REPO", str(repo))
    ckpt = tmp_path / "home" / "checkpoints" / "page_stats"
    compat.record(ckpt, compat.JobShape("update", "page", ("serde:x.Y", "state_version:7"), 1, 1))
    monkeypatch.setattr(loop, "run_app", lambda *a, **k: pytest.fail("the driver started"))
    assert main.main(["--app", "page_stats"]) == 2
