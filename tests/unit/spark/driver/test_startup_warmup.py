"""The startup warm-up's thread: never raises into the driver, says why it failed, and a
stopping driver cancels it quietly (the warm-up on a real session: tests/integration/apps/
test_python_workers.py)."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

from streamops.spark.driver import startup_warmup
from streamops.spark.warmup_plugin import POOL


class FakeContext:
    defaultParallelism = 2

    def __init__(self) -> None:
        self.props: dict[str, str] = {}
        self.groups: list[str] = []
        self.cancelled: list[str] = []
        self.released = threading.Event()

    def setLocalProperty(self, key: str, value: str) -> None:
        self.props[key] = value

    def setJobGroup(self, group: str, _description: str, interruptOnCancel: bool = False) -> None:
        self.groups.append(group)

    def cancelJobGroup(self, group: str) -> None:
        self.cancelled.append(group)
        self.released.set()


def fake_spark(range_fn) -> SimpleNamespace:
    return SimpleNamespace(sparkContext=FakeContext(), range=range_fn)


def test_a_failed_warm_up_is_logged_and_never_raised(caplog) -> None:
    def broken(*_args):
        raise RuntimeError("Py4JJavaError: the executor is gone\nat ...")

    spark = fake_spark(broken)
    with caplog.at_level(logging.INFO, logger="streamops.runtime"):
        w = startup_warmup.StartupWarmup(spark, ("pyarrow",), rocksdb=True).start()
        w.thread.join(10)
    assert not w.thread.is_alive() and w.done is None
    assert spark.sparkContext.props == {"spark.scheduler.pool": POOL}
    assert spark.sparkContext.groups == [startup_warmup.JOB_GROUP]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "startup warm-up failed (the first batch runs cold): Py4JJavaError: the executor is gone"]


def test_a_stopping_driver_cancels_its_job_group_quietly(caplog) -> None:
    started = threading.Event()
    spark = None

    def running(*_args):  # a job that runs until its group is cancelled, then fails as Spark's do
        started.set()
        spark.sparkContext.released.wait(10)
        raise RuntimeError("Job 0 cancelled part of cancelled job group streamops-startup-warmup")

    spark = fake_spark(running)
    with caplog.at_level(logging.INFO, logger="streamops.runtime"):
        w = startup_warmup.StartupWarmup(spark, ("pyarrow",), rocksdb=False).start()
        assert started.wait(10)
        w.cancel()
    assert not w.thread.is_alive()
    assert spark.sparkContext.cancelled == [startup_warmup.JOB_GROUP]
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert messages == [(logging.INFO, "startup warm-up cancelled: the driver is stopping")]


def test_cancel_after_the_warm_up_ended_does_nothing() -> None:
    spark = fake_spark(lambda *_a: (_ for _ in ()).throw(RuntimeError("x")))
    w = startup_warmup.StartupWarmup(spark, (), rocksdb=False).start()
    w.thread.join(10)
    w.cancel()
    assert spark.sparkContext.cancelled == []


def test_the_warm_up_is_on_unless_turned_off(monkeypatch) -> None:
    monkeypatch.delenv(startup_warmup.ENABLE_ENV, raising=False)
    assert startup_warmup.enabled()
    monkeypatch.setenv(startup_warmup.ENABLE_ENV, "1")
    assert startup_warmup.enabled()
    monkeypatch.setenv(startup_warmup.ENABLE_ENV, "0")
    assert not startup_warmup.enabled()
