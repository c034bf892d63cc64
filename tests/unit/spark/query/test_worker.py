"""The update shape's stateful function (``worker.update_state``) on one group, without Spark:
events folded in input order whatever order their frames arrive in, screened ones to the DLQ,
rejected records straight to the DLQ."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from jobs.orders import HORIZON_MS, Orders
from streamops.spark.query.records import unpack_dlq
from streamops.spark.query.worker import REJECT_LANE, ROW_FIELDS, pack_row, update_state
from tests.fixtures.group_state import GroupState

pytestmark = pytest.mark.unit

T0 = 1_767_225_600_000


def _frame(rows: list[dict]) -> pd.DataFrame:
    """Parsed rows as PySpark hands a group to the function: key, lane and the packed row."""
    return pd.DataFrame({"key": [r["key"] for r in rows], "lane": [r["lane"] for r in rows],
                         "row": [pack_row(*(r.get(f) for f in ROW_FIELDS[:7])) for r in rows]})


def _rows(out: pd.DataFrame) -> list[dict]:
    """The function's out rows, a ``dlq`` row's packed value as its fields (``records.unpack_dlq``)."""
    return [{**r, **unpack_dlq(r["value"])} if r["kind"] == "dlq" else r for r in out.to_dict("records")]


def _event(order_id: str, ts: int, offset: int, partition: int = 0) -> dict:
    ev = {"order_id": order_id, "customer": "c1", "amount_cents": 100, "ts": ts}
    return {"key": "c1", "lane": 0, "ev": ev, "raw_key": b"c1",
            "raw_value": json.dumps(ev).encode(), "src_topic": "orders", "src_partition": partition,
            "src_offset": offset}


def test_events_are_folded_in_input_order_whatever_order_the_frames_bring_them() -> None:
    # o2 at offset 1 moves max_ts past the horizon of o3 (offset 2): o3 is late in input order;
    # the frames bring offset 2 first, so a fold in arrival order would count it
    events = [_event("o1", T0, 0), _event("o2", T0 + HORIZON_MS + 60_000, 1), _event("o3", T0 + 1000, 2)]
    state = GroupState()
    [out] = list(update_state(Orders)(("c1", 0), iter([_frame([events[2]]), _frame(events[:2])]), state))
    rows = _rows(out)
    dlq = [r for r in rows if r["kind"] == "dlq"]
    assert [(r["reason"], r["src_offset"], r["raw_value"]) for r in dlq] == [("late", 2, events[2]["raw_value"])]
    [emitted] = [r for r in rows if r["kind"] == "out"]
    assert json.loads(emitted["value"])["orders"] == 2
    [changelog] = [r for r in rows if r["kind"] == "changelog"]
    kept = Orders.state_serde.loads(state.blob)
    assert changelog["value"] == state.blob and kept["orders"] == 2
    assert set(kept["seen"]) == {"o2"}  # o1 expired: older than the horizon behind max_ts


def test_state_carries_over_to_the_next_batch() -> None:
    state = GroupState()
    list(update_state(Orders)(("c1", 0), iter([_frame([_event("o1", T0, 0)])]), state))
    [out] = list(update_state(Orders)(("c1", 0), iter([_frame([_event("o1", T0, 1), _event("o2", T0, 2)])]), state))
    [emitted] = [r for r in _rows(out) if r["kind"] == "out"]
    assert {k: json.loads(emitted["value"])[k] for k in ("orders", "duplicates_dropped")} == {
        "orders": 2, "duplicates_dropped": 1}


def test_rejected_records_go_to_the_dlq_and_touch_no_state() -> None:
    rejected = [{"key": "orders/3", "lane": REJECT_LANE, "reason": "bad_json", "raw_key": b"k", "raw_value": b"{",
                 "src_topic": "orders", "src_partition": 3, "src_offset": o} for o in (7, 8)]
    state = GroupState()
    [out] = list(update_state(Orders)(("orders/3", REJECT_LANE), iter([_frame(rejected)]), state))
    assert [(r["kind"], r["reason"], r["src_partition"], r["src_offset"]) for r in _rows(out)] == [
        ("dlq", "bad_json", 3, 7), ("dlq", "bad_json", 3, 8)]
    assert not state.exists


def test_worker_modules_name_the_job_and_pandas_for_per_key_functions() -> None:
    """What the startup warm-up imports beyond the platform's modules: the job's module, and
    pandas only where the per-key function runs on pandas frames."""
    from jobs.orders import Orders
    from jobs.user_activity import UserActivity
    from streamops.spark.query.plan import JobQuery

    assert JobQuery(UserActivity, state_partitions=4).worker_modules() == ("jobs.user_activity",)
    assert JobQuery(Orders, state_partitions=4).worker_modules() == ("jobs.orders", "pandas")
