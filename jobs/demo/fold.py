"""The truth oracle of ``user_activity``: validate records and fold events into profiles.

Pure functions, no I/O. They implement ``jobs.demo.contract`` exactly; the Spark job's
results are checked against them.

Choices the contract leaves open, made here once for everyone:
- A Kafka null value and empty bytes are ``invalid_json``; the JSON text ``null`` is valid JSON
  that is not an object, so it is ``not_an_object``.
- JSON's non-standard ``NaN`` / ``Infinity`` literals (and numbers that overflow to infinity,
  like ``1e999``) parse as numbers, so they are ``bad_amount`` (not finite), not ``invalid_json``.
- Bytes must be UTF-8 (a BOM is not stripped, UTF-16 is not sniffed).
- ``total_amount`` is the sum of ``contract.amount_cents(amount)`` over purchases (each amount
  rounded half up to integer cents first, exactly as the Spark job does), divided by 100: exact
  integer arithmetic, so it does not depend on event order.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from jobs.demo.contract import EVENT_TYPES, MAX_AMOUNT, MAX_TS, amount_cents

Event = dict[str, Any]
Profile = dict[str, Any]


def validate(value: bytes | bytearray | memoryview | str | None) -> tuple[Event | None, str | None]:
    """``(event, None)`` for a valid record value, else ``(None, reason)`` for the first reason
    that applies, in the contract's order. The event holds exactly the four contract fields."""
    if value is None:
        return None, "invalid_json"
    try:
        text = value if isinstance(value, str) else bytes(value).decode("utf-8")
        obj = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, "invalid_json"
    if not isinstance(obj, dict):
        return None, "not_an_object"
    user_id = obj.get("user_id")
    if not isinstance(user_id, str) or user_id == "":
        return None, "missing_user_id"
    event_type = obj.get("event_type")
    if not isinstance(event_type, str) or event_type not in EVENT_TYPES:
        return None, "bad_event_type"
    amount = obj.get("amount")
    if not _is_amount(amount):
        return None, "bad_amount"
    ts = obj.get("ts")
    if not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts <= MAX_TS:
        return None, "bad_ts"
    return {"user_id": user_id, "event_type": event_type, "amount": amount, "ts": ts}, None


def _is_amount(amount: Any) -> bool:
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        return False
    if isinstance(amount, float) and not math.isfinite(amount):
        return False
    return 0 <= amount <= MAX_AMOUNT


def new_profile(user_id: str) -> Profile:
    return {"user_id": user_id, "last_login_ts": None, "purchases": 0, "total_amount": 0.0, "events": 0}


def fold(events: Iterable[Event], into: dict[str, Profile] | None = None) -> dict[str, Profile]:
    """Profiles after applying valid ``events`` to ``into`` (not modified; default: no profiles).

    The result does not depend on the order of the events.
    """
    # per user: [last_login_ts, purchases, total cents, events]
    acc: dict[str, list[Any]] = {}
    for uid, prof in (into or {}).items():
        acc[uid] = [prof["last_login_ts"], prof["purchases"], amount_cents(prof["total_amount"]), prof["events"]]
    for ev in events:
        uid = ev["user_id"]
        a = acc.get(uid)
        if a is None:
            a = acc[uid] = [None, 0, 0, 0]
        a[3] += 1
        kind = ev["event_type"]
        if kind == "login":
            ts = ev["ts"]
            if a[0] is None or ts > a[0]:
                a[0] = ts
        elif kind == "purchase":
            a[1] += 1
            a[2] += amount_cents(ev["amount"])
    return {
        uid: {
            "user_id": uid,
            "last_login_ts": last_login,
            "purchases": purchases,
            "total_amount": round(cents / 100, 2),
            "events": count,
        }
        for uid, (last_login, purchases, cents, count) in acc.items()
    }


def profile_json(profile: Profile) -> bytes:
    """The canonical bytes of a profile: sorted keys, no spaces, ASCII only (non-ASCII escaped)."""
    return json.dumps(profile, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("ascii")
