"""``streamops verify`` on a real broker + Spark checkpoint: a clean app passes; each injected fault
(changed changelog record, deleted output record, corrupted state file) fails with its category.

One app runs the job once for the whole module; each fault is undone before the next one.
The topic faults are verified in-process on the session's local Spark (fast); the clean run and
the corrupted state go through the CLI (a fresh JVM, so no state is cached between reads).
``page_stats`` (windows that expire) runs on a broker of its own: its output keys are compared
where the state explains them and checked for form where it does not, with exact counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer

from jobs.user_activity import UserActivity
from streamops.job import JsonSerde
from streamops.kafka.admin import client_config
from streamops.kafka.read import read_topic
from streamops.ledger.store import Ledger
from streamops.platform import manager
from streamops.spec import default_spec_path, get_app, load_job, load_specs
from streamops.state.oracle import fold_input, record_of
from streamops.state.verify.outputs import emitted
from streamops.state.verify.run import verify
from tests.fixtures.apps import AppHarness
from tests.fixtures.platform import on_cluster

APP = "user_activity"


@pytest.fixture(scope="module")
def app(platform_factory, spark_cluster):
    s = on_cluster(platform_factory("verify"), spark_cluster)
    manager.up(s, only=["kafka"])
    h = AppHarness(s, "local[2]")  # the checkpoint is what is verified; no need for the cluster's start-up
    try:
        h.produce(12_000, users=400, bad_ratio=0.01, seed=11)
        # several batches, so the topics hold more than one record per key
        h.run_to_end("--max-offsets-per-trigger", "4000")
        assert h.committed_batch() >= 2
        yield h
    finally:
        h.close()
        manager.down(s)


@pytest.fixture(scope="module")
def spec(app):
    return get_app(load_specs(default_spec_path(app.settings.repo)), APP)


@pytest.fixture(scope="module")
def state_spark(spark):
    _ = spark.streams.active  # the state reader needs the StateStoreCoordinator
    return spark


JSON = JsonSerde()


def produce(app: AppHarness, topic: str, key: str, value: bytes | None) -> None:
    p = Producer(client_config(app.settings.kafka_bootstrap, {"enable.idempotence": True}))
    p.produce(topic, key=key.encode(), value=value)
    assert p.flush(30) == 0


def run(app: AppHarness, spec, spark) -> dict:
    with_ledger = Ledger.open(app.settings.ledger_db_url)
    try:
        return verify(spec, app.settings, app.kafka, spark=spark, ledger=with_ledger, html=False).to_dict()
    finally:
        with_ledger.close()


def views(report: dict) -> dict[str, dict]:
    return {v["view"]: v for v in report["views"]}


def cli_verify(app: AppHarness) -> tuple[int, dict, str]:
    r = app.cli("verify", APP, "--json", timeout=600)
    assert r.stdout, r.stderr[-3000:]
    return r.returncode, json.loads(r.stdout), r.stderr


def test_clean_app_passes_through_the_cli(app: AppHarness) -> None:
    rc, report, err = cli_verify(app)
    assert rc == 0 and report["ok"], report
    assert report["batch_id"] == app.committed_batch() and report["categories"] == []
    assert report["state"]["keys"] == 400
    for v in report["views"]:
        assert (v["state_keys"], v["topic_keys"], v["missing"], v["extra"], v["different"]) == (400, 400, 0, 0, 0)
        assert v["records"] > 400  # several batches wrote each key
    suites = {s["suite"]: s for s in report["quality"]["suites"]}
    assert set(suites) == {"user_activity_state", "verify_result"}
    assert all(s["success"] and s["evaluated"] >= 5 for s in suites.values())
    html = Path(report["report_html"])
    assert html.is_file() and html.is_relative_to(app.settings.state_dir / "reports" / "verify" / APP)
    assert "verifying user_activity as of batch" in err and "%" in err  # progress on stderr under --json
    # its local Spark's start-up lines and warnings stay off the terminal (spark.local_log)
    assert not [line for line in err.splitlines()
                if any(s in line for s in ("log4j", "Setting default log level", " WARN "))], err[-3000:]
    # recorded without a lease, with the counts and the report path
    ledger = Ledger.open(app.settings.ledger_db_url)
    try:
        op = ledger.operations(APP, limit=1)[0]
        assert ledger.lease(APP) is None
    finally:
        ledger.close()
    assert (op["kind"], op["outcome"], op["id"]) == ("verify", "succeeded", report["operation_id"])
    assert op["after"]["ok"] is True and op["after"]["report_html"] == report["report_html"]
    assert op["after"]["views"]["changelog"]["topic_keys"] == 400


def test_changed_changelog_record_is_different(app: AppHarness, spec, state_spark) -> None:
    before = run(app, spec, state_spark)
    assert before["ok"], before["categories"]
    key = "u007"
    right = _state(app, spec, state_spark, key)  # the changelog holds the state (cents), not the profile
    wrong = {**right, "purchases": right["purchases"] + 1}
    produce(app, spec.changelog_topic, key, JSON.dumps(wrong))
    report = run(app, spec, state_spark)
    assert not report["ok"] and report["categories"] == ["changelog.different", "quality.result"]
    cl = views(report)["changelog"]
    assert (cl["missing"], cl["extra"], cl["different"]) == (0, 0, 1)
    assert cl["samples"]["different"] == [{"key": key, "expected": right, "actual": wrong}]
    assert views(report)["output"]["different"] == 0
    failed = next(s for s in report["quality"]["suites"] if s["check"] == "result")["failures"]
    assert [f["kwargs"]["column"] for f in failed] == ["different"]
    produce(app, spec.changelog_topic, key, JSON.dumps(right))  # undo: the right value again
    assert run(app, spec, state_spark)["ok"]


def test_deleted_output_record_is_missing(app: AppHarness, spec, state_spark) -> None:
    key = "u123"
    right = UserActivity().emit(key, _state(app, spec, state_spark, key))[key]
    produce(app, spec.output_topic, key, None)  # tombstone
    report = run(app, spec, state_spark)
    assert not report["ok"] and report["categories"] == ["output.missing", "quality.result"]
    out = views(report)["output"]
    assert (out["missing"], out["extra"], out["different"], out["topic_keys"]) == (1, 0, 0, 399)
    assert out["samples"]["missing"] == [key] and out["tombstones"] == 1
    assert views(report)["changelog"]["missing"] == 0
    produce(app, spec.output_topic, key, JSON.dumps(right))
    assert run(app, spec, state_spark)["ok"]


def test_corrupted_state_file_is_unreadable(app: AppHarness) -> None:
    version = app.committed_batch() + 1  # the state of batch N is version N + 1
    files = sorted((app.checkpoint / "state" / "0" / "0").glob(f"{version}.*"))
    assert files, list((app.checkpoint / "state" / "0" / "0").iterdir())
    saved = {f: f.read_bytes() for f in files}
    try:
        for f, data in saved.items():
            flipped = bytearray(data)
            flipped[len(data) // 2] ^= 0xFF
            f.write_bytes(bytes(flipped))
        r = app.cli("verify", APP, timeout=600)  # the text form, as a task log shows it
    finally:
        for f, data in saved.items():
            f.write_bytes(data)
    corrupt = [str(f.relative_to(app.checkpoint)) for f in files]
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"verify {APP}: FAILED (state_unreadable, state_checksum) as of batch" in r.stdout
    assert "UNREADABLE: [CANNOT_LOAD_STATE_STORE" in r.stdout
    assert all(f"checksum mismatch: {c}" in r.stdout for c in corrupt)
    ledger = Ledger.open(app.settings.ledger_db_url)
    try:
        op = ledger.operations(APP, limit=1)[0]
    finally:
        ledger.close()
    assert (op["kind"], op["outcome"]) == ("verify", "failed")
    assert "state_unreadable" in op["error"]
    after = op["after"]
    assert after["categories"] == ["state_unreadable", "state_checksum"]
    assert after["state"]["readable"] is False and after["state"]["corrupt_files"] == corrupt
    assert after["views"] == {} and after["report_html"] is None


def _state(app: AppHarness, spec, spark, key: str) -> dict:
    from streamops.state.store import read_states

    return read_states(spark, UserActivity, str(app.checkpoint), app.committed_batch())[key]


# -- a job that expires state ----------------------------------------------------------------------
PAGES = "page_stats"


@pytest.fixture(scope="module")
def page_app(platform_factory):
    """page_stats run to the end in small batches, so windows close and leave the state across batches."""
    s = platform_factory("verify-expiring")
    manager.up(s, only=["kafka"])
    h = AppHarness(s, "local[2]", PAGES)
    try:
        r = h.cli("produce", PAGES, "--events", "6000", "--seed", "3")
        assert r.returncode == 0, r.stderr[-3000:]
        h.run_to_end("--max-offsets-per-trigger", "1500")
        assert h.committed_batch() >= 3
        yield h
    finally:
        h.close()
        manager.down(s)


def test_expiring_job_compares_explained_keys_and_checks_expired_ones(page_app: AppHarness, state_spark) -> None:
    spec = get_app(load_specs(default_spec_path(page_app.settings.repo)), PAGES)
    job_cls = load_job(spec, page_app.settings.repo)
    # what the app must hold, from the input (check's fold): the open windows are what the state explains
    truth = fold_input(job_cls, (record_of(m) for t in spec.input_topics
                                 for m in read_topic(page_app.settings.kafka_bootstrap, t)))
    explained = emitted(job_cls, truth.states)
    expired = sorted(set(truth.output) - set(explained))
    assert explained and len(expired) > len(explained)

    rc, report, _err = _cli(page_app, "--json")
    assert rc == 0 and report["ok"], report["categories"]
    counts = {"compared": len(explained), "expired": len(expired), "malformed": 0, "extra": 0}
    assert report["output_keys"] == counts and report["nothing_to_compare"] is None
    out = views(report)["output"]
    assert (out["state_keys"], out["topic_keys"], out["compared"], out["expired"], out["malformed"]) == \
        (len(explained), len(truth.output), len(explained), len(expired), 0)
    assert any("checked for form only" in n for n in report["notes"])

    # one altered record of an open window, one malformed record of a closed one
    key = min(explained)
    right = truth.output[key]
    produce(page_app, spec.live_output_topic, key, JSON.dumps({**right, "views": right["views"] + 1}))
    closed = expired[len(expired) // 2]
    produce(page_app, spec.live_output_topic, closed, JSON.dumps({**truth.output[closed], "views": "many"}))
    r = page_app.cli("verify", PAGES, "--no-html", timeout=600)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"verify {PAGES}: FAILED (output.different, output.malformed, quality.result) as of batch" in r.stdout
    assert f"different: {key}  state " in r.stdout
    assert f"malformed: {closed}  field 'views' is a JSON string, the job emits number" in r.stdout
    assert f"output keys: {len(explained):,} compared, {len(expired) - 1:,} expired (well-formed), 1 malformed" \
        in r.stdout

    produce(page_app, spec.live_output_topic, key, JSON.dumps(right))  # undo both
    produce(page_app, spec.live_output_topic, closed, JSON.dumps(truth.output[closed]))
    repaired = run(page_app, spec, state_spark)
    assert repaired["ok"] and repaired["output_keys"] == counts, repaired["categories"]


def _cli(app: AppHarness, *args: str) -> tuple[int, dict, str]:
    r = app.cli("verify", app.app, *args, timeout=600)
    assert r.stdout, r.stderr[-3000:]
    return r.returncode, json.loads(r.stdout), r.stderr
