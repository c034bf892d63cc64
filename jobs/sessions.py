"""App ``sessions``: per user, sessions of activity with a 30-minute inactivity gap on event time,
each written once when it closes: its start, end, clicks and distinct pages.

Input: JSON clicks keyed by user, ``{"user": str, "page": str, "ts": epoch ms}``. A session closes
once stream time (the largest event time its input partition has shown) reaches its last click +
``GAP_MS + GRACE_MS``, also for a user who never clicks again: a timer, not the user's next click,
closes it. A click more than ``GRACE_MS`` behind stream time is ``late`` (to the DLQ).

Output, one record per session (key ``user@start``): ``{"user", "start", "end", "clicks", "pages"}``,
``[start, end)``: ``start`` its first click, ``end`` one past its last (``streamops.windows``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from streamops.job import Record, Reject, is_int, is_text, json_object
from streamops.windows import Session, WindowedJob

GAP_MS = 30 * 60_000
GRACE_MS = 60_000
MAX_TS = 2**53 - 1

Event = dict[str, Any]


class Sessions(WindowedJob):
    key_name = "user"
    windows = Session(gap_ms=GAP_MS)
    grace_ms = GRACE_MS

    def parse(self, record: Record) -> Event | Reject:
        obj = json_object(record.value)
        if isinstance(obj, Reject):
            return obj
        if not is_text(obj.get("user")) or "@" in obj["user"]:
            return Reject("missing_user")
        if not is_text(obj.get("page")):
            return Reject("missing_page")
        if not is_int(obj.get("ts"), 2, MAX_TS):
            return Reject("bad_ts")
        return {"user": obj["user"], "page": obj["page"], "ts": obj["ts"]}

    def key(self, event: Event) -> str:
        return event["user"]

    def timestamp(self, event: Event) -> int:
        return event["ts"]

    # a session's accumulator: [clicks, sorted distinct pages]
    def zero(self) -> list:
        return [0, []]

    def add(self, acc: list, event: Event) -> list:
        pages = acc[1] if event["page"] in acc[1] else sorted([*acc[1], event["page"]])
        return [acc[0] + 1, pages]

    def merge(self, a: list, b: list) -> list:
        return [a[0] + b[0], sorted(set(a[1]) | set(b[1]))]

    def result(self, key: str, start: int, end: int, acc: list) -> dict:
        return {"user": key, "start": start, "end": end, "clicks": acc[0], "pages": len(acc[1])}

    def generate(self, events: int, seed: int, *, users: int = 300, bad_ratio: float = 0.01
                 ) -> Iterator[tuple[bytes | None, bytes]]:
        return generate(events, seed=seed, users=users, bad_ratio=bad_ratio)


START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def generate(events: int, *, seed: int = 0, users: int = 300, step_ms: int = 2_000, late_ratio: float = 0.01,
             bad_ratio: float = 0.01, quiet_ratio: float = 0.1) -> Iterator[tuple[bytes | None, bytes]]:
    """``events`` clicks keyed by user: event time advances ``step_ms`` per step; each user clicks in bursts
    with pauses longer than the gap now and then; a ``quiet_ratio`` share of users stop for good
    half way (their last sessions close by timer); a ``late_ratio`` share of clicks is 5-20
    minutes behind; a ``bad_ratio`` share is malformed."""
    rng = random.Random(seed)
    names = [f"u{i:04d}" for i in range(users)]
    quiet = set(rng.sample(names, min(users - 1, int(users * quiet_ratio))))  # someone keeps clicking
    pause: dict[str, int] = {}
    bad = [lambda u: b"{", lambda u: b"[]", lambda u: json.dumps({"user": u, "ts": 5}).encode(),
           lambda u: json.dumps({"user": u, "page": "/a", "ts": "soon"}).encode()]
    made, i = 0, -1
    while made < events:
        i += 1
        user = names[int(rng.random() ** 1.5 * users)]
        ts = START_MS + i * step_ms
        if (user in quiet and made > events // 2) or ts < pause.get(user, 0):
            continue
        made += 1
        if rng.random() < 0.02:  # the user pauses longer than the gap
            pause[user] = ts + GAP_MS + int(rng.random() * GAP_MS)
        if rng.random() < bad_ratio:
            yield user.encode(), bad[i % len(bad)](user)
            continue
        if rng.random() < late_ratio:
            ts -= 5 * 60_000 + int(rng.random() * 15 * 60_000)
        page = f"/p{int(rng.random() * 30):02d}"
        yield user.encode(), json.dumps({"user": user, "page": page, "ts": ts}, separators=(",", ":")).encode()
