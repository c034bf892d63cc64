"""The ledger on a real SQLite file: migrations, leases (also across processes), audit rows."""

from __future__ import annotations

import multiprocessing as mp
import time
from datetime import timedelta

import pytest
from sqlalchemy import inspect

from streamops.ledger import Ledger, OperationInProgress
from streamops.ledger.store import requested_by, utcnow


@pytest.fixture
def url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'state' / 'ledger.db'}"


@pytest.fixture
def ledger(url):
    led = Ledger.open(url)
    yield led
    led.close()


def test_migrations_create_every_table_and_are_idempotent(url) -> None:
    led = Ledger.open(url)
    led.migrate()  # second time: nothing to do
    tables = set(inspect(led.engine).get_table_names())
    assert {"desired_state", "observed_state", "operations", "leases", "savepoints", "alembic_version"} <= tables
    led.close()


def test_second_operation_is_refused_with_who_and_since_and_changes_nothing(ledger) -> None:
    op = ledger.begin("app1", "resize", {"parallelism": 2}, who="airflow:resize/run-1",
                      before={"parallelism": 1})
    with pytest.raises(OperationInProgress) as err:
        ledger.begin("app1", "deploy", who="cli:alice")
    msg = str(err.value)
    assert f"operation resize #{op.id} running since" in msg and "asked by airflow:resize/run-1" in msg
    assert err.value.exit_code == 1
    lease = ledger.lease("app1")
    assert (lease["operation_id"], lease["holder"]) == (op.id, "airflow:resize/run-1")
    refused = ledger.operations("app1")[0]
    assert (refused["kind"], refused["outcome"], refused["requested_by"]) == ("deploy", "refused", "cli:alice")
    assert refused["error"] == msg
    # another app is independent
    other = ledger.begin("app2", "deploy", who="cli:bob")
    ledger.finish(other, "succeeded")

    ledger.finish(op, "succeeded", after={"parallelism": 2})
    assert ledger.lease("app1") is None
    done = ledger.get_operation(op.id)
    assert (done["outcome"], done["before"], done["after"], done["params"]) == (
        "succeeded", {"parallelism": 1}, {"parallelism": 2}, {"parallelism": 2})
    assert done["ended_at"] >= done["started_at"]
    ledger.finish(ledger.begin("app1", "deploy", who="cli:alice"), "succeeded")


def test_an_expired_lease_is_taken_over(ledger) -> None:
    stale = ledger.begin("app1", "deploy", who="cli:crashed", ttl_s=-1)
    op = ledger.begin("app1", "stop", who="cli:alice")
    assert ledger.lease("app1")["operation_id"] == op.id
    ledger.finish(stale, "failed", error="holder died")  # a late finish must not free the new lease
    assert ledger.lease("app1")["operation_id"] == op.id


def test_renew_extends_the_lease(ledger) -> None:
    op = ledger.begin("app1", "deploy", ttl_s=1)
    before = ledger.lease("app1")["expires_at"]
    ledger.renew(op, ttl_s=600)
    assert ledger.lease("app1")["expires_at"] > before + timedelta(seconds=500)


def test_operation_context_records_failure_and_releases(ledger) -> None:
    with pytest.raises(RuntimeError), ledger.operation("app1", "savepoint", who="cli:alice") as rec:
        raise RuntimeError("disk full")
    row = ledger.get_operation(rec.id)
    assert (row["outcome"], row["error"]) == ("failed", "RuntimeError: disk full")
    assert ledger.lease("app1") is None
    with ledger.operation("app1", "savepoint") as rec2:
        rec2.after = {"savepoint": "sp-1"}
    assert ledger.get_operation(rec2.id)["after"] == {"savepoint": "sp-1"}


def _race(url: str, i: int, barrier, results) -> None:
    led = Ledger(url)
    barrier.wait()
    try:
        led.begin("app1", "resize", who=f"p{i}")
        results.put(("won", i))
    except OperationInProgress:
        results.put(("refused", i))


def test_exactly_one_of_concurrent_processes_gets_the_lease(ledger, url) -> None:
    ctx = mp.get_context("spawn")
    n = 4
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(url, i, barrier, results)) for i in range(n)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in range(n)]
    for p in procs:
        p.join(timeout=30)
    winners = [i for kind, i in outcomes if kind == "won"]
    assert len(winners) == 1
    assert ledger.lease("app1")["holder"] == f"p{winners[0]}"
    assert sorted(r["outcome"] for r in ledger.operations("app1")) == ["refused"] * (n - 1) + ["running"]


def test_desired_and_observed_state_upserts(ledger) -> None:
    assert ledger.desired("app1") is None
    ledger.set_desired("app1", status="running", parallelism=2, who="cli:alice")
    ledger.set_desired("app1", status="running", parallelism=3, who="cli:bob")
    d = ledger.desired("app1")
    assert (d["status"], d["parallelism"], d["updated_by"]) == ("running", 3, "cli:bob")
    with pytest.raises(ValueError, match="running or stopped"):
        ledger.set_desired("app1", status="paused", parallelism=1)

    ledger.report_observed("app1", status="running", pid=123, executors=2, lag={"t": {"0": 5}})
    ledger.report_observed("app1", last_batch=7)
    o = ledger.observed("app1")
    assert (o["status"], o["pid"], o["executors"], o["last_batch"], o["lag"]) == ("running", 123, 2, 7, {"t": {"0": 5}})
    assert abs((utcnow() - o["heartbeat_at"]).total_seconds()) < 60
    with pytest.raises(ValueError, match="unknown observed fields"):
        ledger.report_observed("app1", colour="blue")


def test_savepoints_newest_first_and_delete(ledger) -> None:
    t0 = utcnow()
    for i in range(3):
        ledger.add_savepoint(id=f"sp-{i}", app="app1", batch_id=10 * i, path=f"/x/{i}", sha256="0" * 64,
                             bytes=100, offsets={"t": {"0": i}}, created_at=t0 + timedelta(seconds=i))
    assert [s["id"] for s in ledger.savepoints("app1")] == ["sp-2", "sp-1", "sp-0"]
    ledger.delete_savepoint("sp-1")
    assert [s["id"] for s in ledger.savepoints("app1")] == ["sp-2", "sp-0"]
    assert ledger.savepoints("app2") == []


def test_requested_by(monkeypatch) -> None:
    assert requested_by("airflow:x/y") == "airflow:x/y"
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "streamops_resize")
    monkeypatch.setenv("AIRFLOW_CTX_DAG_RUN_ID", "manual__2026")
    assert requested_by() == "airflow:streamops_resize/manual__2026"
    monkeypatch.delenv("AIRFLOW_CTX_DAG_RUN_ID")
    assert requested_by().startswith("cli:")


def test_a_long_operation_keeps_its_lease_for_as_long_as_it_runs(ledger) -> None:
    with ledger.operation("app", "reprocess", who="test:long", ttl_s=1.5):
        time.sleep(4.0)  # more than twice the lease's time to live
        with pytest.raises(OperationInProgress, match="operation reprocess"):
            ledger.begin("app", "reset", who="test:second")
    assert ledger.lease("app") is None  # released at the end
    op = ledger.begin("app", "reset", who="test:after")
    ledger.finish(op, "succeeded")


def _hold_and_die(url: str, ready) -> None:
    """A process that takes an operation's lease, journals a step and is killed while it works."""
    import os
    import signal

    led = Ledger.open(url)
    with led.operation("app1", "reset", {"to_earliest": True}, who="cli:killed") as rec:
        led.step(rec.op, "stop", was_running=False, parallelism=1)
        ready.set()
        os.kill(os.getpid(), signal.SIGKILL)


def test_journal_steps_are_kept_in_order_and_survive_a_failure(ledger) -> None:
    with pytest.raises(RuntimeError), ledger.operation("app1", "restore", who="cli:alice") as rec:
        ledger.step(rec.op, "stop", was_running=True, parallelism=2)
        ledger.step(rec.op, "set-aside", path="/x/aside")
        raise RuntimeError("the restart timed out")
    op = ledger.get_operation(rec.id)
    assert op["outcome"] == "failed" and [s["step"] for s in op["journal"]] == ["stop", "set-aside"]
    assert op["journal"][0]["was_running"] is True and op["journal"][1]["path"] == "/x/aside"
    assert ledger.get_operation(ledger.begin("app2", "deploy").id)["journal"] == []


def test_a_killed_holders_lease_is_released_at_once_and_its_operation_failed(ledger, url) -> None:
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=_hold_and_die, args=(url, ready))
    p.start()
    p.join(60)
    assert ready.is_set() and p.exitcode == -9
    held = ledger.lease("app1")
    assert held is not None and held["pid"] == p.pid  # a lease of 600 s, its holder gone
    op = ledger.begin("app1", "undo", who="cli:bob")  # not refused: the holder is known dead
    killed = ledger.get_operation(held["operation_id"])
    assert killed["outcome"] == "failed" and killed["ended_at"] is not None
    assert killed["error"].startswith(f"abandoned: its process {p.pid} exited") and "steps done: stop" in killed["error"]
    ledger.finish(op, "succeeded")


def test_a_live_holders_lease_is_not_released(ledger) -> None:
    import os

    op = ledger.begin("app1", "reset", who="cli:alice", pid=os.getpid())  # this process: alive
    with pytest.raises(OperationInProgress):
        ledger.begin("app1", "undo", who="cli:bob")
    ledger.release_abandoned("app1")
    assert ledger.lease("app1")["operation_id"] == op.id
    ledger.finish(op, "succeeded")


def test_ledgers_opened_by_many_threads_at_once_all_migrate(tmp_path) -> None:
    """Alembic's environment is module-global: without the lock, threads opening ledgers at the same
    time (the chaos run's fault threads) failed with KeyError: 'config'."""
    import threading

    from streamops.ledger import Ledger

    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def open_one(i: int) -> None:
        try:
            start.wait()
            for j in range(3):
                Ledger.open(f"sqlite:///{tmp_path}/ledger-{i}-{j}.db").close()
        except BaseException as exc:  # noqa: BLE001 (collected for the assert)
            errors.append(exc)

    threads = [threading.Thread(target=open_one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert len(list(tmp_path.glob("ledger-*.db"))) == 24
