"""The documents of deploy, resize and stop (``--json``, the Airflow tasks' XCom) keep their keys,
in their order, now that typed results carry them (``streamops.lifecycle.outcomes``): pinned here
as literal lists, written from the dicts the operations returned before they were typed. A no-op
resize's document has an order of its own. So has the supervisor's heartbeat file."""

from __future__ import annotations

import json
import time

import pytest

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.context import AppContext
from streamops.kafka.security import kafka_config
from streamops.ledger import Ledger
from streamops.lifecycle.operations import Pending, complete, poll, request_resize
from streamops.lifecycle.outcomes import AlreadyAtSize, Resized, Running, Stopped
from streamops.settings import Settings
from streamops.spec import AppSpec

SPEC = AppSpec(name="app1", job="jobs.x", input_topics=("in",), output_topic="o", changelog_topic="c",
               dlq_topic="d", input_partitions=6, state_partitions=4,
               parallelism={"default": 2, "min": 1, "max": 4})

SNAPSHOT = ["status", "parallelism", "batch", "offsets"]
DEPLOYED = ["app", "operation_id", "before", "after", "seconds", "parallelism"]
RESIZED = ["app", "operation_id", "before", "after", "seconds", "parallelism", "noop", "strategy"]
STOPPED = ["app", "operation_id", "before", "after", "seconds"]
ALREADY_AT_SIZE = ["app", "operation_id", "parallelism", "noop", "strategy", "before", "after", "seconds"]
PENDING = ["app", "kind", "operation_id", "requested_by", "t0", "deadline", "before", "parallelism",
           "batch_before", "result", "extra"]


@pytest.fixture
def env(tmp_path):
    settings = Settings(home=tmp_path)
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "supervisor.json").write_text(json.dumps({"heartbeat": time.time()}))
    ledger = Ledger.open(settings.ledger_db_url)
    yield settings, ledger, AppContext(settings, SPEC, ledger, kafka_config(settings, SPEC))
    ledger.close()


def _commit(settings: Settings, batch: int, offset: int) -> None:
    ckpt = checkpoint_dir(settings, SPEC)
    for d in ("commits", "offsets"):
        (ckpt / d).mkdir(parents=True, exist_ok=True)
    (ckpt / "offsets" / str(batch)).write_text(
        f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":0}}\n{{"in":{{"0":{offset}}}}}')
    (ckpt / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def _pending(ledger: Ledger, kind: str, parallelism: int | None) -> Pending:
    op = ledger.begin("app1", kind, who="t")
    return Pending(app="app1", kind=kind, operation_id=op.id, requested_by="t", t0=time.time(),
                   deadline=time.time() + 60, before={"status": None, "parallelism": None, "batch": None,
                                                      "offsets": {}}, parallelism=parallelism)


def test_a_deploys_document(env) -> None:
    settings, ledger, ctx = env
    _commit(settings, 3, 9)
    pending = _pending(ledger, "deploy", 2)
    ran = complete(ctx, pending, {"pid": 42, "spark_app_id": "app-1", "executors": 2, "status": "running"})
    assert type(ran) is Running and (ran.parallelism, ran.after["pid"]) == (2, 42)
    out = ran.to_dict()
    assert list(out) == DEPLOYED
    assert list(out["after"]) == [*SNAPSHOT, "pid", "spark_app_id", "executors"]
    assert {k: v for k, v in out.items() if k != "seconds"} == {
        "app": "app1", "operation_id": pending.operation_id, "before": pending.before,
        "after": {"status": None, "parallelism": None, "batch": 3, "offsets": {"in": {"0": 9}}, "pid": 42,
                  "spark_app_id": "app-1", "executors": 2},
        "parallelism": 2}
    assert isinstance(out["seconds"], float)
    assert json.loads(json.dumps(out)) == out and Running.from_dict(json.loads(json.dumps(out))) == ran


def test_a_stops_document_has_no_parallelism(env) -> None:
    _settings, ledger, ctx = env
    pending = _pending(ledger, "stop", None)
    stopped = complete(ctx, pending, {"pid": 42})
    assert type(stopped) is Stopped and not hasattr(stopped, "parallelism")
    out = stopped.to_dict()
    assert list(out) == STOPPED and list(out["after"]) == SNAPSHOT
    assert (out["app"], out["operation_id"], out["after"]["batch"]) == ("app1", pending.operation_id, None)


def test_a_resizes_document_and_a_no_op_resizes_own_order(env) -> None:
    settings, ledger, ctx = env
    ledger.set_desired("app1", status="running", parallelism=1, who="test")
    pending = request_resize(ctx, parallelism=2, who="t:2")
    ledger.report_observed("app1", status="running", parallelism=2, last_batch=8, pid=42, executors=2)
    _commit(settings, 8, 5)
    observed = poll(ctx, pending)
    assert observed is not None
    resized = complete(ctx, pending, observed)
    assert type(resized) is Resized and (resized.noop, resized.strategy) == (False, "restart")
    out = resized.to_dict()
    assert list(out) == RESIZED
    assert (out["parallelism"], out["noop"], out["strategy"]) == (2, False, "restart")
    assert list(out["after"]) == [*SNAPSHOT, "pid", "spark_app_id", "executors"]

    again = request_resize(ctx, parallelism=2, who="t:3")  # already at that size: finished at once
    assert isinstance(again.result, AlreadyAtSize) and again.result.noop is True
    noop = again.result.to_dict()
    assert list(noop) == ALREADY_AT_SIZE and list(noop["after"]) == [*SNAPSHOT, "noop"]
    assert noop == {"app": "app1", "operation_id": again.operation_id, "parallelism": 2, "noop": True,
                    "strategy": "restart", "before": again.before, "after": {**again.before, "noop": True},
                    "seconds": 0.0}
    assert complete(ctx, again, {}) is again.result
    assert poll(ctx, again) == noop  # nothing to wait for

    doc = again.to_dict()  # what an Airflow trigger carries: plain JSON, the result as its document
    assert list(doc) == PENDING and list(doc["result"]) == ALREADY_AT_SIZE
    assert json.loads(json.dumps(doc)) == doc
    back = Pending.from_dict(json.loads(json.dumps(doc)))
    assert back == again and isinstance(back.result, AlreadyAtSize) and back.result.to_dict() == noop


HEARTBEAT = ["heartbeat", "apps", "busy", "decisions", "notes"]
SPEC_STATUS = ["path", "digest", "loaded_at", "error"]


def test_the_supervisors_heartbeat_file_and_what_require_supervisor_reads_of_it(tmp_path) -> None:
    from streamops.lifecycle.operations import require_loaded, require_supervisor
    from streamops.lifecycle.supervisor import Supervisor, heartbeat_file
    from streamops.specfile import SpecFile

    settings = Settings(home=tmp_path / "home")
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        Supervisor(settings, {"app1": SPEC}, ledger).beat()
        beat = json.loads(heartbeat_file(settings).read_text())
        assert list(beat) == HEARTBEAT and (beat["apps"], beat["busy"], beat["notes"]) == (["app1"], [], {})
        path = tmp_path / "streams.yaml"
        path.write_text("apps:\n  a: {job: jobs.a, input_topics: [i], output_topic: o, changelog_topic: c, "
                        "dlq_topic: d}\n")
        sf = SpecFile(path)
        sf.refresh()
        Supervisor(settings, dict(sf.specs), ledger, spec_file=sf).beat()
        beat = json.loads(heartbeat_file(settings).read_text())
        assert list(beat) == [*HEARTBEAT, "spec"] and list(beat["spec"]) == SPEC_STATUS
        assert beat["spec"]["path"] == str(path) and beat["spec"]["error"] is None
        assert require_supervisor(settings).to_dict() == beat
        loaded = require_loaded(settings, "a", wait_s=0)
        assert (loaded.apps, loaded.loaded("a"), loaded.spec) == (["a"], True, beat["spec"])
    finally:
        ledger.close()


def test_a_heartbeat_of_a_supervisor_that_lists_no_apps_says_no_app_is_not_loaded(env, tmp_path) -> None:
    """Such a supervisor predates listing its apps: a deploy says to restart it, and the diagnosis
    of one that does not converge does not claim the app is not loaded."""
    from streamops.lifecycle.operations import diagnose
    from streamops.lifecycle.supervisor import SupervisorBeat

    _settings, ledger, ctx = env  # its heartbeat: {"heartbeat": now}
    said = diagnose(ctx, _pending(ledger, "deploy", 2))
    assert said.startswith("no driver was launched") and "has not loaded" not in said
    path = tmp_path / "elsewhere.json"
    assert SupervisorBeat.from_file(path) is None
    path.write_text("{not json")
    assert SupervisorBeat.from_file(path) is None
    path.write_text(json.dumps({"apps": ["a"]}))
    assert SupervisorBeat.from_file(path) is None  # not a heartbeat
    path.write_text(json.dumps({"heartbeat": 5.0, "future": 1}))
    beat = SupervisorBeat.from_file(path)
    assert beat == SupervisorBeat(heartbeat=5.0) and beat.apps is None and not beat.loaded("a")
    assert list(beat.to_dict()) == HEARTBEAT  # no spec file: no "spec"
