"""``marker.settled_end``: a marker committed a moment ago is not read as absent (its transaction's
commit marker reaches the partition after the commit returns), and an open transaction that stays
open is not waited for past the settle time."""

from __future__ import annotations

import time

from confluent_kafka import TopicPartition

from streamops.app.marker import settled_end

TP = TopicPartition("app-commits", 0)


class Ends:
    """A consumer's ``get_watermark_offsets``: (low, high), the high moving to ``later`` after ``calls`` asks."""

    def __init__(self, high: int, later: int | None = None, calls: int = 0) -> None:
        self.high, self.later, self.calls, self.asked = high, later, calls, 0

    def get_watermark_offsets(self, tp, timeout: float):
        self.asked += 1
        if self.later is not None and self.asked > self.calls:
            return 0, self.later
        return 0, self.high


def test_a_just_committed_transaction_is_waited_for_until_its_marker_is_in() -> None:
    # the commit returned: the partition holds the marker record at 4 (high watermark 5), but the
    # last stable offset stays at 4 until the coordinator has written the commit marker (then 6)
    committed = Ends(4, later=6, calls=3)
    assert settled_end(committed, Ends(5), TP, timeout=5) == (0, 6)
    assert committed.asked == 4


def test_nothing_open_is_answered_at_once() -> None:
    committed = Ends(6)
    assert settled_end(committed, Ends(6), TP, timeout=5) == (0, 6) and committed.asked == 1


def test_a_transaction_left_open_is_not_waited_for_past_the_settle_time() -> None:
    """A dead driver's open transaction: what is committed before it is the answer."""
    t0 = time.monotonic()
    assert settled_end(Ends(4), Ends(9), TP, timeout=5, settle=0.2) == (0, 4)
    assert 0.2 <= time.monotonic() - t0 < 2
