"""``observe.status``: an app's health and row (ledger, files), and ``streamops status`` without
services: ledger rows, checkpoint, progress log, supervisor notes, Kafka's lag, rendering. The CLI's
--json output is pinned byte for byte against what it printed before status moved here."""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.dir import AppDir
from streamops.app.topics import app_topic_specs
from streamops.cli.common import emit
from streamops.host.files import write_json
from streamops.ledger import Ledger, store
from streamops.lifecycle.supervisor import heartbeat_file
from streamops.observe import status as st_
from streamops.observe.status import app_status, render
from streamops.settings import Settings
from streamops.spark.driver import report
from streamops.spec import AppSpec
from tests.unit.observe.test_streams import T0, line

pytestmark = pytest.mark.unit

SPEC = AppSpec(name="app1", job="jobs.x", input_topics=("in",), output_topic="o", changelog_topic="c",
               dlq_topic="d")
ROW_SPEC = AppSpec(name="app1", job="jobs.orders", input_topics=["in"], output_topic="out")


@pytest.mark.parametrize(("desired", "observed", "age", "expected"), [
    (None, None, None, "not deployed"),
    ({"status": "running"}, {"status": "running"}, 3.0, "healthy"),
    ({"status": "running"}, {"status": "running"}, st_.STALE_AFTER_S + 1, "stale"),
    ({"status": "running"}, {"status": "crash-loop"}, 3.0, "crash-loop"),
    ({"status": "running"}, {"status": "crashed"}, 3.0, "failed"),
    ({"status": "running"}, {"status": "starting"}, 3.0, "starting"),
    ({"status": "running"}, None, None, "starting"),
    ({"status": "stopped"}, {"status": "stopped"}, 500.0, "stopped"),
    ({"status": "stopped"}, {"status": "crash-loop"}, 500.0, "crash-loop"),
])
def test_health(desired, observed, age, expected) -> None:
    assert st_.health(desired, observed, age) == expected


def test_the_row_of_a_running_app(tmp_path) -> None:
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    d = AppDir.of(settings, "app1")
    for i in range(3):
        d.append_progress(line(i, T0 + timedelta(seconds=2 * i), start={"in": {"0": 10 * i}},
                               end={"in": {"0": 10 * i + 10}}, latest={"in": {"0": 200}}, rate=95.0))
    ledger.set_desired("app1", status="running", parallelism=2, who="t")
    ledger.report_observed("app1", status="running", parallelism=2, executors=2, heartbeat_at=T0)
    ledger.add_savepoint(id="sp1", app="app1", batch_id=1, path="/x", sha256="0" * 64, bytes=10, offsets={},
                         created_at=T0)
    ledger.record("app1", "verify", {"batch_id": 2}, who="t", outcome="failed", error="changelog differs",
                  after={"categories": ["changelog.different"]})
    ledger.set_output_version("app1", "v2", who="t")
    d.write(d.heartbeat, {"status": "running", "ui_url": "http://h:4041",
                          "prometheus_url": report.prometheus_url("http://h:4041")})
    row = st_.stream_row(settings, ROW_SPEC, ledger, now=T0.timestamp() + 10)
    ledger.close()
    assert (row.health, row.desired_parallelism, row.executors, row.heartbeat_age_s) == ("healthy", 2, 2, 10.0)
    assert (row.last_batch_id, row.lag_records, row.lag_seconds) == (2, 170, round(170 / 95.0, 1))
    assert row.last_batch_age_s == 6.0 and (row.state_rows, row.state_bytes) == (7, 4096)
    assert row.newest_savepoint["id"] == "sp1" and row.output_topic == "out.v2"
    assert row.last_verify["outcome"] == "failed" and row.last_verify["report"]["categories"] == ["changelog.different"]
    # the driver's UI and its Prometheus endpoint (Spark's own metrics: session.session_conf)
    assert (row.spark_ui, row.spark_prometheus) == ("http://h:4041", "http://h:4041/metrics/prometheus/")


def test_status_reads_ledger_and_progress(tmp_path) -> None:
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    ledger.set_desired("app1", status="running", parallelism=2, who="cli:alice")
    ledger.report_observed("app1", status="running", pid=42, parallelism=2, executors=2, last_batch=7)
    op = ledger.begin("app1", "resize", {"parallelism": 3}, who="airflow:resize/run-9")
    progress = tmp_path / "apps" / "app1" / "batches.jsonl"
    progress.parent.mkdir(parents=True)
    progress.write_text("\n".join(json.dumps({"batch_id": i, "input_rows": 10 * i, "input_rows_per_s": 5.0,
                                              "processed_rows_per_s": 9.0, "state_rows": 3, "state_bytes": 99})
                                  for i in range(3)) + "\n{torn")

    st = app_status(settings, SPEC, ledger, detail=True, kafka_lag=False).cli_dict()
    assert (st["desired"]["parallelism"], st["observed"]["pid"], st["lease"]["operation_id"]) == (2, 42, op.id)
    assert st["checkpoint"]["last_committed_batch"] is None and st["lag"] is None
    assert st["last_batch"]["batch_id"] == 2  # the torn last line is skipped
    text = render(st)
    assert "app1: desired running x2, observed running x2 (executors 2, pid 42" in text
    # the heartbeat to the second (the ledger keeps microseconds)
    assert re.search(r"pid 42, heartbeat \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00\)$", text.splitlines()[0]), text
    assert re.search(rf"operation resize #{op.id} running since \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00, "
                     r"asked by airflow:resize/run-9$", text, re.MULTILINE), text
    assert "batch 2: 20 rows" in text
    ledger.close()


def test_status_of_a_never_deployed_app(tmp_path) -> None:
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    st = app_status(settings, SPEC, ledger, detail=True, kafka_lag=False).cli_dict()
    assert (st["desired"], st["observed"], st["operations"]) == (None, None, [])
    assert render(st).splitlines()[:2] == ["app1: not deployed, never seen running", "  no committed batch yet, lag ?"]
    assert AppDir(tmp_path / "nothing").last_progress() is None
    ledger.close()


# -- the CLI's output, pinned: these literals are what `streamops status` printed before ------------
def _every_part(tmp_path, monkeypatch) -> tuple[Settings, Ledger]:
    """An app with every part status shows, at a fixed clock: ledger rows and a lease, a committed
    batch, progress, a supervisor note and Kafka's end offsets."""
    clock = iter(T0 + timedelta(seconds=i) for i in range(1000))
    monkeypatch.setattr(store, "utcnow", lambda: next(clock))
    monkeypatch.setattr("streamops.kafka.admin.end_offsets", lambda _b, _t, timeout: {0: (0, 50), 1: (5, 20)})
    monkeypatch.setattr("streamops.kafka.admin.replication_drift", lambda _k, _topics: [])
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    ledger.set_desired("app1", status="running", parallelism=2, who="cli:alice")
    ledger.report_observed("app1", status="running", pid=42, parallelism=2, executors=2, last_batch=3,
                           heartbeat_at=T0)
    ledger.record("app1", "verify", {"batch_id": 2}, who="t", outcome="failed", error="changelog differs")
    ledger.record("app1", "deploy", {"parallelism": 2}, who="cli:alice", outcome="succeeded")
    ledger.begin("app1", "resize", {"parallelism": 3}, who="airflow:resize/run-9")
    ckpt = checkpoint_dir(settings, SPEC)
    for log in ("offsets", "commits"):
        (ckpt / log).mkdir(parents=True)
    (ckpt / "offsets" / "3").write_text('v1\n{"batchWatermarkMs":0}\n{"in":{"0":40,"1":12}}\n')
    (ckpt / "commits" / "3").write_text("v1\n{}")
    progress = tmp_path / "apps" / "app1" / "batches.jsonl"
    progress.parent.mkdir(parents=True)
    progress.write_text("\n".join(json.dumps({"batch_id": i, "input_rows": 10 * i, "input_rows_per_s": 5.0,
                                              "processed_rows_per_s": 9.0, "state_rows": 3, "state_bytes": 99})
                                  for i in range(4)) + "\n")
    write_json(heartbeat_file(settings), {"notes": {"app1": "restarts in 30 s (backoff)"}})
    return settings, ledger


def _expected(ckpt: str) -> dict:
    return {
        "app": "app1",
        "desired": {"app": "app1", "status": "running", "parallelism": 2,
                    "updated_at": datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC), "updated_by": "cli:alice",
                    "operation_id": None, "strategy": "restart"},
        "observed": {"app": "app1", "status": "running", "pid": 42, "host": None, "spark_app_id": None,
                     "parallelism": 2, "executors": 2, "last_batch": 3, "input_rate": None,
                     "processing_rate": None, "lag": None, "state_rows": None, "state_bytes": None,
                     "error": None, "heartbeat_at": datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)},
        "lease": {"app": "app1", "operation_id": 3, "kind": "resize", "holder": "airflow:resize/run-9",
                  "acquired_at": datetime(2026, 11, 27, 12, 0, 4, tzinfo=UTC),
                  "expires_at": datetime(2026, 11, 27, 12, 10, 4, tzinfo=UTC), "pid": None, "host": None},
        "checkpoint": {"path": ckpt, "last_committed_batch": 3, "committed_offsets": {"in": {"0": 40, "1": 12}}},
        "lag": {"in": {"0": 10, "1": 8}},
        "total_lag": 18,
        "last_batch": {"batch_id": 3, "input_rows": 30, "input_rows_per_s": 5.0, "processed_rows_per_s": 9.0,
                       "state_rows": 3, "state_bytes": 99},
        "operations": [
            {"id": 3, "app": "app1", "kind": "resize", "params": {"parallelism": 3},
             "requested_by": "airflow:resize/run-9", "started_at": datetime(2026, 11, 27, 12, 0, 4, tzinfo=UTC),
             "ended_at": None, "outcome": "running", "error": None, "before": None, "after": None, "journal": []},
            {"id": 2, "app": "app1", "kind": "deploy", "params": {"parallelism": 2}, "requested_by": "cli:alice",
             "started_at": datetime(2026, 11, 27, 12, 0, 3, tzinfo=UTC),
             "ended_at": datetime(2026, 11, 27, 12, 0, 3, tzinfo=UTC), "outcome": "succeeded", "error": None,
             "before": None, "after": None, "journal": None},
            {"id": 1, "app": "app1", "kind": "verify", "params": {"batch_id": 2}, "requested_by": "t",
             "started_at": datetime(2026, 11, 27, 12, 0, 2, tzinfo=UTC),
             "ended_at": datetime(2026, 11, 27, 12, 0, 2, tzinfo=UTC), "outcome": "failed",
             "error": "changelog differs", "before": None, "after": None, "journal": None},
        ],
        "notes": ["supervisor: restarts in 30 s (backoff)"],
    }


EXPECTED_TEXT = """\
app1: desired running x2, observed running x2 (executors 2, pid 42, heartbeat 2026-11-27 12:00:00+00:00)
  last committed batch 3, lag 18
    in: p0=10 p1=8
  batch 3: 30 rows, in 5/s, processed 9/s, state 3 rows / 99 bytes
  operation resize #3 running since 2026-11-27 12:00:04+00:00, asked by airflow:resize/run-9
  #3 resize running 2026-11-27 12:00:04 by airflow:resize/run-9
  #2 deploy succeeded 2026-11-27 12:00:03 by cli:alice
  #1 verify failed 2026-11-27 12:00:02 by t: changelog differs
  note: supervisor: restarts in 30 s (backoff)"""


def _printed(payload: dict, capsys) -> str:
    """What ``streamops status APP --json`` prints for ``payload`` (``cli.common.emit``)."""
    emit(argparse.Namespace(json=True), payload, "")
    return capsys.readouterr().out


@pytest.mark.parametrize("kafka_lag", [True, False])
def test_the_cli_json_and_text_are_byte_identical_to_before(tmp_path, monkeypatch, capsys, kafka_lag) -> None:
    settings, ledger = _every_part(tmp_path, monkeypatch)
    try:
        got = app_status(settings, SPEC, ledger, detail=True, kafka_lag=kafka_lag).cli_dict()
    finally:
        ledger.close()
    expected = _expected(str(tmp_path / "checkpoints" / "app1"))
    text = EXPECTED_TEXT
    if not kafka_lag:  # status --no-lag
        expected = {**expected, "lag": None, "total_lag": None}
        text = text.replace("lag 18\n    in: p0=10 p1=8", "lag ?")
    assert got == expected
    assert _printed(got, capsys) == _printed(expected, capsys)  # key order and default=str rendering too
    assert render(got) == text


def test_the_cli_json_of_an_unknown_app_with_the_broker_down(tmp_path, monkeypatch, capsys) -> None:
    def down(*_a, **_k):
        raise RuntimeError("broker down: no route\nsecond line")

    monkeypatch.setattr("streamops.kafka.admin.end_offsets", down)
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        got = app_status(settings, SPEC, ledger, detail=True).cli_dict()
    finally:
        ledger.close()
    expected = {"app": "app1", "desired": None, "observed": None, "lease": None,
                "checkpoint": {"path": str(tmp_path / "checkpoints" / "app1"), "last_committed_batch": None,
                               "committed_offsets": {}},
                "lag": None, "total_lag": None, "last_batch": None, "operations": [],
                "notes": ["lag unknown: broker down: no route"]}
    assert got == expected and _printed(got, capsys) == _printed(expected, capsys)
    assert render(got) == ("app1: not deployed, never seen running\n"
                           "  no committed batch yet, lag ?\n  note: lag unknown: broker down: no route")


def test_the_row_needs_no_detail_and_the_cli_dict_does(tmp_path) -> None:
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        status = app_status(settings, SPEC, ledger)
    finally:
        ledger.close()
    assert status.row.health == "not deployed" and status.checkpoint is None
    with pytest.raises(ValueError, match="detail=True"):
        status.cli_dict()


# -- the watermark of a job with stream time (issue 40) ---------------------------------------------
def test_the_status_of_an_app_with_stream_time_ends_with_its_watermark(tmp_path) -> None:
    from tests.unit.observe.test_watermark import HOLDERS, T0_MS, write_batch

    settings = Settings(home=tmp_path)
    for b, times in enumerate(HOLDERS):
        write_batch(checkpoint_dir(settings, SPEC), b, times)
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        status = app_status(settings, SPEC, ledger, detail=True, kafka_lag=False)
    finally:
        ledger.close()
    st = status.cli_dict()
    assert list(st) == ["app", "desired", "observed", "lease", "checkpoint", "lag", "total_lag", "last_batch",
                        "operations", "notes", "watermark"]  # the keys before stay where they were
    assert st["watermark"] == {
        "batch_id": 7, "watermark_ms": 500, "newest_ms": 9000, "lag_ms": 8500,
        "holder": {"topic": "product-prices", "partition": 0, "stream_time_ms": 500, "since_batch": 3,
                   "since_ms": T0_MS + 3000, "since_exact": True},
        "idle": []}
    assert status.row.watermark.holder.name == "product-prices[0]"  # the row the page and the metrics show
    assert render(st).splitlines()[2] == ("  watermark 1970-01-01T00:00:00.500Z (lags newest stream time by 8s), "
                                          "held by product-prices[0] since batch 3 (2026-11-28T20:00:03Z)")


def test_streamops_status_shows_the_watermark_for_apps_with_stream_time_only(tmp_path, monkeypatch, capsys) -> None:
    """The CLI itself, on the repo's apps: enriched_orders (a temporal join: stream time) with its
    price partition 2 quiet and partition 0 released by an idleness timeout; orders (none)."""
    from streamops.cli import main
    from streamops.spec import default_spec_path, load_specs
    from tests.unit.observe.test_watermark import T0_MS, write_batch

    monkeypatch.setenv("STREAMOPS_HOME", str(tmp_path))
    settings = Settings.from_env()
    specs = load_specs(default_spec_path(settings.repo))
    ckpt = checkpoint_dir(settings, specs["enriched_orders"])
    wm0 = int(datetime(2026, 11, 28, 20, 10, tzinfo=UTC).timestamp() * 1000)
    for b in range(3):
        write_batch(ckpt, b, {("orders-placed", 0): wm0 + 252_000, ("product-prices", 0): wm0,
                              ("product-prices", 2): wm0 + b}, {("product-prices", 0): T0_MS - 60_000})
    assert main(["status", "enriched_orders", "--no-lag", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["watermark"]
    assert got == {"batch_id": 2, "watermark_ms": wm0 + 2, "newest_ms": wm0 + 252_000, "lag_ms": 251_998,
                   "holder": {"topic": "product-prices", "partition": 2, "stream_time_ms": wm0 + 2,
                              "since_batch": 0, "since_ms": T0_MS, "since_exact": True},
                   "idle": [{"topic": "product-prices", "partition": 0, "since_ms": T0_MS - 60_000}]}
    assert main(["status", "enriched_orders", "--no-lag"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:4] == [("  watermark 2026-11-28T20:10:00.002Z (lags newest stream time by 4m11s), held by "
                          "product-prices[2] since batch 0 (2026-11-28T20:00:00Z)"),
                          "    idle: product-prices[0] since 2026-11-28T19:59:00Z"]
    assert main(["status", "orders", "--no-lag", "--json"]) == 0
    assert "watermark" not in json.loads(capsys.readouterr().out)
    assert main(["status", "orders", "--no-lag"]) == 0
    assert "watermark" not in capsys.readouterr().out


def test_a_topic_with_another_replication_is_a_note_of_the_status(tmp_path, monkeypatch) -> None:
    from streamops.kafka.replication import ReplicationDrift

    settings, ledger = _every_part(tmp_path, monkeypatch)
    asked: list[list[str]] = []
    monkeypatch.setattr("streamops.kafka.admin.replication_drift",
                        lambda _k, topics: asked.append(topics) or [ReplicationDrift(SPEC.changelog_topic, 1, 3)])
    st = app_status(settings, SPEC, ledger, detail=True).cli_dict()
    assert asked == [[t.name for t in app_topic_specs(SPEC).values()]]
    assert f"topic {SPEC.changelog_topic} has 1 replica(s) per partition where the platform creates 3 " \
           f"(STREAMOPS_TOPIC_REPLICATION)" in st["notes"][0]
    # --no-lag asks the broker nothing, so no replication either
    assert not [n for n in app_status(settings, SPEC, ledger, detail=True, kafka_lag=False).notes if "replica" in n]
    assert len(asked) == 1


def test_the_replication_notes_of_many_apps_ask_once_per_client_configuration(tmp_path, monkeypatch) -> None:
    """``platform status``: every app on the platform's client configuration in one metadata request,
    an app with its own client properties in another; a topic two apps name is asked once."""
    from streamops.kafka.replication import ReplicationDrift

    settings = Settings(home=tmp_path)
    twin = SPEC.model_copy(update={"name": "app2", "output_topic": "o2"})  # shares "in", "c" and "d"
    own = SPEC.model_copy(update={"name": "app3", "output_topic": "o3", "changelog_topic": "c3", "dlq_topic": "d3",
                                  "kafka": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                            "sasl.username": "u", "sasl.password": "${env:T_PW}"}})
    asked: list[tuple[str | None, list[str]]] = []
    monkeypatch.setattr("streamops.kafka.admin.replication_drift",
                        lambda k, topics: asked.append((k.properties.get("security.protocol"), topics))
                        or [ReplicationDrift(topics[-1], 1, 3)])
    monkeypatch.setenv("T_PW", "pw")
    bad = SPEC.model_copy(update={"name": "app4", "kafka": {"ssl.endpoint.identification.algorithm": ""}})
    notes = st_.replication_notes(settings, [SPEC, twin, own, bad])
    names = lambda spec: [t.name for t in app_topic_specs(spec).values()]
    shared = names(SPEC) + [t for t in names(twin) if t not in names(SPEC)]
    assert asked == [(None, shared), ("SASL_PLAINTEXT", names(own))]
    assert notes[0].startswith("replication unknown for app4: ") and "need security.protocol SSL" in notes[0]
    assert len(notes) == 3 and f"topic {shared[-1]} " in notes[1] and f"topic {names(own)[-1]} " in notes[2]
    assert "pw" not in "".join(notes)
