"""App ``orders``: dedup, then aggregate: per customer, orders, their total and largest amount, how
many duplicates were dropped, and the last order time.

Input: JSON orders keyed by customer, ``{"order_id": str, "customer": str, "amount_cents": int,
"ts": epoch ms}``. Producers retry, so one order can arrive more than once: a repeat of an order id
within ``HORIZON_MS`` of event time is counted as a duplicate and not added. The state keeps the
order ids of the last ``HORIZON_MS`` (per customer; older ones expire), so an order older than that
cannot be told from a new one any more: it is rejected as ``late`` (to the DLQ) instead of being
counted twice.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from streamops.job import Job, Record, Reject, is_int, is_text, json_object

HORIZON_MS = 10 * 60_000
MAX_TS = 2**53

Event = dict[str, Any]
#: {"seen": {order_id: ts}, "max_ts", "orders", "total_cents", "max_cents", "duplicates"}
State = dict[str, Any]


class Orders(Job[Event, State]):
    key_name = "customer"

    def parse(self, record: Record) -> Event | Reject:
        obj = json_object(record.value)
        if isinstance(obj, Reject):
            return obj
        if not is_text(obj.get("order_id")):
            return Reject("missing_order_id")
        if not is_text(obj.get("customer")):
            return Reject("missing_customer")
        if not is_int(obj.get("amount_cents"), 0, 10**12):
            return Reject("bad_amount")
        if not is_int(obj.get("ts"), 0, MAX_TS):
            return Reject("bad_ts")
        return {k: obj[k] for k in ("order_id", "customer", "amount_cents", "ts")}

    def key(self, event: Event) -> str:
        return event["customer"]

    def initial(self, key: str) -> State:
        return {"seen": {}, "max_ts": None, "orders": 0, "total_cents": 0, "max_cents": 0, "duplicates": 0}

    def screen(self, key: str, state: State, event: Event) -> str | None:
        too_old = state["max_ts"] is not None and event["ts"] < state["max_ts"] - HORIZON_MS
        return "late" if too_old else None

    def update(self, key: str, state: State, events: Sequence[Event]) -> State:
        s = {**state, "seen": dict(state["seen"])}
        for e in events:
            if e["order_id"] in s["seen"]:
                s["duplicates"] += 1
                continue
            s["seen"][e["order_id"]] = e["ts"]
            s["orders"] += 1
            s["total_cents"] += e["amount_cents"]
            s["max_cents"] = max(s["max_cents"], e["amount_cents"])
            s["max_ts"] = e["ts"] if s["max_ts"] is None else max(s["max_ts"], e["ts"])
        return s

    def emit(self, key: str, state: State) -> Mapping[str, Any]:
        return {key: {"customer": key, "orders": state["orders"], "total_cents": state["total_cents"],
                      "max_order_cents": state["max_cents"], "duplicates_dropped": state["duplicates"],
                      "last_order_ts": state["max_ts"]}}

    def expire(self, key: str, state: State) -> State | None:
        """Order ids older than the horizon leave the state (their repeats are screened as late)."""
        if state["max_ts"] is None:
            return state
        floor = state["max_ts"] - HORIZON_MS
        return {**state, "seen": {o: ts for o, ts in state["seen"].items() if ts >= floor}}

    def generate(self, events: int, seed: int, *, bad_ratio: float = 0.01) -> Iterator[tuple[bytes | None, bytes]]:
        return generate(events, seed=seed, bad_ratio=bad_ratio)


START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def generate(events: int, *, seed: int = 0, customers: int = 200, step_ms: int = 200, dup_ratio: float = 0.05,
             late_ratio: float = 0.01, bad_ratio: float = 0.01) -> Iterator[tuple[bytes | None, bytes]]:
    """Orders keyed by customer; a ``dup_ratio`` share repeats a recent order byte for byte (a
    producer retry), a ``late_ratio`` share is an order from 20-60 minutes ago, a ``bad_ratio``
    share is malformed."""
    rng = random.Random(seed)
    recent: list[tuple[bytes, bytes]] = []
    bad = [lambda c: b"{", lambda c: b"[]", lambda c: json.dumps({"customer": c, "amount_cents": 1, "ts": 1}).encode(),
           lambda c: json.dumps({"order_id": "x", "customer": c, "amount_cents": -5, "ts": 1}).encode()]
    for i in range(events):
        r = rng.random()
        if recent and r < dup_ratio:
            yield recent[int(rng.random() * len(recent))]
            continue
        customer = f"c{int(rng.random() * customers):04d}"
        if r < dup_ratio + bad_ratio:
            yield customer.encode(), bad[i % len(bad)](customer)
            continue
        ts = START_MS + i * step_ms
        if r < dup_ratio + bad_ratio + late_ratio:
            ts -= 20 * 60_000 + int(rng.random() * 40 * 60_000)
        record = (customer.encode(), json.dumps({"order_id": f"o{seed}-{i}", "customer": customer,
                                                 "amount_cents": 100 + int(rng.random() * 99_900), "ts": ts},
                                                separators=(",", ":")).encode())
        recent = [*recent[-49:], record]
        yield record
