"""``streamops.windows`` and ``streamops.stream_time`` on small inputs whose results are worked out
by hand: window assignment, closing by stream time and by the watermark, lateness at the grace
boundary, session merging, sliding windows, and the declaration and timer errors."""

from __future__ import annotations

import json

import pytest

from streamops.job import JobDeclarationError, Record, Reject, validate_job
from streamops.state.lint import lint
from streamops.state.oracle import fold_input
from streamops.stream_time import TimerError
from streamops.windows import Hopping, Session, Sliding, Tumbling, WindowedJob

pytestmark = pytest.mark.unit


class Count(WindowedJob):
    """Counts events per key and window; events are ``{"k", "ts"}``."""

    windows = Tumbling(size_ms=100)
    grace_ms = 10

    def parse(self, record: Record):
        obj = json.loads(record.value)
        return obj if isinstance(obj.get("ts"), int) else Reject("bad")

    def key(self, event) -> str:
        return event["k"]

    def timestamp(self, event) -> int:
        return event["ts"]

    def zero(self) -> int:
        return 0

    def add(self, acc: int, event) -> int:
        return acc + 1

    def merge(self, a: int, b: int) -> int:
        return a + b


def _records(*events: tuple[int, str, int]) -> list[Record]:
    """(partition, key, ts) in offset order per partition."""
    offsets: dict[int, int] = {}
    out = []
    for p, k, ts in events:
        out.append(Record("in", p, offsets.get(p, 0), k.encode(), json.dumps({"k": k, "ts": ts}).encode()))
        offsets[p] = offsets.get(p, 0) + 1
    return out


def test_tumbling_windows_close_at_end_plus_grace_and_later_events_are_late() -> None:
    rs = _records((0, "a", 1000), (0, "a", 1050), (0, "b", 1109),  # stream time 1109: [1000, 1100) still open
                  (0, "a", 1099),  # 1099 >= 1109 - 10: not late, joins [1000, 1100)
                  (0, "b", 1110),  # stream time 1110 = 1100 + grace: [1000, 1100) closes
                  (0, "a", 1099))  # now 1099 < 1110 - 10: late
    out = fold_input(Count, rs)
    assert out.rejected == {("in", 0, 5): "late"}
    assert out.output == {"a@1000": 3}  # emitted on close; b's window [1100, 1200) is still open
    assert out.states == {"b": {"open": [[1100, 1200, 2]], "closed": []}}  # a's key was deleted


def test_the_watermark_closes_windows_of_keys_with_no_more_events() -> None:
    # a's window closes by the watermark: the slowest partition (1) reaches 1110 too
    rs = _records((0, "a", 1000), (0, "b", 1500), (1, "c", 1050), (1, "c", 1110))
    out = fold_input(Count, rs)
    assert "a@1000" in out.output and "a" not in out.states
    assert fold_input(Count, rs, watermark=None).output == {"c@1000": 1}  # c's own partition closed it
    # a partition that has shown nothing holds the watermark back
    held = fold_input(Count, rs, partitions=[("in", 0), ("in", 1), ("in", 2)])
    assert "a@1000" not in held.output and "a" in held.states


def test_emit_on_update_writes_open_windows_too() -> None:
    class Every(Count):
        emit_on = "update"

    out = fold_input(Every, _records((0, "a", 1000), (0, "a", 1001)))
    assert out.output == {"a@1000": 2}


def test_hopping_windows_take_an_event_in_each_window_covering_it() -> None:
    assert Hopping(size_ms=100, advance_ms=40).assign(1000) == [(920, 1020), (960, 1060), (1000, 1100)]

    class Hop(Count):
        windows = Hopping(size_ms=100, advance_ms=50)
        emit_on = "update"

    out = fold_input(Hop, _records((0, "a", 1000), (0, "a", 1060)))
    assert out.output == {"a@950": 1, "a@1000": 2, "a@1050": 1}


def test_sliding_windows_are_one_per_event_over_the_size_before_it() -> None:
    class Slide(Count):
        windows = Sliding(size_ms=100)

    rs = _records((0, "a", 1000), (0, "a", 1050), (0, "a", 1100), (0, "a", 1101), (0, "b", 2000))
    out = fold_input(Slide, rs)
    # (900, 1000]: 1; (950, 1050]: 2; (1000, 1100]: 2 (1050, 1100); (1001, 1101]: 3; all closed by b
    assert {k: v for k, v in out.output.items() if k.startswith("a@")} == \
        {"a@901": 1, "a@951": 2, "a@1001": 2, "a@1002": 3}


def test_sessions_merge_on_a_bridging_event_and_close_after_the_gap() -> None:
    class Sessions(Count):
        windows = Session(gap_ms=100)
        grace_ms = 200

        def result(self, key, start, end, acc):
            return [start, end, acc]

    rs = _records((0, "a", 1000), (0, "a", 1150),  # two sessions (a pause of 150 >= the gap)
                  (0, "a", 1080),  # within grace; bridges them: one session 1000..1150 with 3 events
                  (0, "b", 1450),  # stream time 1450 = 1150 + gap + grace: closes it
                  (0, "a", 1300))
    out = fold_input(Sessions, rs)
    assert out.output == {"a@1000": [1000, 1151, 3]}
    assert out.states["a"] == {"open": [[1300, 1300, 1]], "closed": []}  # 1300 >= 1450 - grace: not late


def test_declarations_are_checked() -> None:
    class NoTime(Count):
        timestamp = WindowedJob.timestamp

    class BadHop(Count):
        windows = Hopping(size_ms=10, advance_ms=20)

    class SessionUpdate(Count):
        windows = Session(gap_ms=5)
        emit_on = "update"

    class NoMerge(Count):
        windows = Session(gap_ms=5)
        merge = WindowedJob.merge

    for cls, text in ((NoTime, "timestamp"), (BadHop, "leaves events in no window"),
                      (SessionUpdate, "emit_on = 'close'"), (NoMerge, "merge")):
        with pytest.raises(JobDeclarationError, match=text):
            validate_job(cls)


def test_an_on_timer_that_keeps_its_timer_is_an_error_not_a_loop() -> None:
    class Stuck(Count):
        def on_timer(self, key, state, ts):
            return state

    with pytest.raises(TimerError, match="must clear the timers it fired"):
        fold_input(Stuck, _records((0, "a", 1000), (0, "a", 2000)))


def test_events_without_a_valid_time_go_to_the_dlq() -> None:
    rs = [Record("in", 0, 0, b"a", json.dumps({"k": "a", "ts": 1}).encode()),  # below MIN_TS
          Record("in", 0, 1, b"a", json.dumps({"k": "a", "ts": 2**53}).encode())]
    assert fold_input(Count, rs).rejected == {("in", 0, 0): "bad_timestamp", ("in", 0, 1): "bad_timestamp"}


def test_lint_finds_an_expire_that_drops_open_windows() -> None:
    class Forgetful(Count):
        grace_ms = 100  # two windows are open at once

        def expire(self, key, state):
            return {"open": state["open"][-1:], "closed": []}  # drops all but the newest open window

    rs = _records(*((0, "a", 1000 + 30 * i) for i in range(12)))
    failed = {c.name: c.detail for c in lint(Forgetful, rs).checks if not c.ok}
    assert list(failed) == ["batch split"], failed
    # what differs is shown: [1000, 1100) holds 1000, 1030, 1060, 1090 in one batch; cut after the
    # 6th event, expire dropped it while [1100, 1200) was open too
    assert failed["batch split"].startswith("key 'a': its output differs when its 12 events come in two batches "
                                            "split at 6")
    assert failed["batch split"].endswith("; 'a@1000': one batch 4, two batches (absent)"), failed
    assert lint(Count, rs).ok


def test_lint_shows_the_state_fields_that_differ_between_one_batch_and_two() -> None:
    class CountsExpiries(Count):
        def expire(self, key, state):  # a field that counts expire's calls: it depends on the cut
            kept = super().expire(key, state)
            return None if kept is None else {**kept, "expired": state.get("expired", 0) + 1}

    failed = {c.name: c.detail for c in lint(CountsExpiries, _records((0, "a", 1000), (0, "a", 1010),
                                                                      (0, "a", 1020))).checks if not c.ok}
    assert list(failed) == ["batch split"], failed
    assert failed["batch split"].startswith("key 'a': its state differs when its events come in two batches "
                                            "split at 1")
    assert failed["batch split"].endswith("; 'expired': one batch 1, two batches 2"), failed
