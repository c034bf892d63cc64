"""An Airflow backfill of the reprocess DAG over 3 daily intervals: 3 runs, each reprocessing its
interval into user-profiles.v2 and continuing the previous one's state, so v2 ends up equal to
the fold over the 3 days. Real scheduler, worker and triggerer (each task defers while its run's
driver runs); the reprocess job runs on local Spark.

Input records carry timestamps (producer-set) on three whole UTC days, the last one the day before
yesterday, so the data intervals select them by ``offsets_for_times``. The days follow the calendar:
fixed dates would pass the broker's 7-day retention one day (``log.retention.hours``, by a
segment's newest timestamp) and their records would be deleted under the test. Yesterday's
interval is left out: the scheduler's own run of the DAG covers it, and a backfill skips it.
``user-events`` on the shared broker is emptied before and after.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

from confluent_kafka import Producer

from jobs.demo.generator import generate_records
from streamops.kafka.admin import TopicSpec, client_config, recreate_topic
from streamops.kafka.read import latest_per_key, read_topic
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.spec import default_spec_path, get_app, load_job, load_specs
from streamops.state.oracle import fold_input, record_of
from tests.integration.airflow.test_airflow_api import _request, _token
from tests.integration.airflow.test_airflow_operations import _run

APP = "user_activity"
DAG_ID = f"streamops_reprocess__{APP}"
_TODAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
DAYS = [_TODAY - timedelta(days=n) for n in (4, 3, 2)]


def _produce_dated(bootstrap: str, spec) -> None:
    p = Producer(client_config(bootstrap, {"enable.idempotence": True, "partitioner": "murmur2_random"}))
    for i, day in enumerate(DAYS):
        noon = int((day + timedelta(hours=12)).timestamp() * 1000)
        for j, r in enumerate(generate_records(1_000, 300, seed=200 + i, bad_ratio=0.02)):
            p.produce(spec.input_topics[0], key=r.key, value=r.value, timestamp=noon + j)
    assert p.flush(60) == 0


def _create_backfill(s, token: str, body: dict) -> dict:
    """POST /api/v2/backfills as a client should: on SQLite (the embedded platform's Airflow DB)
    Airflow answers 503 "Database is locked" when another writer holds the lock, and says to
    retry or use PostgreSQL. CI saw it once on a loaded machine."""
    deadline = time.time() + 120
    while True:
        status, backfill = _request(s, "POST", "/api/v2/backfills", token, body)
        if status != 503 or time.time() > deadline:
            assert status == 200, (status, backfill)
            return backfill
        time.sleep(3)


def _why_failed(s, token: str, runs: list[dict], run_as: str = f"{APP}__reprocess_v2") -> str:
    """What an operator would look at when a backfill run failed: its task's log (each try, the
    triggerer's part included), the reprocess operations in the ledger and the run's driver log."""
    out = []
    for r in sorted(runs, key=lambda r: r["data_interval_start"]):
        if r["state"] == "success":
            continue
        base = f"/api/v2/dags/{DAG_ID}/dagRuns/{r['dag_run_id']}/taskInstances/reprocess"
        _, ti = _request(s, "GET", base, token)
        out.append(f"== {r['dag_run_id']}: run {r['state']}, task {ti and ti.get('state')} "
                   f"(try {ti and ti.get('try_number')})")
        for attempt in range(1, int((ti or {}).get("try_number") or 1) + 1):
            _, log = _request(s, "GET", f"{base}/logs/{attempt}?full_content=true", token)
            events = [e.get("event", e) if isinstance(e, dict) else e for e in (log or {}).get("content", [])]
            out.append(f"-- try {attempt}:\n" + "\n".join(str(e)[:600] for e in events[-25:]))
    ledger = Ledger.open(s.ledger_db_url)
    try:
        ops = ledger.operations(run_as, limit=10)
    finally:
        ledger.close()
    out.append("== ledger: " + json.dumps([{k: o.get(k) for k in ("id", "kind", "outcome", "error", "journal")}
                                           for o in ops], default=str)[-3000:])
    out.append(f"== driver log:\n{driver.log_tail(s, run_as, 40)}")
    return "\n".join(out)


def test_backfill_of_three_intervals_runs_three_chained_reprocess_runs(platform, kafka, spark_cluster,
                                                                        airflow_platform) -> None:
    s = airflow_platform
    spec = get_app(load_specs(default_spec_path(s.repo)), APP)
    events = TopicSpec(name=spec.input_topics[0], partitions=spec.input_partitions)
    recreate_topic(kafka, events)
    try:
        _produce_dated(kafka, spec)
        token = _token(s)
        deadline = time.time() + 180
        while _request(s, "GET", f"/api/v2/dags/{DAG_ID}", token)[0] != 200:
            assert time.time() < deadline, "the dag-processor never parsed the reprocess DAG"
            time.sleep(2)
        assert _request(s, "PATCH", f"/api/v2/dags/{DAG_ID}", token, {"is_paused": False})[0] == 200
        _create_backfill(s, token, {
            "dag_id": DAG_ID, "from_date": DAYS[0].isoformat(), "to_date": DAYS[-1].isoformat(),
            "run_backwards": False, "max_active_runs": 1, "reprocess_behavior": "none",
            "dag_run_conf": {"master": "local[2]", "output_version": "v2"}})

        deadline = time.time() + 900
        while True:
            _, body = _request(s, "GET", f"/api/v2/dags/{DAG_ID}/dagRuns?limit=50", token)
            runs = [r for r in body["dag_runs"] if r["run_type"] == "backfill"]
            if len(runs) == 3 and all(r["state"] in ("success", "failed") for r in runs):
                break
            assert time.time() < deadline, runs
            time.sleep(3)
        assert sorted((r["data_interval_start"][:10], r["state"]) for r in runs) == [
            (d.date().isoformat(), "success") for d in DAYS], _why_failed(s, token, runs)

        # each run reprocessed its own day; the 2nd and 3rd continued the state
        outs = []
        for r in sorted(runs, key=lambda r: r["data_interval_start"]):
            _, x = _request(s, "GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{r['dag_run_id']}/taskInstances/reprocess/"
                                      "xcomEntries/return_value", token)
            outs.append(x["value"] if isinstance(x["value"], dict) else json.loads(x["value"]))
        assert [o["records"] for o in outs] == [1_000, 1_000, 1_000]
        assert [o["continues"] for o in outs] == [False, True, True]
        expected = fold_input(load_job(spec, s.repo), map(record_of, read_topic(kafka, spec.input_topics[0])))
        assert latest_per_key(kafka, "user-profiles.v2") == expected.output and len(expected.output) > 0
        ledger = Ledger.open(s.ledger_db_url)
        try:
            ops = [o for o in ledger.operations(f"{APP}__reprocess_v2", limit=10) if o["kind"] == "reprocess"]
            assert len(ops) == 3 and all(o["outcome"] == "succeeded" for o in ops)
            assert all(o["requested_by"].startswith(f"airflow:{DAG_ID}/backfill") for o in ops), ops
            # each task deferred while its run's driver ran (no worker slot held), then resumed it
            assert all([x["step"] for x in o["journal"]] == ["launched", "handed-off"] for o in ops), ops

            # the reset DAG defaults to a dry run: the plan is the task's return value, nothing changes
            assert _request(s, "PATCH", "/api/v2/dags/streamops_reset", token, {"is_paused": False})[0] == 200
            plan, _seen = _run(s, token, "streamops_reset", {"app": APP, "target": "datetime",
                                                             "value": DAYS[1].isoformat()})
            assert plan["dry_run"] and plan["target"] == f"to-datetime {DAYS[1].isoformat()}"
            assert sum(o["to_process"] for o in plan["offsets"]) == 2_000  # days 2 and 3
            assert ledger.operations(APP) == []
        finally:
            ledger.close()
    finally:
        _request(s, "PATCH", f"/api/v2/dags/{DAG_ID}", _token(s), {"is_paused": True})
        recreate_topic(kafka, events)  # the other tests on the shared broker start from an empty input


def _trigger(s, token: str, conf: dict) -> str:
    status, run = _request(s, "POST", f"/api/v2/dags/{DAG_ID}/dagRuns", token, {"logical_date": None, "conf": conf})
    assert status == 200, (status, run)
    return run["dag_run_id"]


def _state(s, token: str, run_id: str) -> tuple[str, str | None]:
    """(the run's state, its task's state)."""
    _, run = _request(s, "GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}", token)
    _, ti = _request(s, "GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/reprocess", token)
    return run["state"], (ti or {}).get("state")


def test_a_run_whose_waiting_task_airflow_ended_is_taken_over_by_the_next_range(platform, kafka, spark_cluster,
                                                                                airflow_platform) -> None:
    """An operator marks a deferred reprocess task failed (or Airflow fails it: a lost worker,
    apache/airflow#72716) while its driver runs on. Its operation kept the version's lease until the
    run's deadline, an hour, and refused the next range; now the next range's task sees that the
    waiting task is gone, ends the operation by what the driver committed, and continues its state."""
    from streamops.host.process import Tracked

    s = airflow_platform
    spec = get_app(load_specs(default_spec_path(s.repo)), APP)
    events = TopicSpec(name=spec.input_topics[0], partitions=spec.input_partitions)
    recreate_topic(kafka, events)
    ledger = Ledger.open(s.ledger_db_url)
    run_as = f"{APP}__reprocess_v3"
    try:
        _produce_dated(kafka, spec)
        token = _token(s)
        assert _request(s, "PATCH", f"/api/v2/dags/{DAG_ID}", token, {"is_paused": False})[0] == 200
        first = _trigger(s, token, {"from": DAYS[0].isoformat(), "to": DAYS[1].isoformat(), "output_version": "v3",
                                    "master": "local[2]"})
        deadline = time.time() + 300
        while _state(s, token, first)[1] != "deferred":
            assert time.time() < deadline, _state(s, token, first)
            time.sleep(0.5)
        status, _ = _request(s, "PATCH", f"/api/v2/dags/{DAG_ID}/dagRuns/{first}/taskInstances/reprocess", token,
                             {"new_state": "failed"})
        assert status == 200
        (op,) = [o for o in ledger.operations(run_as, limit=5) if o["kind"] == "reprocess"]
        launched = next(x for x in op["journal"] if x["step"] == "launched")
        deadline = time.time() + 300
        while Tracked(launched["pid"], launched["ticks"]).running():  # the driver finishes its range alone
            assert time.time() < deadline, driver.log_tail(s, run_as, 30)
            time.sleep(1)
        deadline = time.time() + 60
        while _state(s, token, first) != ("failed", "failed"):
            assert time.time() < deadline, _state(s, token, first)
            time.sleep(1)
        assert ledger.get_operation(op["id"])["outcome"] == "running"  # nobody is left to end it

        second = _trigger(s, token, {"from": DAYS[1].isoformat(), "to": DAYS[2].isoformat(), "output_version": "v3",
                                     "master": "local[2]"})
        deadline = time.time() + 600
        while _state(s, token, second)[0] not in ("success", "failed"):
            assert time.time() < deadline, _state(s, token, second)
            time.sleep(2)
        assert _state(s, token, second)[0] == "success", _why_failed(s, token, [{
            "dag_run_id": second, "state": "failed", "data_interval_start": ""}], run_as)
        _, x = _request(s, "GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{second}/taskInstances/reprocess/xcomEntries/"
                                  "return_value", token)
        out = x["value"] if isinstance(x["value"], dict) else json.loads(x["value"])
        assert (out["records"], out["continues"]) == (1_000, True)  # the first range's state goes on

        settled = ledger.get_operation(op["id"])
        assert settled["outcome"] == "succeeded" and settled["after"]["committed"] == 1_000
        assert settled["journal"][-1]["step"] == "settled"
        assert settled["journal"][-1]["why"] == (f"the task that waited for it (airflow:{DAG_ID}/{first}/reprocess) "
                                                 "is failed")
        end = int(DAYS[2].timestamp() * 1000)
        expected = fold_input(load_job(spec, s.repo), map(record_of, (
            m for m in read_topic(kafka, spec.input_topics[0]) if m.timestamp()[1] < end)))
        assert latest_per_key(kafka, "user-profiles.v3") == expected.output and len(expected.output) > 0
    finally:
        ledger.close()
        _request(s, "PATCH", f"/api/v2/dags/{DAG_ID}", _token(s), {"is_paused": True})
        recreate_topic(kafka, events)
