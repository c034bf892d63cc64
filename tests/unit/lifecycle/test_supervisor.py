"""The supervisor's loop on a real ledger, with the driver processes faked (their launch and stop
are what test_supervisor.py and test_resize.py run for real): it never blocks on one app, and it
never launches or stops a driver under an operation that did not ask for it."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest

from streamops.app.dir import AppDir
from streamops.ledger import Ledger
from streamops.lifecycle import driver as real_driver
from streamops.lifecycle import supervisor as sup_mod
from streamops.lifecycle.supervisor import Supervisor, heartbeat_file
from streamops.settings import Settings
from streamops.spec import AppSpec


def _spec(name: str) -> AppSpec:
    return AppSpec(name=name, job="jobs.x", input_topics=("in",), output_topic=f"{name}-o",
                   changelog_topic=f"{name}-c", dlq_topic=f"{name}-d", input_partitions=6, state_partitions=4)


class FakeDrivers:
    """Driver processes as records; ``stop`` of an app in ``slow`` waits until released."""

    def __init__(self) -> None:
        self.alive: dict[str, SimpleNamespace] = {}
        self.launched: list[str] = []
        self.slow: dict[str, threading.Event] = {}
        self.pid_path, self.log_tail = real_driver.pid_path, real_driver.log_tail

    def running(self, _settings, app):
        return self.alive.get(app)

    def launch(self, spec, _settings, parallelism, *, standby=False):
        rec = SimpleNamespace(pid=1000 + len(self.launched), alive=True)
        self.launched.append(spec.name)
        self.alive[spec.name] = rec
        return rec

    def stop(self, _settings, app, *, now=False, timeout=120.0):
        if app in self.slow:
            assert self.slow[app].wait(30), "never released"
        return self.alive.pop(app, None) is not None

    def heartbeat_age(self, _settings, _app):
        return 1.0

    def live_request(self, _settings, _app):
        return None


@pytest.fixture
def env(tmp_path, monkeypatch):
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    fake = FakeDrivers()
    monkeypatch.setattr(sup_mod, "driver", fake)
    specs = {n: _spec(n) for n in ("a", "b")}
    yield settings, ledger, fake, Supervisor(settings, specs, ledger)
    ledger.close()


def _in_time(fn, seconds: float = 5.0):
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"blocked for more than {seconds} s"
    return out[0]


def test_one_apps_slow_stop_holds_up_no_other_app_nor_the_heartbeat(env) -> None:
    settings, ledger, fake, sup = env
    fake.alive["a"] = SimpleNamespace(pid=1, alive=True)
    fake.slow["a"] = threading.Event()
    ledger.set_desired("a", status="stopped", parallelism=1)
    ledger.set_desired("b", status="running", parallelism=1)

    actions = _in_time(sup.reconcile_once)
    assert (actions["a"].kind, actions["b"].kind) == ("stop", "launch")
    assert fake.launched == ["b"]
    again = _in_time(sup.reconcile_once)  # a's driver is still stopping
    assert again["a"].kind == "wait" and "stop" in again["a"].reason and "in progress" in again["a"].reason
    sup.beat()
    assert json.loads(heartbeat_file(settings).read_text())["busy"] == ["a"]

    fake.slow["a"].set()
    sup.wait_idle(10)
    assert sup.busy() == [] and "a" not in fake.alive
    kinds = [(o["kind"], o["outcome"]) for o in ledger.operations("a")]
    assert kinds == [("supervisor-stop", "succeeded")]
    assert ledger.observed("a")["status"] == "stopped"


def test_no_driver_is_launched_under_an_operation_that_did_not_ask_for_it(env) -> None:
    _settings, ledger, fake, sup = env
    ledger.set_desired("b", status="running", parallelism=1)  # its driver is gone (crashed)
    compact = ledger.begin("b", "compact", who="cli:alice")
    action = sup.reconcile_app(sup.specs["b"])
    assert action.kind == "wait" and f"compact #{compact.id} holds b's lease" in action.reason
    assert fake.launched == []
    fake.alive["a"] = SimpleNamespace(pid=1, alive=True)
    ledger.set_desired("a", status="stopped", parallelism=1)
    restore = ledger.begin("a", "restore", who="cli:alice")
    assert sup.reconcile_app(sup.specs["a"]).kind == "wait" and "a" in fake.alive  # not stopped either

    ledger.finish(compact, "succeeded")
    assert sup.reconcile_app(sup.specs["b"]).kind == "launch" and fake.launched == ["b"]

    # the operation that holds the lease asked for it (a restore's stop): the supervisor does it
    ledger.set_desired("a", status="stopped", parallelism=1, op=restore)
    assert sup.reconcile_app(sup.specs["a"]).kind == "stop"
    sup.wait_idle(10)
    assert "a" not in fake.alive
    ledger.finish(restore, "succeeded")


def test_an_expired_lease_holds_nothing(env) -> None:
    _settings, ledger, fake, sup = env
    ledger.set_desired("b", status="running", parallelism=1)
    ledger.begin("b", "compact", who="cli:gone", ttl_s=0.01)
    time.sleep(0.05)
    assert sup.reconcile_app(sup.specs["b"]).kind == "launch" and fake.launched == ["b"]


def test_crashes_before_the_desired_state_changed_do_not_count(env) -> None:
    """A driver that refused to start five times (lost batches), then a reset that repaired the
    checkpoint and asked for the app again: that is a new attempt, not a sixth crash."""
    settings, ledger, fake, sup = env
    d = AppDir.of(settings, "b")
    now = time.time()
    d.write(d.restarts, {"crashes": [now - 5 * i for i in range(1, 6)], "launched_at": None, "gave_up_at": None})
    ledger.set_desired("b", status="running", parallelism=1)
    assert sup.reconcile_app(sup.specs["b"]).kind == "launch" and fake.launched == ["b"]
    fake.alive.clear()
    d.write(d.restarts, {"crashes": [time.time() + 1 + i for i in range(5)], "launched_at": None, "gave_up_at": None})
    assert sup.reconcile_app(sup.specs["b"]).kind == "give_up"  # five since: a crash loop


SPEC_ONE = """apps:
  a: {job: jobs.a, input_topics: [in-a], output_topic: out-a, changelog_topic: a-c, dlq_topic: a-d}
"""
SPEC_TWO = SPEC_ONE + """  b: {job: jobs.b, input_topics: [in-b], output_topic: out-b, changelog_topic: b-c, dlq_topic: b-d}
"""


def _edit(path, text: str) -> None:
    import os

    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def test_apps_added_changed_removed_or_broken_in_the_spec_file_without_a_restart(tmp_path, monkeypatch) -> None:
    from streamops.specfile import SpecFile

    settings = Settings(home=tmp_path / "home")
    ledger = Ledger.open(settings.ledger_db_url)
    fake = FakeDrivers()
    monkeypatch.setattr(sup_mod, "driver", fake)
    path = tmp_path / "streams.yaml"
    _edit(path, SPEC_ONE)
    sf = SpecFile(path)
    sf.refresh()
    sup = Supervisor(settings, dict(sf.specs), ledger, spec_file=sf)
    try:
        ledger.set_desired("b", status="running", parallelism=1)  # asked before b is in the file
        assert sorted(sup.reconcile_once()) == ["a"] and fake.launched == []
        _edit(path, SPEC_TWO)  # b added while the supervisor runs
        assert sup.reconcile_once()["b"].kind == "launch" and fake.launched == ["b"]
        sup.beat()
        beat = json.loads(heartbeat_file(settings).read_text())
        assert beat["apps"] == ["a", "b"] and beat["decisions"]["b"].startswith("launch")
        assert beat["spec"]["error"] is None and beat["spec"]["path"] == str(path)

        # b runs with what its deploy pinned: a change of a field its driver read at start waits
        AppDir.of(settings, "b").pin_spec(sup.specs["b"])
        _edit(path, SPEC_TWO.replace("out-b", "out-b2").replace("jobs.a,", "jobs.a, description: hi,"))
        sup.reconcile_once()
        assert sup.specs["b"].output_topic == "out-b" and "output_topic" in sup.notes["b"]
        assert sup.specs["a"].description == "hi"  # a field read when used: applied at once

        # a broken file changes nothing, and says where it is broken
        _edit(path, SPEC_TWO + "  c: {job: jobs.c}\n")
        sup.reconcile_once()
        sup.beat()
        beat = json.loads(heartbeat_file(settings).read_text())
        assert beat["apps"] == ["a", "b"] and "line 4: apps.c.input_topics: Field required" in beat["spec"]["error"]

        # b removed from the file while it runs: still supervised (on its pinned spec) until stopped
        _edit(path, SPEC_ONE)
        sup.reconcile_once()
        assert sorted(sup.specs) == ["a", "b"] and "removed from the spec file" in sup.notes["b"]
        ledger.set_desired("b", status="stopped", parallelism=1)
        sup.reconcile_once()
        sup.wait_idle(10)
        assert "b" not in fake.alive
        sup.reconcile_once()
        assert sorted(sup.specs) == ["a"] and "b" not in sup.notes
    finally:
        ledger.close()


def test_a_reload_that_fails_leaves_the_apps_as_they_were_and_the_loop_going(env) -> None:
    _settings, ledger, fake, sup = env

    class Broken:
        def refresh(self):
            raise OSError("permission denied")

    sup.spec_file = Broken()
    ledger.set_desired("a", status="running", parallelism=1)
    actions = _in_time(sup.reconcile_once)
    assert sorted(actions) == ["a", "b"] and actions["a"].kind == "launch" and fake.launched == ["a"]
