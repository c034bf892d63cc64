"""Live resize: the running driver adds or removes executors of its own application.

A standalone master caps an application by ``spark.cores.max``, fixed when it registers, so
drivers on ``spark://`` (and ``k8s://``) masters register with the spec's *maximum*
parallelism and immediately hold themselves to the wanted number of one-core executors with
``SparkContext.requestTotalExecutors`` (the master's executor limit); executors beyond it (the
master would launch up to the cap at once; ``session.start_at`` has it launch only the target)
are removed before the query starts (``settle``) or at the next batch boundary. A resize
is a new target: scale-out raises the limit and the master launches executors on free worker
cores; scale-in kills the surplus, whose tasks Spark reruns elsewhere (state stores reload from
the checkpoint; the transactional sink keeps the batch exactly-once). The query never restarts.

Requests arrive through ``apps/APP/control.json`` (``app.control``, written by
``request_parallelism``), which the driver polls from its main loop.

Named ``live`` in the driver package (it was ``spark/elastic.py``): resizing the running
application is the driver's own business; the supervisor and the operations only write the
request (``app.control``). Beside the control here: the running query as the resize sees it
(``ActiveQuery``) and the count of executors the driver reports.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from streamops.app.control import read_request
from streamops.app.dir import AppDir

log = logging.getLogger("streamops.elastic")
runtime_log = logging.getLogger("streamops.runtime")  # the driver's own lines (``control_step``)


def check_target(parallelism: int, low: int, high: int) -> str | None:
    """Why a requested size cannot be applied live, None if it can."""
    if parallelism < low or parallelism > high:
        return (f"parallelism {parallelism} is outside [{low}, {high}] that this driver registered for; "
                "a resize beyond it needs --strategy restart")
    return None


def surplus(executors: dict[str, int], target: int) -> list[str]:
    """Which executors to remove to get down to ``target``: the lightest (e.g. fewest state
    stores or tasks), newest first among equals — the oldest hold the warm state stores."""
    if len(executors) <= target:
        return []
    ranked = sorted(executors, key=lambda e: (executors[e], -_num(e)))
    return ranked[: len(executors) - target]


def _num(executor_id: str) -> int:
    try:
        return int(executor_id)
    except ValueError:
        return -1


LOCALITY_KEYS = ("spark.locality.wait.process", "spark.locality.wait.node")
#: batches after a resize during which tasks may start away from their preferred executor
REBALANCE_BATCHES = 2


class ExecutorScaler:
    """Holds a running SparkContext to ``target`` one-core executors (see module docstring)."""

    def __init__(self, spark: Any, target: int, *,
                 cold: Callable[[set[str]], set[str]] = lambda _registered: set()) -> None:
        self.sc = spark.sparkContext
        self.jsc = self.sc._jsc.sc()
        self.jvm = self.sc._jvm
        self.target = target
        self.dying: set[str] = set()  # asked to die, still registered until the master confirms
        #: which registered executors still warm up (``ExecutorWarmup.cold``): not counted yet
        self.cold = cold
        self.request(target)

    def request(self, target: int) -> None:
        self.target = target
        empty = self.jvm.org.apache.spark.api.python.PythonUtils.toScalaMap({})
        ok = self.jsc.requestTotalExecutors(target, 0, empty)
        log.info("executor target %d requested (accepted: %s)", target, ok)

    def registered(self) -> set[str]:
        """Registered executors not being removed (warm or not)."""
        ids = self.jsc.getExecutorIds()  # a Scala Seq: py4j cannot iterate it
        registered = {str(ids.apply(i)) for i in range(ids.size())}
        self.dying &= registered
        return registered - self.dying

    def executors(self) -> dict[str, int]:
        """Registered, warm executors not being removed: id -> weight (all equal: the newest go first)."""
        registered = self.registered()
        return {e: 0 for e in registered - self.cold(registered)}

    def trim(self, *, idle: bool = False) -> list[str]:
        """Kill executors beyond the target (and hold the master's limit at the target).

        ``idle``: called between batches rather than at a batch boundary. Spark is then asked not
        to kill an executor that runs a task (``force=false``); it decides that under the same
        lock under which it offers executors tasks and marks the ones it kills as pending
        removal, so no task can start on an executor being removed. A busy one stays until the
        next boundary. At a boundary (``idle=False``) every task of the batch is done: force.
        """
        victims = surplus(self.executors(), self.target)
        if victims:
            seq = self.jvm.org.apache.spark.api.python.PythonUtils.toSeq(victims)
            # (ids, adjustTargetNumExecutors, countFailures, force) -> the ids it kills; what
            # SparkContext.killExecutors does, which refuses while dynamic allocation is on
            # (``session.start_at``)
            killed = self.jsc.schedulerBackend().killExecutors(seq, True, False, not idle)
            victims = [str(killed.apply(i)) for i in range(killed.size())]
            if not victims:
                return []
            self.dying |= set(victims)
            log.warning("removed executors %s (target %d%s)", victims, self.target,
                        ", no batch running" if idle else "")
            self.request(self.target)  # killExecutors lowered the requested total by the killed ones
        return victims

    def relax_locality(self, relaxed: bool) -> None:
        """Let tasks start on any executor at once (``relaxed``), or wait for their preferred
        one again (Spark's default, 3 s per locality level).

        After a scale-in, tasks that preferred a removed executor would wait out the delay;
        relaxed for a couple of batches they start elsewhere (state reloaded from the
        checkpoint), the state store coordinator records the new locations, and normal
        locality keeps them there. A scale-out moves state by plan instead
        (``placement``), and relaxes only if that fails. Each new task set reads its waits
        from the live SparkConf.
        """
        conf = self.jsc.conf()
        if relaxed:
            if not hasattr(self, "_saved_waits"):
                self._saved_waits = {k: conf.get(k, None) if conf.contains(k) else None for k in LOCALITY_KEYS}
            for k in LOCALITY_KEYS:
                conf.set(k, "0")
        elif hasattr(self, "_saved_waits"):
            for k, v in self._saved_waits.items():
                if v is None:
                    conf.remove(k)
                else:
                    conf.set(k, v)
            del self._saved_waits
        log.info("task locality waits %s", "relaxed" if relaxed else "restored")


def settle(scaler: ExecutorScaler, *, timeout: float, stopped: Callable[[], bool],
           poll: float = 0.25) -> list[str]:
    """Wait for the target's executors, before any query runs, and remove any beyond it; returns
    the removed ones.

    The cluster launches only the target's executors (``session.start_at``). Had it launched up
    to the cap, the surplus would have started Python workers and taken part in the first batch
    (a deploy at 1 of 4 took 47 s for its first batch).
    """
    removed: list[str] = []
    deadline = time.monotonic() + timeout
    while len(scaler.executors()) < scaler.target and time.monotonic() < deadline and not stopped():
        removed += scaler.trim()
        time.sleep(poll)
    return removed + scaler.trim()


class QueryView(Protocol):
    """The running query as the live resize needs it."""

    def idle(self) -> bool:
        """No batch runs and no input waits."""

    def place_state(self, executors: list[str]) -> dict[int, str] | None:
        """Move state stores onto these executors (a planned scale-out); None when no query runs."""


class LiveControl:
    """The driver side of a live resize.

    ``tick`` (from the driver's main loop) applies a new request from ``control.json``: a
    scale-out raises the executor target at once; a scale-in lowers it, and removes the surplus
    at once if no batch runs (``query_idle``: an idle query runs no batch, so waiting for a
    boundary would wait for input; see ``ExecutorScaler.trim``). ``boundary`` (from the sink,
    after a batch's tasks are all done and before it commits) removes surplus executors while
    batches run, so no running task or shuffle output of the batch is lost with them. The new size
    is declared (in the observed state it reports to the ledger) only once exactly that many
    executors are registered, so "converged" means the executors really are there; new ones
    count once warm, or, while the query is idle, once their warm-up is queued ahead of it
    (``ExecutorWarmup.count_early``).
    """

    def __init__(self, scaler: ExecutorScaler, app_dir: AppDir, low: int, high: int,
                 report: Callable[..., None], warmup: Any = None, query: QueryView | None = None) -> None:
        self.scaler = scaler  # built with ``cold=warmup.cold`` when there is a warm-up
        self.warmup = warmup  # an ExecutorWarmup: new executors count once warm
        #: the running query: whether it is idle, and where to move state stores on a scale-out
        self.query = query
        self.app_dir = app_dir
        self.low, self.high = low, high
        self.report = report
        self.current = scaler.target  # the size declared to the platform
        self.rebalance = 0  # batches left with relaxed locality
        # a request already there was written after this driver's launch (launch deletes the
        # file), e.g. while it was starting: apply it too
        self.seen = 0.0
        self.lock = threading.Lock()  # tick runs in the main loop, boundary in the sink's thread

    def tick(self) -> dict[str, Any] | None:
        """Between boundaries; returns what changed (for the heartbeat), None if nothing did."""
        with self.lock:
            return self._tick()

    def boundary(self) -> dict[str, Any] | None:
        """A batch's tasks are done: the safe moment to remove executors."""
        with self.lock:
            return self._boundary()

    def _tick(self) -> dict[str, Any] | None:
        change: dict[str, Any] | None = None
        req = read_request(self.app_dir)
        if req is not None and req.requested_at > self.seen:
            self.seen = req.requested_at
            problem = check_target(req.parallelism, self.low, self.high)
            if problem:
                log.error("live resize refused: %s", problem)
                change = {"control_error": problem}
            else:
                log.warning("live resize %d -> %d requested", self.current, req.parallelism)
                if self.warmup is not None:  # hold executors that register for a scale-out
                    have = self.scaler.executors()
                    self.warmup.arm(req.parallelism > len(have), set(have))
                self.scaler.request(req.parallelism)
                change = {"resize_requested": req.parallelism}
        if self.warmup is not None:
            self.warmup.poll(self.scaler.registered())
        if len(self.scaler.executors()) > self.scaler.target and self._idle():
            killed = self.scaler.trim(idle=True)
            if killed:
                change = {**(change or {}), "removed_executors": killed}
        return self._declare(change)

    def _place(self, executors: list[str]) -> dict[int, str] | None:
        """Planned state moves onto new executors; None if it could not be done."""
        if self.query is None:
            return None
        try:
            moves = self.query.place_state(executors)
            if moves is None:  # no query runs right now
                return None
        except Exception as exc:  # noqa: BLE001 - fall back to relaxed locality
            log.warning("state placement failed (%s); relaxing locality instead", str(exc).splitlines()[0][:300])
            return None
        log.warning("state partitions moved: %s", moves or "none")
        return moves

    def _idle(self) -> bool:
        return self.query is not None and self.query.idle()

    def _boundary(self) -> dict[str, Any] | None:
        change: dict[str, Any] | None = None
        if self.rebalance:
            self.rebalance -= 1
            if not self.rebalance:
                self.scaler.relax_locality(False)
        killed = self.scaler.trim()
        if killed:
            change = {"removed_executors": killed}
        return self._declare(change)

    def _declare(self, change: dict[str, Any] | None) -> dict[str, Any] | None:
        executors = self.scaler.executors()
        have = len(executors)
        if (self.current < self.scaler.target and have < self.scaler.target and self.warmup is not None
                and self._idle()
                and self.warmup.count_early(self.scaler.registered())):
            # an idle query: count new executors once their warm-up is queued, not once it ends
            executors = self.scaler.executors()
            have = len(executors)
        if self.scaler.target != self.current and have == self.scaler.target:
            log.warning("live resize applied: %d executors (was %d)", have, self.current)
            moves = self._place(sorted(executors)) if self.scaler.target > self.current else None
            if moves is None:
                # tasks would wait out the locality delay: for executors being removed
                # (scale-in), or for new ones that hold no state yet (scale-out unplanned)
                self.scaler.relax_locality(True)
                self.rebalance = REBALANCE_BATCHES
            else:
                change = {**(change or {}), "state_moves": {str(p): e for p, e in sorted(moves.items())}}
            self.current = self.scaler.target
            if self.warmup is not None:
                self.warmup.arm(False, set())
                if self.warmup.took:
                    change = {**(change or {}), "warmup_seconds": dict(self.warmup.took)}
            self.report(parallelism=self.current, executors=have)
            change = {**(change or {}), "parallelism": self.current, "control_error": None}
        return change


class ActiveQuery:
    """The app's streaming query while it runs, as the live resize sees it (``QueryView``)."""

    def __init__(self, spark, state_partitions: int) -> None:
        self.spark = spark
        self.state_partitions = state_partitions
        self.query = None
        self._placement = None

    def attach(self, query) -> None:
        from streamops.spark.driver.placement import StatePlacement

        self.query = query
        self._placement = StatePlacement(self.spark, query, self.state_partitions)

    def detach(self) -> None:
        self.query = self._placement = None

    def idle(self) -> bool:
        return self.query is not None and _idle(self.query.status)

    def place_state(self, executors: list[str]) -> dict[int, str] | None:
        return None if self._placement is None else self._placement.rebalance(executors)


def _idle(status: dict) -> bool:
    """No batch runs and no input waits (Spark's last trigger found none): the query is idle.
    A gap between two batches under load is not idle, so the loaded path stays the boundary's."""
    return not status.get("isTriggerActive", True) and not status.get("isDataAvailable", True)


def control_step(step: Callable[[], dict | None]) -> dict | None:
    """``LiveControl.tick`` or ``boundary``; a failure is reported, never raised."""
    try:
        return step()
    except Exception as exc:  # noqa: BLE001 - resizing must never take the query down
        runtime_log.error("live resize control failed: %s", exc)
        return {"control_error": str(exc)[:500]}


def count_executors(spark: Any, control: LiveControl | None) -> int:
    """Executors registered with the driver (local mode: the driver itself, 1); with live
    resizing, those not being removed."""
    if control is not None:
        with control.lock:
            return len(control.scaler.executors())
    sc = spark.sparkContext
    if sc.master.startswith("local"):
        return 1
    try:
        return max(0, sc._jsc.sc().getExecutorMemoryStatus().size() - 1)
    except Exception:  # noqa: BLE001 - e.g. Spark Connect: unknown
        return 0
