"""``streamops supervise``: the reconcile loop (desired in the ledger vs observed processes).

Each pass, per app in the specs: observe (driver pid record, heartbeat age, launched
parallelism, crash history), ``reconcile.decide``, act (launch / stop / restart / resize by
restart), and write what it did to the ledger (observed state, and an operation row for every
launch, restart or stop it performs on its own). Crash history lives in
``apps/<app>/restarts.json`` (``AppDir.restarts``) so a restarted supervisor keeps counting.

Two rules keep it out of the way of everything else:

* an action that waits for a driver (a graceful stop, a restart, a resize's warm standby, up to
  minutes) runs in a thread of its own; the loop goes on with the other apps and its heartbeat;
* while an operation holds an app's lease, the supervisor launches, stops or restarts that app's
  driver only as the operation asked (the desired state it recorded), never on its own: a crashed
  driver waits until a reset, restore or compaction has finished with the checkpoint.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamops.app.dir import AppDir
from streamops.exceptions import StreamopsError
from streamops.host import process
from streamops.host.files import read_json, write_json
from streamops.ledger import Ledger, supervisor_lease
from streamops.ledger.supervisor_lease import Held, SupervisorLease
from streamops.lifecycle import driver
from streamops.lifecycle.reconcile import Action, Desired, History, Observed, RestartPolicy, decide
from streamops.results import Result, absent
from streamops.settings import Settings
from streamops.spec import AppSpec
from streamops.specfile import SpecChanges, SpecFile, effective, restart_changes

log = logging.getLogger("streamops.supervisor")
WHO = "supervisor"


#: a driver's log past this moves to ``driver.log.1``: at most twice this per app is kept
DRIVER_LOG_MAX_BYTES = 32 * 1024 * 1024


def heartbeat_file(settings: Settings) -> Path:
    return settings.state_dir / "supervisor.json"


class SupervisorLeaseHeld(StreamopsError):
    """Another supervisor holds the ledger's supervisor lease: this one does not act.

    Operator action: none if that supervisor runs (``streamops platform status`` names it); if its
    machine is gone, this one takes over once the lease lapses (``STREAMOPS_SUPERVISOR_LEASE_S``)."""


class SupervisorLeaseLost(StreamopsError):
    """The lease went to another supervisor (or lapsed unrenewed): this one stops acting at once."""


def take_lease(ledger: Ledger, ttl_s: float, stop: threading.Event | None = None,
               poll_s: float = 1.0) -> SupervisorLease | None:
    """The ledger's supervisor lease (``ledger.supervisor_lease``). Held by another supervisor:
    with ``stop``, wait for it (None if stopped meanwhile); without, ``SupervisorLeaseHeld``."""
    said = 0.0
    while True:
        got = supervisor_lease.take(ledger, ttl_s)
        if not isinstance(got, Held):
            log.info("took the supervisor lease, term %s (%s%s)", got.lease.term, got.reason,
                     f"; it was {got.previous.holder}'s, term {got.previous.term}" if got.previous else "")
            return got.lease
        message = f"another supervisor holds the lease: {got.lease.describe()}"
        if stop is None:
            raise SupervisorLeaseHeld(message)
        if time.monotonic() - said > 30:
            log.warning("%s; waiting for it to lapse", message)
            said = time.monotonic()
        if stop.wait(poll_s):
            return None


def renew_lease(ledger: Ledger, lease: SupervisorLease, ttl_s: float) -> SupervisorLease:
    """The lease renewed, or ``SupervisorLeaseLost``. A ledger that does not answer is survived
    while the lease has not expired (the next pass tries again)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        renewed = supervisor_lease.renew(ledger, lease, ttl_s)
    except SQLAlchemyError as exc:
        if lease.expired:
            raise SupervisorLeaseLost(f"the ledger did not answer and the supervisor lease (term {lease.term}) "
                                      f"expired unrenewed: {exc}") from exc
        log.warning("could not renew the supervisor lease (the ledger: %s); it holds until %s", exc,
                    f"{lease.expires_at:%H:%M:%S} UTC")
        return lease
    if renewed is None:
        now = supervisor_lease.current(ledger)
        raise SupervisorLeaseLost(f"the supervisor lease (term {lease.term}) is no longer this supervisor's"
                                  + (f": {now.describe()} holds it" if now else ""))
    return renewed


@dataclass(frozen=True)
class SupervisorBeat(Result):
    """The heartbeat file (``Supervisor.beat``, every pass): the operations' proof that someone
    reconciles (``operations.require_supervisor``) and what it knows: the apps it loaded, those with
    an action under way (``busy``), its last decision and note per app, the spec file in force
    (``SpecFile.status``; absent when it runs on fixed specs). ``apps`` is None in the file of a
    supervisor that predates listing them: then nobody can say an app is not loaded."""

    heartbeat: float
    apps: list[str] | None = None
    busy: list[str] = field(default_factory=list)
    decisions: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    spec: Mapping[str, Any] | None = absent()
    #: the ledger's supervisor lease it holds (``ledger.supervisor_lease``): "host:pid, term N"
    lease: str | None = absent()

    @classmethod
    def from_file(cls, path: Path) -> SupervisorBeat | None:
        """The heartbeat in ``path``; None when there is none (no file, not a heartbeat)."""
        data = read_json(path)
        return cls.from_dict(data) if isinstance(data, dict) and "heartbeat" in data else None

    def age(self) -> float:
        """Seconds since the supervisor wrote it."""
        return time.time() - self.heartbeat

    def loaded(self, app: str) -> bool:
        """Whether the supervisor lists ``app`` (a supervisor that lists none: no)."""
        return app in (self.apps or ())


#: actions that wait for a driver (a graceful stop at a batch boundary, a warm standby's start):
#: each runs in a thread of its own, so one app's handover never holds up the others
BLOCKING = ("stop", "restart", "resize")


class Supervisor:
    """``spec_file``: reloaded on every pass (``streamops.specfile``), so apps added, changed or
    removed in it are picked up without a restart; without one, ``specs`` stay as given."""

    def __init__(self, settings: Settings, specs: dict[str, AppSpec], ledger: Ledger,
                 policy: RestartPolicy | None = None, spec_file: SpecFile | None = None) -> None:
        self.settings, self.specs, self.ledger = settings, specs, ledger
        self.policy = policy or RestartPolicy()
        self.spec_file = spec_file
        self._busy: dict[str, threading.Thread] = {}
        self._busy_what: dict[str, str] = {}
        self._waiting_for: dict[str, int] = {}
        #: per app, what the last pass decided (the heartbeat carries it: a deploy that does not
        #: converge says what the supervisor did about it)
        self.decisions: dict[str, str] = {}
        #: per app, a spec change the supervisor did not apply (said once, kept in the heartbeat)
        self.notes: dict[str, str] = {}
        #: the ledger's supervisor lease while ``run`` holds it
        self.lease: SupervisorLease | None = None
        self._refused: str | None = None

    # -- the spec file -------------------------------------------------------------------------
    def reload(self) -> SpecChanges | None:
        """Pick up the spec file's changes. A running app keeps what its driver read at start
        (``specfile.effective``); an app removed from the file while deployed stays supervised
        on its pinned spec until it is stopped; a file that does not load changes nothing."""
        if self.spec_file is None:
            return None
        changes = self.spec_file.refresh()
        if self.spec_file.error and self.spec_file.error != self._refused:
            log.error("spec file refused; the apps keep their last good specs: %s", self.spec_file.error)
        self._refused = self.spec_file.error
        if changes:
            log.info("spec file reloaded: %s", changes.describe())
        apps: dict[str, AppSpec] = {}
        notes: dict[str, str] = {}
        for name in sorted(set(self.spec_file.specs) | set(self.specs)):
            current = self.spec_file.specs.get(name)
            pinned = AppDir.of(self.settings, name).pinned_spec()
            alive = driver.running(self.settings, name) is not None
            if current is None:
                desired = self.ledger.desired(name)
                if not alive and (desired is None or desired["status"] != "running"):
                    continue  # removed and stopped: no longer supervised
                notes[name] = (f"removed from the spec file while deployed: supervised on its last spec until "
                               f"stopped (put the entry back, `streamops stop {name}`, then remove it)")
            spec = effective(pinned, current) if pinned is not None or current is not None else self.specs[name]
            if spec is None:
                continue
            if current is not None and pinned is not None and alive and (waits := restart_changes(pinned, current)):
                notes[name] = (f"spec change waits for a restart ({', '.join(c.field for c in waits)}): "
                               f"`streamops stop {name}` then `streamops deploy {name}` applies it")
            apps[name] = spec
        for name, note in notes.items():
            if self.notes.get(name) != note:
                log.warning("%s: %s", name, note)
        self.notes = notes
        for name in sorted(set(self.specs) - set(apps)):
            log.info("%s: no longer supervised (removed from the spec file, not running)", name)
            self.decisions.pop(name, None)
        for name in sorted(set(apps) - set(self.specs)):
            log.info("%s: loaded from the spec file", name)
        self.specs = apps
        return changes

    # -- per-app memory ------------------------------------------------------------------------
    def _mem(self, app: str) -> dict[str, Any]:
        d = AppDir.of(self.settings, app)
        return d.read(d.restarts) or {"crashes": [], "launched_at": None, "gave_up_at": None}

    def _save(self, app: str, mem: dict[str, Any]) -> None:
        d = AppDir.of(self.settings, app)
        d.write(d.restarts, mem)

    # -- one pass ------------------------------------------------------------------------------
    def _live_request_age(self, app: str, desired: Desired | None, parallelism: int | None, now: float) -> float | None:
        """Age of a live resize asked of the driver for the desired size and not applied yet."""
        if desired is None or desired.strategy != "live" or parallelism == desired.parallelism:
            return None
        req = driver.live_request(self.settings, app)
        if req is None or req.parallelism != desired.parallelism:
            return None
        return max(0.0, now - req.requested_at)

    def observe(self, spec: AppSpec, mem: dict[str, Any], now: float,
                desired: Desired | None = None) -> tuple[Observed, History]:
        app = spec.name
        rec = driver.running(self.settings, app)
        if rec is None and driver.pid_path(self.settings, app).exists():
            # it was ours and it is gone without being asked to stop: a crash, counted once
            driver.pid_path(self.settings, app).unlink(missing_ok=True)
            mem["crashes"] = [now, *mem["crashes"]][:50]
            self.ledger.report_observed(app, status="crashed", pid=None)
            self.ledger.record(app, "driver-exit", who=WHO, outcome="failed",
                               error=driver.log_tail(self.settings, app, 20)[-2000:])
        # the one channel for observed state: the supervisor reports the size it launched, the
        # driver the size a live resize reached
        parallelism = (self.ledger.observed(app) or {}).get("parallelism") if rec else None
        heartbeat_age = driver.heartbeat_age(self.settings, app) if rec else None
        launched = mem.get("launched_at")
        if rec is not None and heartbeat_age is not None and launched and heartbeat_age > now - launched:
            heartbeat_age = None  # heartbeat from a previous run
        observed = Observed(alive=rec is not None, parallelism=parallelism, heartbeat_age=heartbeat_age,
                            live_request_age=self._live_request_age(app, desired, parallelism, now)
                            if rec else None)
        history = History(crashes_ago=tuple(now - c for c in mem["crashes"]),
                          launched_ago=(now - launched) if launched else None)
        return observed, history

    def reconcile_app(self, spec: AppSpec) -> Action:
        app = spec.name
        worker = self._busy.get(app)
        if worker is not None and worker.is_alive():
            # observing now would see a driver half stopped or half handed over (a crash that is not)
            return Action("wait", f"{self._busy_what[app]} in progress", after_s=1.0)
        self._busy.pop(app, None)
        now = time.time()
        mem = self._mem(app)
        row = self.ledger.desired(app)
        desired = Desired(row["status"], row["parallelism"], row.get("strategy") or "restart") if row else None
        if row and mem.get("gave_up_at") and row["updated_at"].timestamp() > mem["gave_up_at"]:
            mem.update(crashes=[], gave_up_at=None)  # desired changed since we gave up: try again
        if row and mem["crashes"]:  # a new desired state (a deploy, an operation's restart) starts afresh
            mem["crashes"] = [c for c in mem["crashes"] if c > row["updated_at"].timestamp()]
        observed, history = self.observe(spec, mem, now, desired)
        action = decide(desired, observed, history, self.policy)
        held = self._held_by_other(app, row)
        if held is not None and action.kind not in ("none", "wait"):
            # an operation owns the app: it may be replacing the checkpoint under a crashed driver,
            # or compacting it; a driver launched (or stopped) now would race it
            action = Action("wait", f"{held['kind']} #{held['operation_id']} holds {app}'s lease "
                                    f"({action.kind} waits for it: {action.reason})", after_s=1.0)
            if self._waiting_for.get(app) != held["operation_id"]:  # said once per operation
                self._waiting_for[app] = held["operation_id"]
                log.info("%s: %s", app, action.reason)
        if action.kind == "give_up" and mem.get("gave_up_at"):
            action = Action("none", "given up (crash loop); deploy again to retry")
        if action.kind in BLOCKING:
            self._in_background(spec, action, observed, mem, now)
            return action
        self._act(spec, action, observed, mem, now)
        self._save(app, mem)
        return action

    def _in_background(self, spec: AppSpec, action: Action, observed: Observed, mem: dict[str, Any],
                       now: float) -> None:
        app = spec.name

        def work() -> None:
            try:
                self._act(spec, action, observed, mem, now)
            except Exception as exc:  # recorded; the next pass observes and decides again
                log.exception("%s: %s failed", app, action.kind)
                self.ledger.record(app, f"supervisor-{action.kind}", who=WHO, outcome="failed",
                                   params={"reason": action.reason}, error=f"{type(exc).__name__}: {exc}"[:4000])
            finally:
                self._save(app, mem)

        self._busy_what[app] = f"{action.kind} ({action.reason})"
        self._busy[app] = threading.Thread(target=work, name=f"supervisor-{action.kind}-{app}", daemon=True)
        self._busy[app].start()

    def wait_idle(self, timeout: float | None = None) -> None:
        """Until every background action has ended (``supervise --once``, shutdown)."""
        for worker in list(self._busy.values()):
            worker.join(timeout=timeout)

    def busy(self) -> list[str]:
        """Apps with an action under way in the background."""
        return sorted(a for a, t in self._busy.items() if t.is_alive())

    def _held_by_other(self, app: str, desired_row: dict[str, Any] | None) -> dict[str, Any] | None:
        """The lease of an operation running on ``app`` that did not ask for the desired state now
        recorded (None: no such operation; the supervisor acts as desired says)."""
        lease = self.ledger.lease(app)
        if lease is None or lease["expires_at"].timestamp() <= time.time():
            return None
        if desired_row is not None and desired_row.get("operation_id") == lease["operation_id"]:
            return None  # the operation itself asked for this: a deploy, a restore's stop or restart
        return lease

    def _handover(self, spec: AppSpec, parallelism: int) -> process.PidRecord | None:
        """Restart resize with a warm standby: start the next driver, wait until its
        SparkContext is up, stop the current one at a batch boundary, promote the standby.
        None (standby gone, or not ready in time): the caller stops and launches as before."""
        app = spec.name
        standby = driver.launch(spec, self.settings, parallelism, standby=True)
        deadline = time.monotonic() + self.policy.standby_ready_s
        while not driver.standby_ready(self.settings, app, standby):
            if not standby.alive or time.monotonic() > deadline:
                log.warning("%s: standby driver not ready (%s); restarting without one", app,
                            "exited" if not standby.alive else f"{self.policy.standby_ready_s:.0f} s")
                driver.clear_standby(self.settings, app)
                return None
            time.sleep(0.2)
        driver.stop(self.settings, app, timeout=max(60.0, 10 * spec.trigger_seconds))
        if not standby.alive:
            driver.clear_standby(self.settings, app)
            return None
        driver.promote(self.settings, app, standby)
        return standby

    def _act(self, spec: AppSpec, action: Action, observed: Observed, mem: dict[str, Any], now: float) -> None:
        app = spec.name
        if action.kind in ("none", "wait"):
            return
        log.info("%s: %s (%s)", app, action.kind, action.reason)
        if action.kind == "give_up":
            mem["gave_up_at"] = now
            self.ledger.report_observed(app, status="crash-loop", error=action.reason)
            self.ledger.record(app, "give-up", who=WHO, outcome="failed", error=action.reason)
            return
        if action.kind == "resize_live":
            assert action.parallelism is not None
            driver.request_parallelism(self.settings, app, action.parallelism)
            self.ledger.record(app, "supervisor-resize-live", who=WHO,
                               params={"parallelism": action.parallelism, "reason": action.reason},
                               before={"parallelism": observed.parallelism})
            return
        rec = None
        if action.kind == "resize":
            assert action.parallelism is not None
            rec = self._handover(spec, action.parallelism)
        warm = rec is not None
        if rec is None and action.kind in ("stop", "restart", "resize"):
            driver.stop(self.settings, app, now=action.kind == "restart",
                        timeout=max(60.0, 10 * spec.trigger_seconds))
            if action.kind == "stop":
                self.ledger.report_observed(app, status="stopped", pid=None)
                self.ledger.record(app, "supervisor-stop", who=WHO, params={"reason": action.reason})
                return
        assert action.parallelism is not None
        if rec is None:
            rec = driver.launch(spec, self.settings, action.parallelism)
        mem["launched_at"] = time.time()  # a handover took a while: the old driver's heartbeats are older
        self.ledger.report_observed(app, status="starting", pid=rec.pid, parallelism=action.parallelism,
                                    error=None)
        self.ledger.record(app, f"supervisor-{action.kind}", who=WHO,
                           params={"parallelism": action.parallelism, "reason": action.reason,
                                   **({"standby": warm} if action.kind == "resize" else {})},
                           before={"parallelism": observed.parallelism}, after={"pid": rec.pid})

    def reconcile_once(self) -> dict[str, Action]:
        try:
            self.reload()
        except Exception:  # the loop must go on: the apps stay as the last reload left them
            log.exception("reloading the spec file failed; the apps stay as they were")
        out = {}
        for spec in self.specs.values():
            try:
                out[spec.name] = self.reconcile_app(spec)
            except Exception as exc:  # one app's trouble must not starve the others
                log.exception("%s: reconcile failed", spec.name)
                out[spec.name] = Action("none", f"reconcile failed: {exc}")
            self.decisions[spec.name] = f"{out[spec.name].kind} ({out[spec.name].reason})"
        return out

    def run(self, stop: threading.Event, interval: float = 2.0, lease: SupervisorLease | None = None,
            lease_s: float = supervisor_lease.DEFAULT_TTL_S) -> None:
        """Reconcile every ``interval`` until ``stop``; with ``lease``, renew it before each pass and
        raise ``SupervisorLeaseLost`` once it is another supervisor's (or lapsed unrenewed)."""
        self.lease = lease
        while not stop.is_set():
            if self.lease is not None:
                self.lease = renew_lease(self.ledger, self.lease, lease_s)
            self.reconcile_once()
            self.beat()
            self.rotate_logs()
            stop.wait(interval)
        self.wait_idle(timeout=30)  # bounded: each action waits with a timeout of its own

    def rotate_logs(self) -> None:
        """The drivers' logs, bounded (``process.rotate_log``; docs/operations.md, "Files and rotation")."""
        for name in self.specs:
            try:
                process.rotate_log(AppDir.of(self.settings, name).log, DRIVER_LOG_MAX_BYTES)
            except OSError as exc:
                log.warning("%s: could not rotate the driver's log (%s)", name, exc)

    def beat(self) -> None:
        """The heartbeat operations look for (``operations.require_supervisor``), with what is under way."""
        write_json(heartbeat_file(self.settings), SupervisorBeat(
            heartbeat=time.time(), apps=sorted(self.specs), busy=self.busy(),
            decisions=dict(sorted(self.decisions.items())), notes=dict(sorted(self.notes.items())),
            spec=self.spec_file.status() if self.spec_file is not None else None,
            lease=f"{self.lease.holder}, term {self.lease.term}" if self.lease is not None else None).to_dict())
