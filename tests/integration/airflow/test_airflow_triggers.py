"""What runs in the triggerer (issue 25), on one deployed app. Assets: an app's output topic and
DLQ topic are Airflow assets with watchers; a batch commit produces an output asset event, which
runs the DAG scheduled on it; a record reaching the DLQ runs ``streamops_dlq_summary`` (the Kafka
watcher), whose digests count each DLQ record once. Long operations: a
stop-first rebuild defers while the app stops and while it starts. Real Airflow (auth on,
PostgreSQL), supervisor, broker and Spark cluster."""

from __future__ import annotations

import itertools
import json
import time

import pytest
from confluent_kafka import Producer

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.dir import AppDir
from streamops.app.topics import H_REASON, H_SOURCE_OFFSET, H_SOURCE_PARTITION
from streamops.checkpoints import layout
from streamops.kafka.admin import end_offsets
from streamops.kafka.read import read_topic
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.observe.streams import point
from streamops.spec import default_spec_path, get_app, load_specs
from tests.fixtures.apps import AppHarness
from tests.fixtures.apps import until as _until
from tests.integration.airflow.test_airflow_api import _request, _token
from tests.integration.airflow.test_airflow_operations import _run

APP = "orders"
OUTPUT_DAG = "streamops_output_batches"
DLQ_DAG = "streamops_dlq_summary"


def _asset_runs(s, token: str, dag_id: str, *, ended: bool = True) -> list[dict]:
    runs = _request(s, "GET", f"/api/v2/dags/{dag_id}/dagRuns?order_by=-run_after&limit=50", token)[1]["dag_runs"]
    return [r for r in runs if r["run_type"] == "asset_triggered" and (not ended or r["state"] in ("success", "failed"))]


def _xcom(s, token: str, dag_id: str, run: dict, task_id: str):
    if run["state"] != "success":
        log = _request(s, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances/{task_id}/logs/1"
                                 "?full_content=true", token)[1]
        raise AssertionError(f"{dag_id} {run['dag_run_id']}: {run['state']}\n" + "\n".join(
            f"{e.get('event')} {e.get('error_detail') or ''}" for e in (log or {}).get("content", [])
            if isinstance(e, dict))[-6000:])
    return _request(s, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances/{task_id}/"
                              "xcomEntries/return_value", token)[1]["value"]


def _upstream_events(s, token: str, dag_id: str, run: dict) -> list[dict]:
    return _request(s, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}/upstreamAssetEvents",
                    token)[1]["asset_events"]


#: another app, whose DLQ is watched beside orders' (in the suite every app's is)
OTHER = "sessions"
#: ``orders`` once deployed by the first test of the module that needs it: (settings, token, harness)
_DEPLOYED: list[tuple] = []


@pytest.fixture
def deployed(platform, kafka, spark_cluster, airflow_platform):
    """``orders`` deployed through its DAG, once for the module (``airflow_platform`` is
    function-scoped: it is started again if a test before stopped it)."""
    s = platform.ensure("supervisor")
    if not _DEPLOYED:
        app = AppHarness(s, s.spark_master_url, app=APP)
        r = app.cli("produce", APP, "--events", "2000", "--seed", "5")
        assert r.returncode == 0, r.stderr[-2000:]
        _DEPLOYED.append((s, None, app))
        _run(s, _token(s), "streamops_deploy", {"app": APP, "parallelism": 1}, app=APP)
    s, _t, app = _DEPLOYED[0]
    return s, _token(s), app


@pytest.fixture(scope="module", autouse=True)
def _stopped_after_the_module():
    """Stopped as an operator stops it (desired stopped), or the supervisor would launch it again
    on the shared cluster for the tests after this module."""
    yield
    if _DEPLOYED:
        s, _t, app = _DEPLOYED.pop()
        app.cli("stop", APP, "--now", timeout=180)
        driver.stop(s, APP, now=True)


def test_a_batch_commit_and_a_dlq_record_each_start_a_dag_run(deployed) -> None:
    s, token, app = deployed
    spec = get_app(load_specs(default_spec_path(s.repo)), APP)
    try:
        # -- the DLQ: three records the job cannot parse, each with its source coordinates
        producer = Producer({"bootstrap.servers": s.kafka_bootstrap})
        sent = []
        for i in range(3):
            producer.produce(spec.input_topics[0], key=f"bad-{i}".encode(), value=b"{not json",
                             partition=i % 2, on_delivery=lambda err, m: sent.append((m.partition(), m.offset())))
        assert producer.flush(30) == 0 and len(sent) == 3

        def digests_so_far() -> list[dict] | None:
            """The orders digests of the asset-triggered runs, oldest first, once they cover the three."""
            out = []
            for run in reversed(_asset_runs(s, token, DLQ_DAG)):
                out += [d for d in _xcom(s, token, DLQ_DAG, run, "summarize") if d["app"] == APP]
            seen = {(int(r[H_SOURCE_PARTITION]), int(r[H_SOURCE_OFFSET])) for r in _dlq_headers(s, spec, out)}
            return out if set(sent) <= seen else None

        watched = _until(f"{OTHER}'s DLQ asset is watched too", lambda: len([a["name"] for a in (_request(
            s, "GET", "/api/v2/assets?name_pattern=.dlq", token)[1] or {}).get("assets", []) if a.get("watchers")
            and a["name"] in (f"streamops.{APP}.dlq", f"streamops.{OTHER}.dlq")]) == 2, 120, 3)
        assert watched
        try:
            digests = _until("a DLQ summary run counted the three records", digests_so_far, 300, 3)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{_diagnosis(s, token, f'streamops.{APP}.dlq')}") from None
        # the digests cut the DLQ into consecutive ranges: every record in them counted once, by reason
        by_part: dict[int, list[tuple[int, int]]] = {}
        for d in digests:
            for p, (lo, hi) in d["ranges"].items():
                by_part.setdefault(int(p), []).append((lo, hi))
        for p, ranges in by_part.items():
            assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges)), (p, ranges)
        records = _dlq_headers(s, spec, digests)
        reasons: dict[str, int] = {}
        for h in records:
            reasons[h[H_REASON]] = reasons.get(h[H_REASON], 0) + 1
        assert sum(d["records"] for d in digests) == len(records)
        summed: dict[str, int] = {}
        for d in digests:
            for reason, n in d["by_reason"].items():
                summed[reason] = summed.get(reason, 0) + n
        assert summed == reasons
        cursor = AppDir.of(s, APP).read(AppDir.of(s, APP).dlq_cursor)["offsets"]
        assert all(int(cursor[str(p)]) >= ranges[-1][1] for p, ranges in by_part.items())
        # the run's triggering event is the watcher's: the record's coordinates and reason
        last_run = _asset_runs(s, token, DLQ_DAG)[0]
        evs = _upstream_events(s, token, DLQ_DAG, last_run)
        assert evs and {e["name"] for e in evs} == {f"streamops.{APP}.dlq"}
        payload = evs[-1]["extra"]["payload"]
        assert payload["app"] == APP and payload["topic"] == spec.dlq_topic and payload["records"] >= 1

        # -- the output: unpausing a DAG scheduled on the output asset starts its watcher
        assert _request(s, "PATCH", f"/api/v2/dags/{OUTPUT_DAG}", token, {"is_paused": False})[0] == 200
        t0 = time.time()

        def output_run() -> dict | None:
            runs = _asset_runs(s, token, OUTPUT_DAG)
            if not runs:  # keep batches committing
                app.cli("produce", APP, "--events", "50", "--seed", str(int(time.time())))
            return runs[-1] if runs else None

        try:
            run = _until("a batch commit ran the output DAG", output_run, 240, 5)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{_diagnosis(s, token, f'streamops.{APP}.output')}") from None
        payloads = _xcom(s, token, OUTPUT_DAG, run, "batches")
        assert [p["app"] for p in payloads] == [APP] * len(payloads) and payloads
        p = payloads[0]
        # the batches it names committed after the watcher started, and are in the checkpoint
        assert p["committed_at_ms"] >= t0 * 1000 - 60_000 and p["first_batch"] <= p["last_batch"]
        assert p["last_batch"] <= layout.last_committed_batch(checkpoint_dir(s, spec))
        lines = [json.loads(x) for x in AppDir.of(s, APP).progress.read_text().splitlines()]
        assert p["input_records"] == sum(x["input_rows"] for x in lines if x.get("batch_id") is not None and
                                         (p["after_ms"] or 0) < point(x).at_ms <= p["committed_at_ms"])
        evs = _upstream_events(s, token, OUTPUT_DAG, run)
        assert {e["name"] for e in evs} == {f"streamops.{APP}.output"}
        assert [e["extra"]["payload"] for e in evs] == payloads
    finally:
        _request(s, "PATCH", f"/api/v2/dags/{OUTPUT_DAG}", token, {"is_paused": True})


def test_a_stop_first_rebuild_holds_no_worker_slot_while_the_app_stops_and_starts(deployed) -> None:
    """The rebuild task defers (``lifecycle.waits``) while the running app stops and again while it
    starts; the operation is one ledger entry, resumed between the waits, and the app is exact after
    it. (A reprocess task deferring while its run's driver runs: test_airflow_backfill.)"""
    s, token, app = deployed
    ledger = Ledger.open(s.ledger_db_url)
    try:
        out, seen = _run(s, token, "streamops_rebuild_state", {"app": APP, "stop_first": True, "dry_run": False},
                         app=APP)
        assert "deferred" in seen, seen
        op = ledger.get_operation(out["operation_id"])
        steps = [x["step"] for x in op["journal"]]
        assert op["outcome"] == "succeeded", op
        assert steps[:2] == ["stop", "handed-off"] and steps[-2:] == ["restart", "handed-off"], steps
        assert steps.count("stop") == 1 and "install" in steps  # resumed, not begun again
        assert op["after"]["keys"] == out["changelog_keys"] and op["requested_by"].startswith(
            "airflow:streamops_rebuild_state/")
        assert ledger.lease(APP) is None and (ledger.observed(APP) or {}).get("status") == "running"
        report = app.check()
        assert report["ok"], report
    finally:
        ledger.close()


def _dlq_headers(s, spec, digests: list[dict]) -> list[dict[str, str]]:
    """The headers of the DLQ records in the digests' ranges, read from the topic itself."""
    out = []
    spans: dict[int, tuple[int, int]] = {}
    for d in digests:
        for p, (lo, hi) in d["ranges"].items():
            a, b = spans.get(int(p), (lo, hi))
            spans[int(p)] = (min(a, lo), max(b, hi))
    if not spans:
        return out
    ends = end_offsets(s.kafka_bootstrap, spec.dlq_topic)
    for m in read_topic(s.kafka_bootstrap, spec.dlq_topic, from_offsets={p: lo for p, (lo, _) in spans.items()},
                        end={p: spans[p][1] if p in spans else lo for p, (lo, _hi) in ends.items()},
                        past_open_transactions=True):
        out.append({k: (v or b"").decode() for k, v in (m.headers() or [])})
    return out



def _diagnosis(s, token: str, asset: str) -> str:
    """For a failure's message: the asset's watcher, what the triggerer logged of it, the DAG runs
    the watchers started, and the watchers' consumer group."""
    from streamops.platform import manager

    assets = _request(s, "GET", f"/api/v2/assets?name_pattern={asset}", token)[1] or {}
    ids = [w["trigger_id"] for a in assets.get("assets", []) for w in a.get("watchers", [])]
    trig = manager.log_path(s, "airflow-triggerer")
    lines = [x[:300] for x in (trig.read_text().splitlines() if trig.exists() else [])
             if any(f"ID {i}" in x or f"ID {i}'" in x for i in ids)]
    runs = {d: [(r["run_type"], r["state"], r["run_after"]) for r in (_request(
        s, "GET", f"/api/v2/dags/{d}/dagRuns?order_by=-run_after&limit=10", token)[1] or {}).get("dag_runs", [])]
        for d in (DLQ_DAG, OUTPUT_DAG)}
    try:
        from confluent_kafka.admin import AdminClient

        desc = AdminClient({"bootstrap.servers": s.kafka_bootstrap}).describe_consumer_groups(
            ["streamops-asset-watchers"])["streamops-asset-watchers"].result(10)
        group_text = f"{desc.state} members={[(m.client_id, [t.topic for t in m.assignment.topic_partitions]) for m in desc.members]}"
    except Exception as e:  # noqa: BLE001 - a diagnosis
        group_text = f"(could not describe: {e})"
    return (f"asset: {json.dumps(assets)[:1500]}\nruns: {runs}\ngroup: {group_text}\n"
            f"triggerer on {ids}:\n" + "\n".join(lines[-40:]))


def _lines(path, needle: str) -> str:
    """The log's lines about the triggers (the watcher's among them), for a failure's message."""
    if not path.exists():
        return "(no log)"
    return "\n".join(x[:400] for x in path.read_text().splitlines() if (needle in x or "BatchCommit" in x
                     or "batches" in x) and "UNKNOWN_TOPIC" not in x)[-8000:]
