"""Operations refuse bad requests before anything changes (no services needed for these paths)."""

from __future__ import annotations

import json
import time

import pytest

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.context import AppContext
from streamops.exceptions import UsageError
from streamops.kafka.security import kafka_config
from streamops.ledger import Ledger
from streamops.lifecycle.operations import (
    NotConverged,
    Pending,
    SupervisorNotRunning,
    abandon,
    check_strategy,
    complete,
    deploy,
    poll,
    request_resize,
    require_supervisor,
    resize,
    stop,
)
from streamops.settings import Settings
from streamops.spec import AppSpec

SPEC = AppSpec(name="app1", job="jobs.x", input_topics=("in",), output_topic="o", changelog_topic="c",
               dlq_topic="d", input_partitions=6, state_partitions=4,
               parallelism={"default": 2, "min": 1, "max": 4})


def _ctx(settings: Settings, spec: AppSpec, ledger: Ledger) -> AppContext:
    return AppContext(settings, spec, ledger, kafka_config(settings, spec))


@pytest.fixture
def env(tmp_path):
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    yield settings, ledger
    ledger.close()


def beat(settings: Settings, age: float = 0.0) -> None:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "supervisor.json").write_text(json.dumps({"heartbeat": time.time() - age}))


def test_without_a_live_supervisor_nothing_changes(env) -> None:
    settings, ledger = env
    with pytest.raises(SupervisorNotRunning, match="not running"):
        deploy(_ctx(settings, SPEC, ledger))
    beat(settings, age=120)
    with pytest.raises(SupervisorNotRunning, match="120 s old|12[01] s old"):
        stop(_ctx(settings, SPEC, ledger))
    assert ledger.operations("app1") == [] and ledger.desired("app1") is None
    beat(settings)
    require_supervisor(settings)


@pytest.mark.parametrize("n, message", [(0, "at least 1"), (7, "more than it can use: 6"),
                                        (5, r"outside the spec's range \[1, 4\]")])
def test_invalid_parallelism_is_refused_first(env, n, message) -> None:
    settings, ledger = env
    beat(settings)
    with pytest.raises(UsageError, match=message):
        deploy(_ctx(settings, SPEC, ledger), parallelism=n)
    with pytest.raises(UsageError, match=message):
        resize(_ctx(settings, SPEC, ledger), parallelism=n)
    assert ledger.operations("app1") == [] and ledger.desired("app1") is None


def test_resize_needs_a_deployed_app_and_a_known_strategy(env) -> None:
    settings, ledger = env
    beat(settings)
    with pytest.raises(UsageError, match="not deployed"):
        resize(_ctx(settings, SPEC, ledger), parallelism=2)
    with pytest.raises(UsageError, match="unknown strategy 'sideways'"):
        resize(_ctx(settings, SPEC, ledger), parallelism=2, strategy="sideways")
    assert ledger.operations("app1") == []


def test_live_resize_needs_a_master_that_can_add_executors(env) -> None:
    settings, ledger = env
    beat(settings)
    ledger.set_desired("app1", status="running", parallelism=1, who="test")
    local = SPEC.model_copy(update={"spark_master": "local[2]"})
    with pytest.raises(UsageError, match=r"runs on local\[2\].*--strategy restart"):
        resize(_ctx(settings, local, ledger), parallelism=2, strategy="live")
    assert ledger.operations("app1") == []
    assert check_strategy(settings, SPEC.model_copy(update={"spark_master": "spark://h:7077"}), "live") == "live"


def test_request_sets_desired_holds_the_lease_and_pending_round_trips(env) -> None:
    settings, ledger = env
    beat(settings)
    ledger.set_desired("app1", status="running", parallelism=1, who="test")
    spec = SPEC.model_copy(update={"spark_master": "spark://h:7077"})
    pending = request_resize(_ctx(settings, spec, ledger), parallelism=3, strategy="live", who="t:1", timeout=5)
    assert Pending.from_dict(json.loads(json.dumps(pending.to_dict()))) == pending  # a trigger carries it
    desired = ledger.desired("app1")
    assert (desired["parallelism"], desired["strategy"]) == (3, "live")
    assert ledger.lease("app1")["operation_id"] == pending.operation_id
    assert poll(_ctx(settings, spec, ledger), pending) is None  # nothing observed yet: not converged
    pending.deadline = time.time() - 1
    with pytest.raises(NotConverged, match="did not commit a batch at x3"):
        poll(_ctx(settings, spec, ledger), pending)
    abandon(ledger, pending, "gave up")
    op = ledger.get_operation(pending.operation_id)
    assert (op["outcome"], op["error"], op["requested_by"]) == ("failed", "gave up", "t:1")
    assert ledger.lease("app1") is None


def test_converged_when_a_batch_at_the_new_size_committed(env) -> None:
    settings, ledger = env
    beat(settings)
    ledger.set_desired("app1", status="running", parallelism=1, who="test")
    pending = request_resize(_ctx(settings, SPEC, ledger), parallelism=2, who="t:2")
    ledger.report_observed("app1", status="running", parallelism=1, last_batch=7)
    assert poll(_ctx(settings, SPEC, ledger), pending) is None  # old size
    ledger.report_observed("app1", status="running", parallelism=2, last_batch=8, pid=42, executors=2)
    commits = checkpoint_dir(settings, SPEC) / "commits"
    commits.mkdir(parents=True)
    assert poll(_ctx(settings, SPEC, ledger), pending) is None  # reported, but the commit file is not written yet
    (commits.parent / "offsets").mkdir()
    (commits.parent / "offsets" / "8").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0}\n{"in":{"0":5}}')
    (commits / "8").write_text('v1\n{"nextBatchWatermarkMs":0}')
    observed = poll(_ctx(settings, SPEC, ledger), pending)
    assert observed is not None and observed["last_batch"] == 8
    out = complete(_ctx(settings, SPEC, ledger), pending, observed)
    assert (out.parallelism, out.noop, out.strategy, out.after["executors"]) == (2, False, "restart", 2)
    assert (out.after["batch"], out.after["offsets"]) == (8, {"in": {"0": 5}})
    assert ledger.get_operation(pending.operation_id)["outcome"] == "succeeded" and ledger.lease("app1") is None
    again = request_resize(_ctx(settings, SPEC, ledger), parallelism=2, who="t:3")
    assert again.result is not None and again.result.noop is True and ledger.lease("app1") is None


def test_a_deploy_after_a_give_up_waits_for_the_supervisor_to_try_again(env) -> None:
    """The supervisor's give-up says "deploy again to retry": the deploy must not fail on that
    same, older crash-loop report before the supervisor has tried again."""
    settings, ledger = env
    ledger.report_observed("app1", status="crash-loop", error="5 crashes")
    time.sleep(0.01)
    t0 = time.time()
    op = ledger.begin("app1", "deploy", who="t")
    pending = Pending(app="app1", kind="deploy", operation_id=op.id, requested_by="t", t0=t0, deadline=t0 + 60,
                      before={}, parallelism=1, batch_before=None)
    assert poll(_ctx(settings, SPEC, ledger), pending) is None  # the old give-up: still waiting
    ledger.report_observed("app1", status="crash-loop", error="5 crashes again")
    with pytest.raises(NotConverged, match="crash-loop"):
        poll(_ctx(settings, SPEC, ledger), pending)


def test_a_deploy_the_supervisor_has_not_loaded_says_why_at_once(tmp_path) -> None:
    from streamops.lifecycle.operations import AppNotLoaded, require_loaded

    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "streams.yaml").write_text(
        "apps:\n  app1: {job: jobs.x, input_topics: [in], output_topic: o, changelog_topic: c, dlq_topic: d}\n")
    settings = Settings(repo=tmp_path, home=tmp_path / "home")
    ledger = Ledger.open(settings.ledger_db_url)
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    hb = settings.state_dir / "supervisor.json"
    hb.write_text(json.dumps({"heartbeat": time.time(), "apps": ["other"]}))  # a supervisor before live specs
    with pytest.raises(AppNotLoaded, match=r"has not loaded app1 \(it knows: other\).*platform down --only supervisor"):
        require_loaded(settings, "app1", wait_s=0)
    hb.write_text(json.dumps({"heartbeat": time.time(), "apps": ["other"],
                              "spec": {"path": "x.yaml", "loaded_at": time.time(), "error": "x.yaml: line 3: bad"}}))
    t0 = time.monotonic()
    with pytest.raises(AppNotLoaded, match="refused the spec file.*line 3: bad"):
        deploy(_ctx(settings, SPEC, ledger))
    assert time.monotonic() - t0 < 15  # not the 300 s of a deploy waiting for a driver
    assert ledger.operations("app1") == [] and ledger.desired("app1") is None
    ledger.close()


def test_a_deploy_of_a_running_app_whose_file_changes_a_restart_field_is_refused_with_the_plan(tmp_path) -> None:
    import os
    import sys

    from streamops.app.dir import AppDir
    from streamops.host import process
    from streamops.lifecycle.operations import SpecChangeNeedsRestart, spec_to_deploy

    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "streams.yaml").write_text(
        "apps:\n  app1: {job: jobs.x, input_topics: [in], output_topic: o2, changelog_topic: c, dlq_topic: d}\n")
    settings = Settings(repo=tmp_path, home=tmp_path / "home")
    d = AppDir.of(settings, "app1")
    d.pin_spec(SPEC)
    # stopped: the deploy applies the file as it is
    assert spec_to_deploy(settings, SPEC).output_topic == "o2"
    rec = process.spawn([sys.executable, "-c", "import time; time.sleep(60)"], env=dict(os.environ), log_path=d.log,
                        pid_path=d.pid, cwd=tmp_path)
    try:
        with pytest.raises(SpecChangeNeedsRestart, match=r"output_topic: 'o' -> 'o2'.*streamops stop app1"):
            spec_to_deploy(settings, SPEC)
    finally:
        d.stop_driver(now=True)
    assert not rec.alive


def test_a_deploy_that_does_not_converge_says_which_of_launch_crash_or_batch_is_missing(env) -> None:
    from streamops.app.dir import AppDir
    from streamops.lifecycle.operations import diagnose

    settings, ledger = env
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "supervisor.json").write_text(json.dumps({
        "heartbeat": time.time(), "apps": ["app1"],
        "decisions": {"app1": "wait (resize #3 holds app1's lease (launch waits for it: desired running))"}}))
    pending = Pending(app="app1", kind="deploy", operation_id=1, requested_by="t", t0=time.time(),
                      deadline=time.time() + 1, before={}, parallelism=1)
    said = diagnose(_ctx(settings, SPEC, ledger), pending)
    assert said.startswith("no driver was launched") and "resize #3 holds app1's lease" in said

    d = AppDir.of(settings, "app1")
    d.root.mkdir(parents=True, exist_ok=True)
    d.log.write_text("starting\nTraceback (most recent call last):\nModuleNotFoundError: No module named 'jobs.x'\n")
    ledger.record("app1", "supervisor-launch", who="supervisor", params={"parallelism": 1}, after={"pid": 4242})
    ledger.record("app1", "driver-exit", who="supervisor", outcome="failed", error="exit 1")
    said = diagnose(_ctx(settings, SPEC, ledger), pending)
    assert said.startswith("the driver was launched (1 time(s), first pid 4242) and exited 1 time(s)")
    assert said.endswith("ModuleNotFoundError: No module named 'jobs.x'")
