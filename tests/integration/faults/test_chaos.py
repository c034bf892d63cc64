"""A short seeded chaos run (``bench/chaos.py``): kill -9 of drivers, of the supervisor and of the
broker right after a commit, operations killed half way and undone, and operations started beside
all that, on a deployed app under a steady load. At the end nothing is lost or counted twice, and
every operation succeeded, was refused, failed before any change (the broker was down: it is
killed beside the operations), or failed and was undone (or only its restart failed and it was
finished; or its undo refused to bring back a checkpoint whose output the broker had lost, and the
reset it names was run). A transaction a killed driver left open is named by the check,
not read past, and waited out (the app's next driver aborts it). The 30-minute run with a Spark
cluster is in docs/benchmarks.md."""

from __future__ import annotations

import pytest

from bench.chaos import run_chaos
from streamops.platform import manager
from tests.fixtures.apps import repo_with

#: part of `make test`; `make chaos` runs it alone
pytestmark = pytest.mark.chaos

LOCAL = "local[2]"
#: operation outcomes the platform may give; anything else (an undo that failed) is a defect
ALLOWED = {"succeeded", "refused", "failed, undone", "failed at restart, resumed", "failed at restart, reset",
           "failed, undone (restart resumed)", "failed, undone (restart reset)",
           "failed, undo refused (lost output), reset", "failed, undo refused",
           "failed before any change (broker down)", "failed before any change"}


def _check(app) -> dict:
    """What `streamops check` prints, in this process on the session's Spark. The app is stopped
    (no batch is being written), so a transaction still open after 5 s is one a killed driver left."""
    from streamops.app.outputs import load_live_spec
    from streamops.state.check import run_check

    return run_check(load_live_spec(app.settings, app.app), app.settings, app.kafka, spark=app.spark,
                     open_transaction_wait_s=5).to_dict()


#: ``commit_on: executors`` is extended (``make test-all``, ``make chaos``): the tasks' commit path is
#: also under test_commit_on_executors' faults (a failure between the tasks' and the driver's
#: commits, a reset, a kill -9) in ``make test``
@pytest.mark.parametrize(("commit_on", "seed"), [("driver", 7), pytest.param("executors", 7, marks=pytest.mark.extended)])
def test_a_short_seeded_chaos_run_leaves_the_app_exact(app_factory, tmp_path, commit_on: str, seed: int) -> None:
    """``commit_on: executors``: the batch's tasks commit their partitions and the driver the marker;
    a driver killed between the two, a broker killed after a commit and the rewinds of the operations
    leave it exact too."""
    app = app_factory(f"ua-chaos-{commit_on}", master=LOCAL)
    if commit_on != "driver":
        app.settings = app.settings.model_copy(update={"repo": repo_with(tmp_path, "user_activity",
                                                                         commit_on=commit_on)})
    manager.up(app.settings, only=["supervisor"])
    try:
        report = run_chaos(app.settings, minutes=1.75, seed=seed, rate=100, cluster=False,
                           check=lambda: _check(app))
    finally:
        manager.down(app.settings, only=["supervisor"])
    tables = report.tables()
    assert report.check_ok and report.lost == 0 and report.duplicated == 0, tables
    assert not report.problems, "\n".join(report.problems) + "\n" + tables
    outcomes = {o for (_k, o) in report.operations}
    assert outcomes <= ALLOWED, tables
    # the seeded schedule: every kind of fault a local master allows came at least once
    assert {"kill-driver", "kill-broker", "kill-operation"} <= set(report.faults), tables
    assert report.input_records > 10_000, tables
