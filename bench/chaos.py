"""Chaos: a deployed app under a steady load while a seeded schedule injects faults and operations.

    .venv/bin/python bench/chaos.py [--minutes 10] [--seed 1] [--rate 200] [--master cluster|local] [--airflow]

One platform in a temporary state dir on free ports (broker, supervisor, and with ``--master
cluster`` a Spark standalone master and worker), stopped in ``finally``. The demo app is deployed
while a producer writes ``--rate`` events/s (1% invalid). Every few seconds (seeded: the same seed,
the same schedule) one of these happens, at once, beside whatever is still running:

faults: ``kill-driver`` (kill -9 of the driver and its JVM), ``kill-executor`` (kill -9 of one
executor JVM; cluster only), ``kill-supervisor`` (SIGKILL, started again 1-6 s later),
``kill-broker`` (SIGKILL within a moment of a batch commit, started again 1-3 s later: the
embedded broker loses the last second of acknowledged writes), ``kill-operation`` (a reset or
restore whose process is killed at a random journaled step, as an Airflow task killed half way;
then ``streamops undo`` of it);

operations, from the CLI, each in the background: ``resize-restart`` (1 <-> 2), ``resize-live``
(cluster only), ``savepoint``, ``restore`` (the newest savepoint), ``compact``, ``reset-undo``
(``reset --to-earliest --stop-first``, then ``undo`` of it).

With ``--airflow`` the four Airflow components run too, and these come from Airflow, through its
REST API, beside the CLI's: ``airflow-resize`` (the ``streamops_resize`` DAG, by restart),
``airflow-savepoint`` (the app's savepoint DAG), and the fault ``kill-airflow-task``: a
``streamops_reset`` run whose task process (the lease holder) is killed -9 a random 0-4 s after
it took the lease, then undone through the same DAG (``target: undo``).

An operation succeeds, is refused (another holds the lease, the supervisor is down: nothing
changed), or fails; a failed reset or restore must be undone by ``streamops undo`` (counted as
``failed, undone``). One (or an undo) whose journal ends at ``restart`` did every change and only
the app's start failed: it is finished as an operator would, by ``deploy`` (``resumed``), or, when
the driver refuses the checkpoint because the broker lost batches, by the reset the refusal names
(``reset``). A driver that refuses to start (the broker lost a committed batch: the
platform says so instead of running on) is repaired as its message says (``reset --to-earliest``),
counted under ``repairs``. A driver killed in a batch's transaction leaves it open until the next
driver of the app fences it (or its 120 s transaction timeout): every record committed after it is
invisible to read_committed readers meanwhile. Reads that must see everything (check, an
operation's saved copies) say so (``OpenTransactionError``) instead of reading short; the bench
then does what that message says, waits for the app's next driver, counted under ``open
transactions``.

At the end the load stops, the app catches up and stops, and ``check`` must be exact: ``lost``
(keys missing or different in state, changelog or output; DLQ records missing) and ``duplicated``
(DLQ records written twice) must both be 0. The longest batch gap is the longest time between two
batch commits (the batch markers' commit times) while faults ran.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import isolated_settings, table
from streamops.platform import manager
from streamops.settings import Settings

APP = "user_activity"
CLI = [sys.executable, "-m", "streamops.cli"]
FAULTS = {"kill-driver": 3, "kill-executor": 2, "kill-supervisor": 2, "kill-broker": 1, "kill-operation": 2}
OPERATIONS = {"resize-restart": 2, "resize-live": 1, "savepoint": 2, "restore": 1, "compact": 1, "reset-undo": 1}
CLUSTER_ONLY = ("kill-executor", "resize-live")
#: how ``OpenTransactionError`` starts
HANGING = "a transaction has stayed open"
#: what an operation says when no broker answers (a kill-broker beside it)
BROKER_DOWN = "no Kafka broker answered"
AIRFLOW_ONLY = {"kill-airflow-task": 2, "airflow-resize": 1, "airflow-savepoint": 1}
#: steps at which a killed reset / restore dies (journaled just before each is taken)
KILL_STEPS = {"reset": ("stop", "set-aside", "install", "changelog-recreate", "rewind"),
              "restore": ("stop", "set-aside", "install", "rewind", "restart")}


@dataclass
class Report:
    seed: int
    minutes: float
    faults: collections.Counter = field(default_factory=collections.Counter)
    operations: collections.Counter = field(default_factory=collections.Counter)  # (kind, outcome)
    repairs: int = 0
    hanging: int = 0  # open transactions named by a read (waited out: the next driver aborts them)
    redeploys: int = 0
    lost: int = 0
    duplicated: int = 0
    check_ok: bool = False
    input_records: int = 0
    longest_gap_s: float = 0.0
    problems: list[str] = field(default_factory=list)  # outcomes the platform must never give

    def tables(self) -> str:
        faults = table(["fault", "injected"], [[k, v] for k, v in sorted(self.faults.items())]
                       + [["repairs (refused start, then reset)", self.repairs],
                          ["open transactions named by a read (waited out)", self.hanging],
                          ["deploys after the supervisor gave up", self.redeploys]])
        outcomes = sorted({o for _k, o in self.operations})
        ops = table(["operation", *outcomes],
                    [[k, *(self.operations.get((k, o), 0) for o in outcomes)]
                     for k in sorted({k for k, _o in self.operations})])
        result = table(["input records", "lost", "duplicated", "check", "longest batch gap (s)"],
                       [[self.input_records, self.lost, self.duplicated, "exact" if self.check_ok else "NOT exact",
                         f"{self.longest_gap_s:.1f}"]])
        return f"{faults}\n\n{ops}\n\n{result}"


class Feeder(threading.Thread):
    """``rate`` events/s (1% invalid) until stopped; a broker that dies and comes back is retried."""

    def __init__(self, settings: Settings, rate: int, seed: int) -> None:
        super().__init__(daemon=True, name="chaos-feeder")
        self.settings, self.rate, self.seed = settings, rate, seed
        self.halt = threading.Event()

    def run(self) -> None:
        from confluent_kafka import KafkaException, Producer

        from jobs.demo.generator import generate_records

        def producer() -> Producer:  # not idempotent: a broker that lost its state fails that for good
            return Producer({"bootstrap.servers": self.settings.kafka_bootstrap, "acks": "all",
                             "linger.ms": 20, "message.timeout.ms": 120_000, "log_level": 0})

        out = producer()
        seed = self.seed * 100_000
        while not self.halt.is_set():
            t0 = time.monotonic()
            for r in generate_records(self.rate, 400, seed=seed, bad_ratio=0.01):
                while True:
                    try:
                        out.produce("user-events", key=r.key, value=r.value)
                        break
                    except BufferError:
                        out.poll(0.1)
                    except KafkaException:  # a fatal client error: a new client
                        out = producer()
            seed += 1
            out.poll(0)
            self.halt.wait(max(0.0, 1.0 - (time.monotonic() - t0)))
        out.flush(180)


class AirflowRuns:
    """Trigger a DAG run through Airflow's REST API and wait for its end (the bench's only client)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        password = json.loads(manager.password_file(settings).read_text())["admin"]
        self.token = self.request("POST", "/auth/token", {"username": "admin", "password": password})[1]["access_token"]

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict | None]:
        import urllib.error
        import urllib.request

        req = urllib.request.Request(f"{self.settings.airflow_url}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        req.add_header("Content-Type", "application/json")
        if getattr(self, "token", None):
            req.add_header("Authorization", f"Bearer {self.token}")
        for _ in range(60):  # SQLite under concurrent writers answers 503 "database is locked": retry
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    return resp.status, json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as err:
                if err.code != 503:
                    return err.code, None
            time.sleep(2)
        return 503, None

    def wait_for_dags(self, dag_ids: list[str], timeout: float = 300) -> None:
        """Until the dag-processor has parsed them (a trigger before that is a 404)."""
        deadline = time.time() + timeout
        while any(self.request("GET", f"/api/v2/dags/{d}")[0] != 200 for d in dag_ids):
            if time.time() > deadline:
                raise RuntimeError(f"Airflow did not parse {dag_ids} in {timeout:.0f} s")
            time.sleep(3)

    def state(self, dag_id: str, run_id: str) -> str:
        return (self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")[1] or {}).get("state", "?")

    def trigger(self, dag_id: str, conf: dict) -> str:
        status, run = self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf})
        if status != 200 or run is None:
            raise RuntimeError(f"triggering {dag_id} {conf}: HTTP {status}")
        return run["dag_run_id"]

    def wait(self, dag_id: str, run_id: str, timeout: float = 900) -> tuple[str, str]:
        """(the run's final state, its task's log)."""
        deadline = time.time() + timeout
        while (state := self.state(dag_id, run_id)) not in ("success", "failed"):
            if time.time() > deadline:
                return "timeout", ""
            time.sleep(2)
        _, tis = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        task = (tis or {}).get("task_instances", [{}])[0].get("task_id", "")
        _, text = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task}/logs/1"
                                      "?full_content=true")
        return state, json.dumps(text)


class Chaos:
    def __init__(self, settings: Settings, *, seed: int, cluster: bool, airflow: bool = False, log=print) -> None:
        self.settings, self.cluster, self.log = settings, cluster, log
        self.airflow = AirflowRuns(settings) if airflow else None
        #: the schedule (what, when) is drawn only by the main loop: the same seed, the same schedule;
        #: the faults' own choices (which executor, how long down) come from another stream
        self.schedule, self.rng = random.Random(seed), random.Random(seed + 1)
        self.env = {**os.environ, **settings.env(), "PYSPARK_PYTHON": sys.executable}
        self.report = Report(seed=seed, minutes=0.0)
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self._log_seen = 0
        self.parallelism = 1

    # -- helpers -----------------------------------------------------------------------------------
    def cli(self, *args: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
        r = subprocess.run([*CLI, *args], env={**self.env, **(env or {})}, capture_output=True, text=True,
                           timeout=timeout, check=False)
        self.end_hanging_transaction(r.stdout + r.stderr)
        return r

    def _airflow_wait(self, dag_id: str, run_id: str) -> tuple[str, str]:
        """``AirflowRuns.wait``, and what the task's log names ended, as ``cli`` does."""
        assert self.airflow is not None
        state, text = self.airflow.wait(dag_id, run_id)
        self.end_hanging_transaction(text)
        return state, text

    def end_hanging_transaction(self, said: str) -> bool:
        """What an OpenTransactionError tells an operator: the app's next driver aborts what a dead
        one left open (the supervisor starts it), so wait for it."""
        if HANGING not in said:
            return False
        with self.lock:
            self.log("  a read named an open transaction: waiting for the app's next driver to abort it")
            self.report.hanging += 1
        time.sleep(30)
        return True

    def _outcome(self, r: subprocess.CompletedProcess) -> str:
        return "succeeded" if r.returncode == 0 else self._outcome_text(r.stdout + r.stderr)

    @staticmethod
    def _outcome_text(text: str) -> str:
        """A failed operation's outcome from what it said: refused (nothing changed) or failed."""
        if any(s in text for s in ("running since", "another operation just took the lease",
                                   "supervisor is not running", "supervisor's last heartbeat", "is running:",
                                   "nothing committed", "no savepoint", "is not deployed", "in use by pid")):
            return "refused"
        return "failed"

    def _record(self, kind: str, outcome: str, detail: str = "") -> None:
        with self.lock:
            self.report.operations[(kind, outcome)] += 1
        self.log(f"  {kind}: {outcome}{(' - ' + detail[-300:]) if detail and outcome != 'succeeded' else ''}")

    def _last_op(self, kind: str) -> dict | None:
        from streamops.ledger import Ledger

        ledger = Ledger.open(self.settings.ledger_db_url)
        try:
            return next((o for o in ledger.operations(APP, limit=30) if o["kind"] == kind), None)
        finally:
            ledger.close()

    def _op(self, op_id: int) -> dict | None:
        from streamops.ledger import Ledger

        ledger = Ledger.open(self.settings.ledger_db_url)
        try:
            return ledger.get_operation(op_id)
        finally:
            ledger.close()

    def _undo_of(self, op_id: int) -> dict | None:
        """The newest undo of operation ``op_id``."""
        from streamops.ledger import Ledger
        from streamops.lifecycle.undo import undos_of

        ledger = Ledger.open(self.settings.ledger_db_url)
        try:
            return next(iter(undos_of(ledger, APP, op_id)), None)
        finally:
            ledger.close()

    def _resume_restart(self, op: dict | None) -> str | None:
        """An operation whose journal ends at ``restart`` did every change, and only the app's start
        failed: what an operator runs then is ``deploy`` (the supervisor had given up on a
        crash-looping driver, say), or, when the driver refuses the checkpoint because the broker
        lost batches it counted (a broker kill just before), the reset the refusal names. Which of
        the two finished it ("resumed", "reset"), or None (not that case, or not finished)."""
        steps = [s["step"] for s in (op or {}).get("journal") or []]
        if op is None or op["outcome"] == "succeeded" or not steps or steps[-1] != "restart":
            return None
        for _ in range(30):  # another operation (a repair, say) may hold the lease for a while
            r = self.cli("deploy", APP, "--parallelism", str(self.parallelism), "--json")
            if r.returncode == 0:
                return "resumed"
            if "CheckpointMismatchError" in r.stdout + r.stderr + (op.get("error") or ""):
                return "reset" if self._reset() else None
            if self._outcome(r) != "refused":
                return None
            time.sleep(5)
        return None

    def _undo_once(self, op_id: int, airflow: bool) -> subprocess.CompletedProcess:
        """``streamops undo OP --stop-first``, or the same through the reset DAG's ``undo`` target."""
        if not airflow:
            return self.cli("undo", APP, str(op_id), "--stop-first", "--json")
        assert self.airflow is not None
        state, text = self._airflow_wait("streamops_reset", self.airflow.trigger(
            "streamops_reset", {"app": APP, "target": "undo", "value": str(op_id), "stop_first": True,
                                "dry_run": False}))
        return subprocess.CompletedProcess([], 0 if state == "success" else 1, text, "")

    def _undo(self, kind: str, op: dict | None, *, airflow: bool = False) -> str:
        """Undo a failed or killed operation (or, when only its restart failed, finish it: deploy);
        the outcome to count."""
        if op is None or op["outcome"] == "succeeded":
            return "failed"
        if resumed := self._resume_restart(op):
            return f"failed at restart, {resumed}"
        for _ in range(30):  # another operation may hold the lease for a while
            r = self._undo_once(op["id"], airflow)
            if r.returncode == 0:
                return "failed, undone"
            if "was refused: it changed nothing" in r.stdout + r.stderr:
                return "refused"
            if "did not agree with the app's output" in r.stdout + r.stderr:
                # the checkpoint it set aside had lost batches (a broker kill just before): the undo
                # refuses to bring that back, and names the repair, which is what an operator runs
                return "failed, undo refused (lost output), reset" if self._reset() else "failed, undo refused"
            if self._outcome(r) != "refused":
                if resumed := self._resume_restart(self._undo_of(op["id"])):  # the undo did it all but the start
                    return f"failed, undone (restart {resumed})"
                self.report.problems.append(f"undo of {kind} #{op['id']} failed: {(r.stdout + r.stderr)[-500:]}")
                return "failed, undo FAILED"
            time.sleep(5)
        self.report.problems.append(f"undo of {kind} #{op['id']} refused for 150 s")
        return "failed, undo refused"

    def background(self, kind: str, fn) -> None:
        t = threading.Thread(target=fn, daemon=True, name=f"chaos-{kind}")
        self.threads.append(t)
        t.start()

    # -- faults ------------------------------------------------------------------------------------
    def kill_driver(self) -> None:
        from streamops.lifecycle import driver

        rec = driver.running(self.settings, APP)
        proc = rec.process() if rec else None
        if proc is None:
            return
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(Exception):  # gone already
                p.kill()

    def kill_executor(self) -> None:
        import psutil

        execs = [p for p in psutil.process_iter(["cmdline"])
                 if "CoarseGrainedExecutorBackend" in " ".join(p.info["cmdline"] or [])]
        if execs:
            self.rng.choice(execs).kill()

    def kill_supervisor(self) -> None:
        manager.crash(self.settings, "supervisor")
        time.sleep(self.rng.uniform(1, 6))
        manager.up(self.settings, only=["supervisor"])

    def kill_broker(self) -> None:
        from streamops.app.checkpoint import checkpoint_dir
        from streamops.checkpoints import layout
        from streamops.spec import default_spec_path, get_app, load_specs

        spec = get_app(load_specs(default_spec_path(self.settings.repo)), APP)
        ckpt = checkpoint_dir(self.settings, spec)
        seen, deadline = layout.last_committed_batch(ckpt), time.time() + 30
        while layout.last_committed_batch(ckpt) == seen and time.time() < deadline:
            time.sleep(0.005)  # right after a commit: the broker loses it
        manager.crash(self.settings, "kafka")
        time.sleep(self.rng.uniform(1, 3))
        manager.up(self.settings, only=["kafka"])

    def kill_operation(self) -> None:
        kind = self.rng.choice(["reset", "restore"])
        step = self.rng.choice(KILL_STEPS[kind])
        args = ["reset", APP, "--to-earliest", "--stop-first"] if kind == "reset" else \
            ["restore", APP, self._newest_savepoint() or "none"]
        before = (self._last_op(kind) or {}).get("id")
        r = self.cli(*args, env={"STREAMOPS_FAILPOINTS": f"{kind}.{step}=kill"})
        if r.returncode == -signal.SIGKILL:
            self._record(f"{kind} killed at {step}", self._undo(kind, self._last_op(kind)))
        else:
            self._record(f"{kind} killed at {step}", self._failed_early(kind, r, before), r.stdout + r.stderr)

    def _failed_early(self, kind: str, r: subprocess.CompletedProcess, before: int | None) -> str:
        """The outcome of an operation that ended by itself. One that failed (the broker down or
        just restarted by a kill-broker beside it) before it journaled a step changed nothing; one
        that had begun is undone like a killed one."""
        outcome = self._outcome(r)
        if outcome != "failed":
            return outcome
        op = self._last_op(kind)
        if op is None or op["id"] == before or not op.get("journal"):
            return "failed before any change" + (" (broker down)" if BROKER_DOWN in r.stdout + r.stderr else "")
        return self._undo(kind, op)

    def kill_airflow_task(self) -> None:
        """A reset run from Airflow whose task is killed -9 while it holds the app's lease."""
        from streamops.ledger import Ledger

        assert self.airflow is not None
        run_id = self.airflow.trigger("streamops_reset", {"app": APP, "target": "earliest", "stop_first": True,
                                                          "dry_run": False})
        ledger = Ledger.open(self.settings.ledger_db_url)
        try:
            deadline, killed = time.time() + 300, None
            for n in itertools.count():
                if time.time() > deadline or (n % 40 == 39 and self.airflow.state("streamops_reset", run_id)
                                              in ("success", "failed")):
                    break  # refused (another operation holds the app), or done before it was seen
                lease = ledger.lease(APP)
                if lease and (lease["holder"] or "").startswith(f"airflow:streamops_reset/{run_id}/") and lease["pid"]:
                    time.sleep(self.rng.uniform(0, 4))
                    with contextlib.suppress(ProcessLookupError):
                        if (ledger.lease(APP) or {}).get("pid") == lease["pid"]:
                            os.kill(int(lease["pid"]), signal.SIGKILL)
                            killed = lease["operation_id"]
                    break
                time.sleep(0.05)
        finally:
            ledger.close()
        state, text = self._airflow_wait("streamops_reset", run_id)
        if killed is None or state == "success":
            return self._record("airflow reset task killed", "succeeded" if state == "success"
                                else self._outcome_text(text), text)
        self._record("airflow reset task killed", self._undo("reset", self._op(killed), airflow=True))

    # -- operations --------------------------------------------------------------------------------
    def airflow_operation(self, kind: str) -> None:
        assert self.airflow is not None
        if kind == "airflow-resize":
            self.parallelism = 3 - self.parallelism
            dag, conf = "streamops_resize", {"app": APP, "parallelism": self.parallelism, "strategy": "restart"}
        else:
            dag, conf = f"streamops_savepoint__{APP}", {}
        state, text = self._airflow_wait(dag, self.airflow.trigger(dag, conf))
        self._record(kind, "succeeded" if state == "success" else self._outcome_text(text), text)

    def _newest_savepoint(self) -> str | None:
        r = self.cli("savepoints", APP, "--json")
        try:
            listed = json.loads(r.stdout)
        except ValueError:
            return None
        items = listed if isinstance(listed, list) else listed.get("savepoints", [])
        return next((s["id"] for s in items if s.get("present")), None)

    def operation(self, kind: str) -> None:
        if kind in ("resize-restart", "resize-live"):
            self.parallelism = 3 - self.parallelism
            r = self.cli("resize", APP, "--parallelism", str(self.parallelism), "--strategy",
                         kind.removeprefix("resize-"), "--json")
        elif kind == "savepoint":
            r = self.cli("savepoint", APP, "--json")
        elif kind == "restore":
            sp = self._newest_savepoint()
            if sp is None:
                return self._record(kind, "refused", "no savepoint yet")
            r = self.cli("restore", APP, sp, "--json")
            if self._outcome(r) == "failed":
                return self._record(kind, self._undo("restore", self._last_op("restore")), r.stdout + r.stderr)
        elif kind == "compact":
            r = self.cli("compact", APP, "--json")
        else:  # reset-undo
            r = self.cli("reset", APP, "--to-earliest", "--stop-first", "--json")
            if r.returncode == 0:
                u = self.cli("undo", APP, str(json.loads(r.stdout)["operation_id"]), "--stop-first", "--json")
                if self._outcome(u) == "failed":  # the undo failed half way: it is undone in turn
                    return self._record(kind, self._undo("undo", self._last_op("undo")), u.stdout + u.stderr)
                return self._record(kind, self._outcome(u), u.stdout + u.stderr)
            if self._outcome(r) == "failed":
                return self._record(kind, self._undo("reset", self._last_op("reset")), r.stdout + r.stderr)
        return self._record(kind, self._outcome(r), r.stdout + r.stderr)

    # -- refusals --------------------------------------------------------------------------------
    def repair_if_refused(self) -> None:
        """A driver that refused to start (the broker lost committed batches or input) is repaired
        as its message says: everything computed again from the input there is."""
        from streamops.lifecycle import driver

        path = driver.log_path(self.settings, APP)
        if not path.exists():
            return
        with path.open("rb") as f:
            f.seek(self._log_seen)
            new = f.read().decode(errors="replace")
            self._log_seen = f.tell()
        if "refused to start (CheckpointMismatchError)" not in new:
            return
        self.log("  driver refused to start (CheckpointMismatchError): repairing with reset --to-earliest")
        if self._reset():
            self.report.repairs += 1
        self._deploy()

    def _reset(self) -> bool:
        """``reset --to-earliest``, the repair refusals name; retried while another operation runs."""
        for _ in range(60):
            r = self.cli("reset", APP, "--to-earliest", "--stop-first", "--json")
            if r.returncode == 0:
                return True
            if self._outcome(r) == "failed":
                steps = [s["step"] for s in (self._last_op("reset") or {}).get("journal") or []]
                if steps and steps[-1] == "restart":  # done but for the start: finish it
                    self._deploy(force=True)
                    return True
            time.sleep(3)
        self.report.problems.append("could not reset in 180 s")
        return False

    def _deploy(self, *, force: bool = False) -> None:
        from streamops.ledger import Ledger

        ledger = Ledger.open(self.settings.ledger_db_url)
        try:
            observed = (ledger.observed(APP) or {}).get("status")
        finally:
            ledger.close()
        if force:
            self.cli("deploy", APP, "--parallelism", str(self.parallelism), "--json")
        elif observed == "crash-loop":  # the supervisor gave up (chaos kills a lot): deploy again, as it says
            self.log("  the supervisor gave up after repeated crashes: deploying again")
            self.report.redeploys += 1
            self.cli("deploy", APP, "--parallelism", str(self.parallelism), "--json")

    # -- the run ------------------------------------------------------------------------------------
    def run(self, minutes: float) -> Report:
        kinds = {**FAULTS, **OPERATIONS, **(AIRFLOW_ONLY if self.airflow else {})}
        if not self.cluster:
            kinds = {k: w for k, w in kinds.items() if k not in CLUSTER_ONLY}
        names, weights = list(kinds), list(kinds.values())
        t_end = time.time() + minutes * 60
        next_at = time.time() + self.schedule.uniform(5, 15)
        while time.time() < t_end:
            self.repair_if_refused()
            self._deploy()
            if time.time() >= next_at:
                kind = self.schedule.choices(names, weights)[0]
                self.log(f"[{time.strftime('%H:%M:%S')}] {kind}")
                is_fault = kind in FAULTS or kind == "kill-airflow-task"
                with self.lock:
                    if is_fault:
                        self.report.faults[kind] += 1
                if is_fault:
                    fn = getattr(self, kind.replace("-", "_"))
                elif kind.startswith("airflow-"):
                    fn = lambda k=kind: self.airflow_operation(k)
                else:
                    fn = lambda k=kind: self.operation(k)
                if kind in ("kill-driver", "kill-executor"):
                    fn()  # instant
                else:
                    self.background(kind, fn)
                next_at = time.time() + self.schedule.uniform(8, 25)
            time.sleep(0.5)
        self.report.minutes = minutes
        return self.report

    def finish(self) -> None:
        """Let what runs end, bring everything up, then ``settle``."""
        for t in self.threads:
            t.join(timeout=900)
        manager.up(self.settings, only=["kafka", "supervisor"])
        self.repair_if_refused()
        self._deploy()
        self.settle()

    def settle(self) -> None:
        """Start the app (deploy and its driver compare the last marker with the checkpoint: a
        refusal, batches the broker lost, is repaired as it says), let it reach the input's end and
        stop it, for the check."""
        for _ in range(3):
            r = self.cli("deploy", APP, "--parallelism", str(self.parallelism), "--json")
            if r.returncode == 0:
                break
            if "CheckpointMismatchError" in r.stdout + r.stderr:
                self.log("  deploy refused (CheckpointMismatchError): repairing with reset --to-earliest")
                self.report.repairs += self._reset()
                continue
            if self._outcome(r) != "refused":
                self.report.problems.append(f"final deploy: {(r.stdout + r.stderr)[-500:]}")
            break
        self.repair_if_refused()
        if not caught_up(self.settings):
            self.report.problems.append("the app did not catch up with the input in 600 s")
        r = self.cli("stop", APP, "--json")
        from streamops.lifecycle import driver

        if r.returncode != 0 or driver.running(self.settings, APP) is not None:  # check would compare moving data
            self.report.problems.append(f"the app did not stop before the check: {(r.stdout + r.stderr)[-500:]}")


def caught_up(settings: Settings, timeout: float = 600) -> bool:
    """Until the checkpoint's committed offsets reach the input's end (the load has stopped)."""
    from streamops.app.checkpoint import checkpoint_dir
    from streamops.checkpoints import layout
    from streamops.kafka.admin import end_offsets
    from streamops.spec import default_spec_path, get_app, load_specs

    spec = get_app(load_specs(default_spec_path(settings.repo)), APP)
    ends = {p: hi for p, (_lo, hi) in end_offsets(settings.kafka_bootstrap, "user-events").items()}
    deadline = time.time() + timeout
    while time.time() < deadline:
        done = layout.committed_offsets(checkpoint_dir(settings, spec)).get("user-events", {})
        if all(done.get(p, 0) >= e for p, e in ends.items()):
            return True
        time.sleep(2)
    return False


def longest_gap(settings: Settings, start_ms: int, end_ms: int) -> float:
    """Longest time between two batch commits (markers' commit times) in [start, end]."""
    from streamops.kafka.read import read_topic

    times = [start_ms, end_ms]
    for m in read_topic(settings.kafka_bootstrap, f"_streamops-{APP}-commits"):
        marker = json.loads(m.value()) if m.value() else {}
        at = marker.get("committed_at_ms")
        if at and not marker.get("rewind") and start_ms < at < end_ms:
            times.append(at)
    times.sort()
    return max(b - a for a, b in itertools.pairwise(times)) / 1000


def run_chaos(settings: Settings, *, minutes: float, seed: int, rate: int, cluster: bool, airflow: bool = False,
              check: Callable[[], dict] | None = None, log=print) -> Report:
    """Deploy, load, chaos for ``minutes``, then catch up and check (the platform must be up:
    kafka and the supervisor, the Spark cluster when ``cluster``, Airflow when ``airflow``).
    ``check``: what ``streamops check APP --json`` prints, got another way (in process)."""
    given = check

    def check() -> dict:
        """The check's report; an open transaction it names is waited out and the check run again."""
        from streamops.kafka.exceptions import OpenTransactionError

        for _ in range(3):
            try:  # the CLI's check: ``cli`` has ended what it named
                out = given() if given else json.loads(chaos.cli("check", APP, "--json", timeout=1200).stdout)
            except OpenTransactionError as exc:
                out = {"ok": False, "error": str(exc)}
                chaos.end_hanging_transaction(str(exc))
            if HANGING not in (out.get("error") or ""):
                return out
            chaos.settle()
        return out

    chaos = Chaos(settings, seed=seed, cluster=cluster, airflow=airflow, log=log)
    if chaos.airflow is not None:
        chaos.airflow.wait_for_dags(["streamops_reset", "streamops_resize", f"streamops_savepoint__{APP}"])
    feeder = Feeder(settings, rate, seed)
    r = chaos.cli("deploy", APP, "--parallelism", "1", "--json")
    if r.returncode != 0:
        raise RuntimeError(f"deploy failed: {r.stderr[-2000:]}")
    feeder.start()
    t0 = int(time.time() * 1000)
    try:
        report = chaos.run(minutes)
    finally:
        t1 = int(time.time() * 1000)
        chaos.finish()
        feeder.halt.set()
        feeder.join(300)
    report.longest_gap_s = longest_gap(settings, t0, t1)
    out = check()
    report.check_ok = bool(out.get("ok"))
    report.input_records = int(out.get("input_records") or 0)
    for v in out.get("views", []):
        if v["view"] == "dlq":
            report.lost += v["missing"]
            report.duplicated += v["duplicates"] + v["extra"]
        else:
            report.lost += v["missing"] + v["different"]
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=int, default=200, help="events per second")
    ap.add_argument("--master", choices=("cluster", "local"), default="cluster",
                    help="drivers on the Spark standalone cluster (executors to kill) or local[2]")
    ap.add_argument("--airflow", action="store_true",
                    help="run Airflow too: operations from its DAGs, and Airflow tasks killed half way")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the platform is stopped in finally
    home = Path(tempfile.mkdtemp(prefix="streamops-chaos-"))
    settings = isolated_settings(home)
    cluster = args.master == "cluster"
    if not cluster:
        settings = settings.model_copy(update={"spark_master": "local[2]"})
    try:
        groups = ["kafka", "spark", "supervisor"] if cluster else ["kafka", "supervisor"]
        manager.up(settings, only=[*groups, *(["airflow"] if args.airflow else [])])
        report = run_chaos(settings, minutes=args.minutes, seed=args.seed, rate=args.rate, cluster=cluster,
                           airflow=args.airflow, log=lambda m: print(m, flush=True))
    finally:
        manager.down(settings)
    print(f"\nchaos: seed {args.seed}, {args.minutes:g} min, {args.rate} events/s, master {args.master}"
          f"{', with Airflow' if args.airflow else ''}\n")
    print(report.tables())
    for p in report.problems:
        print(f"PROBLEM: {p}")
    ok = report.check_ok and not report.lost and not report.duplicated and not report.problems
    print(f"\n{'OK' if ok else 'NOT OK'}: every fault left the app exact" if ok else "\nNOT OK")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
