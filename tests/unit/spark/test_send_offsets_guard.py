"""The batch's ``send_offsets_to_transaction`` is bounded by the committer's own clock: librdkafka
can hang in it when the group coordinator moved (issues 5511, 5456), and the batch must then fail
(to be replayed) instead of stalling the app."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import TopicPartition

from streamops.spark import commit
from streamops.spark.commit import BatchCommitter, CommitterWedged


class _Producer:
    def __init__(self, hang: bool) -> None:
        self.hang, self.timeouts, self.release = hang, [], threading.Event()

    def send_offsets_to_transaction(self, offsets, metadata, timeout) -> None:
        self.timeouts.append(timeout)
        if self.hang:
            self.release.wait(30)  # as librdkafka past its timeout


def _committer(producer: _Producer, timeout: float = 60.0) -> BatchCommitter:
    c = object.__new__(BatchCommitter)  # no broker: only the guard is under test
    c.app, c.timeout, c.producer, c._group_metadata = "app1", timeout, producer, None
    return c


def test_a_hung_call_fails_the_batch_within_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commit, "SEND_OFFSETS_S", 0.2)
    monkeypatch.setattr(commit, "GUARD_SLACK_S", 0.3)
    hung = _Producer(hang=True)
    t0 = time.monotonic()
    with pytest.raises(CommitterWedged, match="consumer group 'app1' did not return in 0.5 s"):
        _committer(hung)._send_offsets([TopicPartition("in", 0, 5)])
    assert time.monotonic() - t0 < 5 and hung.timeouts == [0.2]
    hung.release.set()


def test_librdkafka_gets_the_shorter_of_the_two_timeouts() -> None:
    ok = _Producer(hang=False)
    _committer(ok)._send_offsets([TopicPartition("in", 0, 5)])
    _committer(ok, timeout=3.0)._send_offsets([TopicPartition("in", 0, 5)])
    assert ok.timeouts == [commit.SEND_OFFSETS_S, 3.0] and commit.SEND_OFFSETS_S == 15.0
