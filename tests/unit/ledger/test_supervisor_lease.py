"""The ledger's supervisor lease on a real SQLite file: one holder, a successor after expiry or at
once when the holder is gone from this host, a lost lease noticed by its old holder, the takes in
the operations log; the supervise command refused (``--once``) or waiting (the loop) meanwhile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import update

from streamops.ledger import Ledger
from streamops.ledger import schema as t
from streamops.ledger import supervisor_lease as sl
from streamops.ledger.store import _db_time, utcnow
from streamops.lifecycle.supervisor import (
    Supervisor,
    SupervisorLeaseHeld,
    SupervisorLeaseLost,
    heartbeat_file,
    renew_lease,
    take_lease,
)
from streamops.settings import Settings


@pytest.fixture
def ledger(tmp_path):
    led = Ledger.open(f"sqlite:///{tmp_path / 'state' / 'ledger.db'}")
    yield led
    led.close()


@pytest.fixture
def other():
    """Another live process on this host: a holder that still runs."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def _set(ledger: Ledger, **values) -> None:
    with ledger.engine.begin() as conn:
        conn.execute(update(t.supervisor_lease).values(**values))


def test_the_first_takes_it_a_live_holder_keeps_it_and_every_take_is_logged(ledger, other) -> None:
    got = sl.take(ledger, 30, pid=other.pid)
    assert isinstance(got, sl.Taken) and (got.reason, got.previous) == ("free", None)
    assert (got.lease.term, got.lease.pid, got.lease.holder) == (1, other.pid, sl.holder_name(other.pid))
    held = sl.take(ledger, 30)  # this process: the holder runs, the lease has not expired
    assert isinstance(held, sl.Held) and held.lease.term == 1
    with pytest.raises(SupervisorLeaseHeld, match=rf"another supervisor holds the lease: .*:{other.pid} \(term 1"):
        take_lease(ledger, 30)
    ops = ledger.operations(sl.PLATFORM)
    assert [(o["kind"], o["params"]["term"], o["params"]["reason"], o["requested_by"]) for o in ops] == [
        ("supervisor-lease", 1, "free", sl.holder_name(other.pid))]


def test_an_expired_lease_passes_on_and_its_old_holder_learns_it_lost_it(ledger, other) -> None:
    first = sl.take(ledger, 30, pid=other.pid).lease
    _set(ledger, expires_at=_db_time(utcnow() - timedelta(seconds=1)))
    got = sl.take(ledger, 30)
    assert isinstance(got, sl.Taken) and got.reason == "expired" and got.lease.term == 2
    assert got.previous.holder == first.holder and got.lease.pid == os.getpid()
    assert sl.renew(ledger, first) is None  # its term moved on: the old holder must stop acting
    with pytest.raises(SupervisorLeaseLost, match=rf"term 1\) is no longer this supervisor's: .*:{os.getpid()} \(term 2"):
        renew_lease(ledger, first, 30)
    renewed = sl.renew(ledger, got.lease, 60)
    assert renewed is not None and renewed.expires_at > got.lease.expires_at
    assert sl.current(ledger).expires_at == renewed.expires_at
    ops = ledger.operations(sl.PLATFORM)
    assert ops[0]["params"] == {"term": 2, "reason": "expired", "previous": first.holder, "previous_term": 1}


def test_a_holder_gone_from_this_host_is_replaced_at_once_but_not_one_on_another_host(ledger) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    sl.take(ledger, 3600, pid=gone.pid)
    got = sl.take(ledger, 30)
    assert isinstance(got, sl.Taken) and got.reason == "holder gone" and got.lease.term == 2
    # the same pid on another machine: nothing here can tell whether it runs, so only expiry frees it
    _set(ledger, host="elsewhere", holder="elsewhere:1", pid=1, term=7,
         expires_at=_db_time(utcnow() + timedelta(seconds=3600)))
    held = sl.take(ledger, 30)
    assert isinstance(held, sl.Held) and held.lease.holder == "elsewhere:1"


def test_a_release_hands_it_on_at_once_and_a_waiting_supervisor_takes_it(ledger, other) -> None:
    first = sl.take(ledger, 3600, pid=other.pid).lease
    stop = threading.Event()
    took: list = []
    waiter = threading.Thread(target=lambda: took.append(take_lease(ledger, 30, stop, poll_s=0.05)))
    waiter.start()
    time.sleep(0.5)
    assert not took  # still waiting: the holder runs and its lease lasts an hour
    assert sl.release(ledger, first)
    waiter.join(timeout=10)
    assert took and took[0].term == 2 and took[0].pid == os.getpid()
    assert not sl.release(ledger, first)  # not its any more: nothing changed
    assert sl.current(ledger).term == 2
    # a waiter stopped before it got the lease returns None and takes nothing
    stop.set()
    _set(ledger, host="elsewhere", holder="elsewhere:1", pid=1, expires_at=_db_time(utcnow() + timedelta(seconds=3600)))
    assert take_lease(ledger, 30, stop, poll_s=0.05) is None
    assert sl.current(ledger).holder == "elsewhere:1"


def test_the_loop_renews_its_lease_names_it_in_the_heartbeat_and_stops_when_it_is_lost(tmp_path, ledger) -> None:
    settings = Settings(home=tmp_path / "home")
    sup = Supervisor(settings, {}, ledger)
    lease = take_lease(ledger, 30)
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            sup.run(stop, interval=0.05, lease=lease, lease_s=30)
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            errors.append(exc)

    loop = threading.Thread(target=run)
    loop.start()
    deadline = time.time() + 10
    while sl.current(ledger).expires_at <= lease.expires_at or not heartbeat_file(settings).exists():  # a pass renewed it
        assert time.time() < deadline
        time.sleep(0.05)
    beat = json.loads(heartbeat_file(settings).read_text())
    assert beat["lease"] == f"{sl.holder_name()}, term 1"
    _set(ledger, term=2, holder="elsewhere:1", host="elsewhere", pid=1)  # another supervisor took it
    loop.join(timeout=10)
    assert not loop.is_alive() and len(errors) == 1 and isinstance(errors[0], SupervisorLeaseLost), errors
    assert "elsewhere:1 (term 2" in str(errors[0])
    stop.set()


def test_supervise_once_is_refused_while_another_host_holds_the_lease(tmp_path) -> None:
    home = tmp_path / "home"
    settings = Settings(home=home)
    led = Ledger.open(settings.ledger_db_url)
    sl.take(led, 3600)
    _set(led, host="elsewhere", holder="elsewhere:4242", pid=4242)
    led.close()
    env = {**os.environ, **settings.env()}
    r = subprocess.run([sys.executable, "-m", "streamops.cli", "supervise", "--once"], env=env,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 1, r.stderr
    assert "another supervisor holds the lease: elsewhere:4242 (term 1" in r.stderr, r.stderr
    assert not heartbeat_file(settings).exists()  # it did nothing
