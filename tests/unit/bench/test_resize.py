"""bench/resize.py's timeline (``--timeline``): the driver log's two time formats, the REST API's
tasks, all in seconds from the resize's request."""

from __future__ import annotations

from datetime import datetime

from bench.resize import log_time, task_row, timeline


def _epoch(text: str) -> float:
    """A local wall-clock time, as both log formats write it."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").astimezone().timestamp()


def test_log_lines_of_both_formats_get_their_time_and_other_lines_none() -> None:
    assert log_time("2026-12-07 17:37:01,390 WARNING streamops.elastic: live resize 1 -> 2 requested") \
        == _epoch("2026-12-07 17:37:01.390")
    assert log_time("26/12/07 17:37:19 WARN StateStoreCoordinator: lag") == _epoch("2026-12-07 17:37:19.000")
    assert log_time("[Stage 3:>   (0 + 2) / 2]") is None
    assert log_time("") is None


def test_a_task_row_says_where_it_ran_how_it_was_placed_and_for_how_long() -> None:
    stage = {"stageId": 104, "schedulingPool": "streamops-workload", "name": "run at <unknown>:0"}
    task = {"index": 2, "executorId": "0", "taskLocality": "NODE_LOCAL", "duration": 70,
            "launchTime": "2026-12-07T17:41:45.230GMT"}
    at, line = task_row(stage, task)
    assert at == datetime.fromisoformat("2026-12-07T17:41:45.230+00:00").timestamp()
    assert line == "task 104.2 on executor 0 (streamops-workload, NODE_LOCAL) 0.07 s: run at <unknown>:0"


def test_the_timeline_is_in_seconds_from_the_request_in_order_from_five_seconds_before() -> None:
    t0 = _epoch("2026-12-07 17:37:01.390")
    lines = ["2026-12-07 17:37:01,390 WARNING streamops.elastic: live resize 1 -> 2 requested",
             "2026-12-07 17:36:50,000 INFO too early", "no time here"]
    rows = timeline(t0, [(41, t0 - 6), (42, t0 - 1.5), (43, t0 + 11.1)], lines, [(t0 + 0.5, "task 1.0")])
    assert rows == [(-1.5, "batch 42 committed"), (0.0, lines[0]), (0.5, "task 1.0"), (11.1, "batch 43 committed")]
