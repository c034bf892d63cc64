"""Live resize, driver side: requests, surplus choice, and when a new size counts as applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamops.app import control
from streamops.app.dir import AppDir
from streamops.spark.driver import live


class FakeScaler:
    """Stands in for the SparkContext: executors register only when the test says so."""

    def __init__(self, target: int, registered: list[str]) -> None:
        self.target = target
        self.registered = list(registered)
        self.requests: list[int] = []
        self.killed: list[str] = []
        self.relaxed: list[bool] = []
        self.busy: set[str] = set()  # executors running a task (Spark refuses them when idle=True)
        self.trims: list[bool] = []

    def request(self, target: int) -> None:
        self.target = target
        self.requests.append(target)

    def executors(self) -> dict[str, int]:
        return {e: 0 for e in self.registered}

    def trim(self, *, idle: bool = False) -> list[str]:
        self.trims.append(idle)
        victims = live.surplus(self.executors(), self.target)
        if idle:  # as Spark's killExecutors(force=false): a busy executor is not killed
            victims = [e for e in victims if e not in self.busy]
        self.registered = [e for e in self.registered if e not in victims]
        self.killed += victims
        return victims

    def relax_locality(self, relaxed: bool) -> None:
        self.relaxed.append(relaxed)


def test_surplus_removes_the_newest_first() -> None:
    assert live.surplus({"0": 0, "1": 0, "2": 0, "3": 0}, 2) == ["3", "2"]
    assert live.surplus({"0": 0, "1": 0}, 2) == []
    assert live.surplus({"0": 5, "7": 1, "9": 5}, 2) == ["7"]  # lightest first


class FakeQuery:
    """The running query as LiveControl sees it (``live.QueryView``)."""

    def __init__(self) -> None:
        self.now_idle = False
        self.place = None

    def idle(self) -> bool:
        return self.now_idle

    def place_state(self, executors: list[str]) -> dict[int, str] | None:
        return None if self.place is None else self.place(executors)


def test_check_target_names_the_limit() -> None:
    assert live.check_target(2, 1, 4) is None
    assert "outside [1, 4]" in live.check_target(5, 1, 4)
    assert "outside [1, 4]" in live.check_target(0, 1, 4)


def test_over_launched_executors_are_removed_at_the_first_batch_boundary(tmp_path: Path) -> None:
    reports: list[dict] = []
    scaler = FakeScaler(1, ["0", "1", "2", "3"])  # the master launched up to the cap first
    query = FakeQuery()
    ctl = live.LiveControl(scaler, AppDir(tmp_path), 1, 4, lambda **kw: reports.append(kw), query=query)
    assert ctl.tick() is None and scaler.killed == []  # never while a batch may be running
    assert ctl.boundary() == {"removed_executors": ["3", "2", "1"]}
    assert scaler.registered == ["0"] and reports == []  # the size did not change: nothing to declare


def test_scale_out_is_declared_when_the_executors_are_there_and_rebalances_state(tmp_path: Path) -> None:
    reports: list[dict] = []
    scaler = FakeScaler(1, ["0"])
    query = FakeQuery()
    ctl = live.LiveControl(scaler, AppDir(tmp_path), 1, 4, lambda **kw: reports.append(kw), query=query)
    control.write_request(AppDir(tmp_path), 2)
    assert ctl.tick() == {"resize_requested": 2}
    assert scaler.requests == [2] and reports == []
    assert ctl.tick() is None  # the same request is applied once
    scaler.registered.append("4")
    assert ctl.tick() == {"parallelism": 2, "control_error": None}
    assert reports == [{"parallelism": 2, "executors": 2}]
    # stateful tasks may leave their old executor for REBALANCE_BATCHES batches, then locality is back
    assert scaler.relaxed == [True]
    for _ in range(live.REBALANCE_BATCHES):
        assert ctl.boundary() is None
    assert scaler.relaxed == [True, False]


def test_scale_in_while_a_batch_runs_removes_executors_only_at_its_boundary(tmp_path: Path) -> None:
    reports: list[dict] = []
    scaler = FakeScaler(2, ["0", "4"])
    query = FakeQuery()
    ctl = live.LiveControl(scaler, AppDir(tmp_path), 1, 4, lambda **kw: reports.append(kw), query=query)
    query.now_idle = False  # a batch runs
    control.write_request(AppDir(tmp_path), 1)
    assert ctl.tick() == {"resize_requested": 1}
    assert scaler.registered == ["0", "4"] and reports == []  # a batch may be using both
    assert ctl.boundary() == {"removed_executors": ["4"], "parallelism": 1, "control_error": None}
    assert scaler.registered == ["0"] and reports == [{"parallelism": 1, "executors": 1}]
    assert scaler.relaxed == [True]  # tasks that preferred the removed executor need not wait for it


def test_out_of_range_request_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    scaler = FakeScaler(2, ["0", "1"])
    query = FakeQuery()
    ctl = live.LiveControl(scaler, AppDir(tmp_path), 1, 4, lambda **kw: None, query=query)
    control.write_request(AppDir(tmp_path), 6)
    change = ctl.tick()
    assert "outside [1, 4]" in change["control_error"]
    assert scaler.target == 2 and scaler.requests == []


def test_a_request_written_while_the_driver_was_starting_is_applied(tmp_path: Path) -> None:
    control.write_request(AppDir(tmp_path), 3)
    scaler = FakeScaler(2, ["0", "1"])
    query = FakeQuery()
    ctl = live.LiveControl(scaler, AppDir(tmp_path), 1, 4, lambda **kw: None, query=query)
    assert ctl.tick() == {"resize_requested": 3} and scaler.requests == [3]


@pytest.mark.parametrize("fails", [False, True])
def test_a_scale_out_moves_planned_state_partitions_instead_of_relaxing_locality(tmp_path: Path, fails: bool) -> None:
    scaler = FakeScaler(1, ["0"])
    query = FakeQuery()
    ctl = live.LiveControl(scaler, AppDir(tmp_path), 1, 4, lambda **kw: None, query=query)
    asked: list[list[str]] = []

    def place(executors: list[str]) -> dict[int, str]:
        asked.append(executors)
        if fails:
            raise RuntimeError("py4j: no coordinator")
        return {2: "4", 3: "4"}

    query.place = place
    control.write_request(AppDir(tmp_path), 2)
    ctl.tick()
    scaler.registered.append("4")
    change = ctl.tick()
    assert asked == [["0", "4"]]
    if fails:  # the old way: tasks may go anywhere for a couple of batches
        assert scaler.relaxed == [True] and "state_moves" not in change
    else:
        assert scaler.relaxed == [] and change["state_moves"] == {"2": "4", "3": "4"}
    assert change["parallelism"] == 2
    # a scale-in still relaxes: the removed executor's partitions must not wait for it
    control.write_request(AppDir(tmp_path), 1)
    ctl.tick()
    ctl.boundary()
    assert asked == [["0", "4"]] and scaler.relaxed[-1] is True


def test_scale_in_of_an_idle_query_removes_executors_at_once(tmp_path: Path) -> None:
    """No batch runs (no input): waiting for a boundary would wait for input that may not come."""
    reports: list[dict] = []
    scaler = FakeScaler(3, ["0", "4", "5"])
    query = FakeQuery()
    ctl = live.LiveControl(scaler, AppDir(tmp_path), 1, 4, lambda **kw: reports.append(kw), query=query)
    query.now_idle = True
    control.write_request(AppDir(tmp_path), 2)
    assert ctl.tick() == {"resize_requested": 2, "removed_executors": ["5"], "parallelism": 2, "control_error": None}
    assert scaler.trims == [True]  # the non-forcing kill: Spark refuses executors that run a task
    assert scaler.registered == ["0", "4"] and reports == [{"parallelism": 2, "executors": 2}]
    assert scaler.relaxed == [True]
    assert ctl.tick() is None  # nothing more to do


def test_idle_scale_in_leaves_an_executor_that_runs_a_task_for_the_boundary(tmp_path: Path) -> None:
    reports: list[dict] = []
    scaler = FakeScaler(2, ["0", "4"])
    query = FakeQuery()
    ctl = live.LiveControl(scaler, AppDir(tmp_path), 1, 4, lambda **kw: reports.append(kw), query=query)
    query.now_idle = True  # a batch started between the check and the kill: "4" got a task
    scaler.busy = {"4"}
    control.write_request(AppDir(tmp_path), 1)
    assert ctl.tick() == {"resize_requested": 1}
    assert scaler.registered == ["0", "4"] and reports == []
    assert ctl.boundary() == {"removed_executors": ["4"], "parallelism": 1, "control_error": None}
    assert scaler.trims == [True, False]


def test_no_idle_trim_before_the_query_runs(tmp_path: Path) -> None:
    scaler = FakeScaler(1, ["0", "1"])  # over-launched at start, query not started yet
    query = FakeQuery()
    ctl = live.LiveControl(scaler, AppDir(tmp_path), 1, 4, lambda **kw: None, query=query)
    assert ctl.tick() is None and scaler.trims == []


@pytest.mark.parametrize("trigger_active,data_available,idle", [
    (False, False, True),   # no input: idle
    (False, True, False),   # a gap between two batches under load: the next one is coming
    (True, False, False),   # a batch runs
    (True, True, False),
])
def test_idle_means_no_batch_running_and_no_input_waiting(trigger_active: bool, data_available: bool,
                                                          idle: bool) -> None:
    from streamops.spark.driver.live import _idle

    status = {"message": "x", "isTriggerActive": trigger_active, "isDataAvailable": data_available}
    assert _idle(status) is idle
    assert _idle({}) is False  # unknown: not idle (the boundary path is always safe)


class RegisteringScaler(FakeScaler):
    """Executors register over time: each look at them lets the next of ``arrivals`` in."""

    def __init__(self, target: int, arrivals: list[list[str]]) -> None:
        super().__init__(target, [])
        self.arrivals = arrivals

    def executors(self) -> dict[str, int]:
        if self.arrivals:
            self.registered += [e for e in self.arrivals.pop(0) if e not in self.killed]
        return super().executors()


def test_a_new_driver_waits_for_its_executors_and_removes_any_surplus_before_a_query_runs() -> None:
    scaler = RegisteringScaler(1, [[], [], ["0", "1"]])
    removed = live.settle(scaler, timeout=30, stopped=lambda: False, poll=0.01)
    assert removed == ["1"] and list(scaler.executors()) == ["0"]
    assert scaler.trims and not any(scaler.trims)  # nothing runs yet: no need to spare busy ones


def test_settling_stops_when_the_driver_is_stopped() -> None:
    scaler = RegisteringScaler(2, [])  # nothing ever registers
    calls = iter(range(5))
    assert live.settle(scaler, timeout=3600, stopped=lambda: next(calls, 4) >= 3, poll=0) == []
    assert len(scaler.trims) == 4
