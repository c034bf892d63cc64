"""Warm-up of new executors before a live scale-out counts them: which executors are held,
warmed and counted (the plugin jar build and the FAIR pools: ``tests/unit/spark/test_warmup_plugin.py``)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from streamops.app import control
from streamops.app.dir import AppDir
from streamops.spark import warmup_plugin
from streamops.spark.driver import live, warmup
from tests.unit.spark.driver.test_live import FakeQuery


class FakePlugin:
    """The driver side of WarmupPlugin as py4j shows it."""

    def __init__(self) -> None:
        self.on = False
        self.holding: list[str] = []
        self.released: list[str] = []
        self.warm: list[str] = []

    def armed(self) -> bool:
        return self.on

    def arm(self, on: bool) -> None:
        self.on = on

    def held(self) -> list[str]:
        return [e for e in self.holding if e not in self.released]

    def release(self, eid: str) -> None:
        self.released.append(eid)

    def warmed(self, eid: str) -> None:
        self.warm.append(eid)


def fake_spark(plugin: FakePlugin | None):
    jvm = SimpleNamespace(io=SimpleNamespace(streamops=SimpleNamespace(spark=SimpleNamespace(WarmupPlugin=plugin))))
    conf = {"spark.plugins": warmup_plugin.PLUGIN_CLASS} if plugin is not None else {}
    sc = SimpleNamespace(_jvm=jvm, _jsc=SimpleNamespace(sc=lambda: None),
                         getConf=lambda: SimpleNamespace(get=conf.get))
    return SimpleNamespace(sparkContext=sc)


def instant(w: warmup.ExecutorWarmup, gate: threading.Event | None = None) -> list[str]:
    """Replace the Spark part of a warm-up: record it, optionally wait for ``gate``."""
    done: list[str] = []

    def _warm(eid: str) -> None:
        if gate is not None:
            gate.wait(5)
        done.append(eid)
        if w.plugin is not None:
            w.plugin.release(eid)
        with w.lock:
            w.warming.pop(eid, None)
            w.took[eid] = 0.1

    w._warm = _warm  # type: ignore[method-assign]
    return done


def settle(w: warmup.ExecutorWarmup) -> None:
    for t in list(w.warming.values()):
        t.join(5)


def test_only_executors_held_for_a_scale_out_are_warmed_and_they_count_once_warm() -> None:
    plugin = FakePlugin()
    w = warmup.ExecutorWarmup(fake_spark(plugin), work=lambda eid, pin: None)
    assert w.holds
    gate = threading.Event()
    done = instant(w, gate)
    w.poll({"0"})
    assert done == [] and plugin.on is False  # not armed: nothing is held or warmed
    w.arm(True, {"0"})
    assert plugin.on is True
    # executor 5 registered but has not reached the plugin yet: already cold, not yet warmed
    assert w.cold({"0", "5"}) == {"5"}
    plugin.holding.append("5")
    w.poll({"0", "5"})
    w.poll({"0", "5"})  # a second poll does not start a second warm-up
    assert w.cold({"0", "5"}) == {"5"}
    gate.set()
    settle(w)
    assert done == ["5"] and plugin.released == ["5"]
    assert w.cold({"0", "5"}) == set() and w.took == {"5": 0.1}
    w.arm(False, set())
    assert plugin.on is False and w.cold({"0", "5"}) == set()


def test_without_the_plugin_every_new_executor_is_warmed_but_none_held() -> None:
    w = warmup.ExecutorWarmup(fake_spark(None), work=lambda eid, pin: None)
    assert not w.holds
    done = instant(w)
    w.arm(True, {"0", "1"})
    w.poll({"0", "1", "7"})
    settle(w)
    assert done == ["7"]  # the executors there before the scale-out are warm already


class WarmScaler:
    """ExecutorScaler's bookkeeping without a SparkContext."""

    def __init__(self, target: int, ids: list[str], cold=lambda registered: set()) -> None:
        self.target, self.ids = target, list(ids)
        self.cold = cold
        self.relaxed: list[bool] = []

    def request(self, target: int) -> None:
        self.target = target

    def registered(self) -> set[str]:
        return set(self.ids)

    def executors(self) -> dict[str, int]:
        registered = self.registered()
        return {e: 0 for e in registered - self.cold(registered)}

    def trim(self) -> list[str]:
        return []

    def relax_locality(self, relaxed: bool) -> None:
        self.relaxed.append(relaxed)


def _scale_out_control(tmp_path: Path):
    """A driver at one executor ("0") with the warm-up plugin; warm-ups wait for ``gate``."""
    plugin = FakePlugin()
    w = warmup.ExecutorWarmup(fake_spark(plugin), work=lambda eid, pin: None)
    gate = threading.Event()
    instant(w, gate)
    reports: list[dict] = []
    scaler = WarmScaler(1, ["0"], cold=w.cold)
    query = FakeQuery()
    ctl = live.LiveControl(scaler, AppDir(tmp_path), 1, 4, lambda **kw: reports.append(kw), warmup=w, query=query)
    return plugin, w, gate, reports, scaler, ctl, query


def test_a_scale_out_is_declared_only_when_the_new_executor_is_warm(tmp_path: Path) -> None:
    plugin, w, gate, reports, scaler, ctl, _query = _scale_out_control(tmp_path)
    control.write_request(AppDir(tmp_path), 2)
    assert ctl.tick() == {"resize_requested": 2} and plugin.on
    scaler.ids.append("3")  # registered, held in the plugin's init
    plugin.holding.append("3")
    assert ctl.tick() is None and ctl.boundary() is None  # cold: not counted, nothing declared
    assert reports == [] and scaler.relaxed == []
    gate.set()
    settle(w)
    change = ctl.tick()
    assert change == {"parallelism": 2, "control_error": None, "warmup_seconds": {"3": 0.1}}
    assert reports == [{"parallelism": 2, "executors": 2}] and scaler.relaxed == [True]
    assert plugin.on is False  # executors registering later (a replacement) are not held


def test_a_scale_in_does_not_arm_the_hold(tmp_path: Path) -> None:
    plugin = FakePlugin()
    w = warmup.ExecutorWarmup(fake_spark(plugin), work=lambda eid, pin: None)
    scaler = WarmScaler(2, ["0", "1"], cold=w.cold)
    query = FakeQuery()
    ctl = live.LiveControl(scaler, AppDir(tmp_path), 1, 4, lambda **kw: None, warmup=w, query=query)
    control.write_request(AppDir(tmp_path), 1)
    ctl.tick()
    assert plugin.on is False


class FakeConf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)

    def get(self, key: str) -> str:
        return self.values[key]

    def contains(self, key: str) -> bool:
        return key in self.values

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def remove(self, key: str) -> None:
        self.values.pop(key, None)


@pytest.mark.parametrize("before", [{}, {warmup.LOCALITY_KEY: "5s"}])
def test_overlapping_warm_ups_pin_the_locality_wait_and_restore_it_after_the_last(before: dict) -> None:
    w = warmup.ExecutorWarmup(fake_spark(None), work=lambda eid, pin: None)
    conf = FakeConf(before)
    w.jsc = SimpleNamespace(conf=lambda: conf)
    w.pin_locality(True)
    w.pin_locality(True)  # a second executor's warm-up starts before the first ends
    assert conf.values[warmup.LOCALITY_KEY] == warmup.PINNED_WAIT
    w.pin_locality(False)
    assert conf.values[warmup.LOCALITY_KEY] == warmup.PINNED_WAIT  # the second still plans its job
    w.pin_locality(False)
    assert conf.values == before


@pytest.mark.parametrize("mode", ["FAIR", "FIFO", None])
def test_queries_run_in_the_query_pool_only_with_fair_scheduling(mode: str | None) -> None:
    props: dict[str, str] = {}
    conf = {"spark.scheduler.mode": mode} if mode else {}
    sc = SimpleNamespace(getConf=lambda: SimpleNamespace(get=conf.get), setLocalProperty=props.__setitem__)
    warmup.use_query_pool(sc)
    assert props == ({"spark.scheduler.pool": warmup_plugin.QUERY_POOL} if mode == "FAIR" else {})


@pytest.mark.parametrize("idle", [True, False])
def test_an_idle_query_counts_a_new_executor_once_its_warm_up_is_queued(tmp_path: Path, idle: bool) -> None:
    """No batch to wait for: the new size is declared when the warm-up job is queued ahead of
    the query (released), not when it ends; while batches run it still waits until warm."""
    plugin, w, gate, reports, scaler, ctl, query = _scale_out_control(tmp_path)
    query.now_idle = idle
    control.write_request(AppDir(tmp_path), 2)
    ctl.tick()
    scaler.ids.append("3")
    plugin.holding.append("3")
    assert ctl.tick() is None and reports == []  # held, its warm-up job not queued yet: not counted
    with w.lock:
        w.released.setdefault("3", threading.Event()).set()  # the pinned job is queued: released
    change = ctl.tick()
    if idle:
        assert change is not None and change["parallelism"] == 2 and reports == [{"parallelism": 2, "executors": 2}]
        assert w.cold({"0", "3"}) == set()  # stays counted while its warm-up goes on
    else:
        assert change is None and reports == []
    gate.set()
    settle(w)
    if not idle:
        assert ctl.tick()["parallelism"] == 2
    assert w.cold({"0", "3"}) == set() and reports == [{"parallelism": 2, "executors": 2}]


class FakeStage:
    def __init__(self) -> None:
        self.active = 0

    def numActiveTasks(self) -> int:
        return self.active

    def numCompletedTasks(self) -> int:
        return 0

    def numFailedTasks(self) -> int:
        return 0


class FakeTracker:
    """SparkContext.statusTracker() for one warm-up job group: no job, then a job whose stage is
    submitted, then its first task running (after ``queued_after`` and ``running_after`` polls)."""

    def __init__(self, group: str, queued_after: int, running_after: int) -> None:
        self.group, self.polls, self.queued_after, self.running_after = group, 0, queued_after, running_after
        self.stage = FakeStage()

    def getJobIdsForGroup(self, group: str) -> list[int]:
        assert group == self.group
        self.polls += 1
        if self.polls > self.running_after:
            self.stage.active = 1
        return [7] if self.polls > self.queued_after else []

    def getJobInfo(self, job: int):
        return SimpleNamespace(stageIds=[3])

    def getStageInfo(self, stage: int):
        return self.stage


def test_the_locality_pin_ends_once_the_pinned_task_runs_not_at_the_end_of_the_warm_up() -> None:
    """Task sets read the locality wait when they are made: a pin held for the whole warm-up made
    the query's own task sets of those seconds wait for the warming executor (the Kafka source has
    some partitions' tasks prefer it), and batches stalled until the warm-up ended."""
    plugin = FakePlugin()
    w = warmup.ExecutorWarmup(fake_spark(plugin), work=lambda eid, pin: None)
    tracker = FakeTracker("g", queued_after=2, running_after=5)
    w.sc.statusTracker = lambda: tracker
    w.warming["3"] = threading.current_thread()  # as ``poll`` records a warm-up under way
    events: list[tuple[str, int, bool]] = []
    released = [False]
    w._release_when_queued("3", "g", released,
                           unpin=lambda: events.append(("unpin", tracker.stage.active, w.released["3"].is_set())))
    assert released == [True] and plugin.released == ["3"]
    assert events == [("unpin", 1, True)]  # after the release, once the pinned task runs


def test_the_pin_is_undone_once_whoever_gets_there_first() -> None:
    calls: list[int] = []
    unpin = warmup.ExecutorWarmup._once(lambda: calls.append(1))
    threads = [threading.Thread(target=unpin) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    unpin()
    assert calls == [1]
