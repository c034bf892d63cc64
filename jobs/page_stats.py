"""App ``page_stats``: per page and one-minute event-time window, views, distinct users, total and
longest time on page and when the page was last seen.

Input: JSON page views keyed by page, ``{"page": str, "user": str, "ts": epoch ms, "duration_ms": int}``.
Tumbling windows of ``WINDOW_MS`` on stream time (``streamops.windows``): a window closes once its
input partition's stream time (the largest ``ts`` it has shown) reaches its end plus ``GRACE_MS``,
and a view that far behind stream time is ``late`` (to the DLQ, counted there). Whether a view is
late depends only on its partition's views in offset order, never on how Spark cuts batches.
Distinct users are exact: the window keeps its user ids until it closes.

Output, one record per page and window (key ``page@window_start``), rewritten after every batch
that changed the window (``emit_on = "update"``); its last value stays once the window is closed
and dropped from state.
"""

from __future__ import annotations

import bisect
import json
import random
from collections.abc import Iterator
from typing import Any

from streamops.job import Record, Reject, is_int, is_text, json_object
from streamops.windows import Tumbling, WindowedJob

WINDOW_MS = 60_000
GRACE_MS = 10_000
MAX_TS = 2**53 - 1  # JSON numbers stay exact below this

Event = dict[str, Any]


class PageStats(WindowedJob):
    key_name = "page"
    #: 2: windows on stream time (``streamops.windows``) instead of a per-page watermark
    state_version = 2
    windows = Tumbling(size_ms=WINDOW_MS)
    grace_ms = GRACE_MS
    emit_on = "update"

    def parse(self, record: Record) -> Event | Reject:
        obj = json_object(record.value)
        if isinstance(obj, Reject):
            return obj
        if not is_text(obj.get("page")) or "@" in obj["page"]:
            return Reject("missing_page")
        if not is_text(obj.get("user")):
            return Reject("missing_user")
        if not is_int(obj.get("ts"), 2, MAX_TS):
            return Reject("bad_ts")
        if not is_int(obj.get("duration_ms"), 0, 86_400_000):
            return Reject("bad_duration")
        return {"page": obj["page"], "user": obj["user"], "ts": obj["ts"], "duration_ms": obj["duration_ms"]}

    def key(self, event: Event) -> str:
        return event["page"]

    def timestamp(self, event: Event) -> int:
        return event["ts"]

    # a window's accumulator
    def zero(self) -> dict:
        return {"views": 0, "users": [], "total_ms": 0, "max_ms": 0, "last_seen": None}

    def add(self, acc: dict, event: Event) -> dict:
        acc["views"] += 1
        i = bisect.bisect_left(acc["users"], event["user"])
        if i == len(acc["users"]) or acc["users"][i] != event["user"]:
            acc["users"].insert(i, event["user"])
        acc["total_ms"] += event["duration_ms"]
        acc["max_ms"] = max(acc["max_ms"], event["duration_ms"])
        acc["last_seen"] = event["ts"] if acc["last_seen"] is None else max(acc["last_seen"], event["ts"])
        return acc

    def result(self, key: str, start: int, end: int, acc: dict) -> dict:
        return {"page": key, "window_start": start, "window_end": end, "views": acc["views"],
                "distinct_users": len(acc["users"]), "total_time_ms": acc["total_ms"], "max_time_ms": acc["max_ms"],
                "last_seen": acc["last_seen"]}

    def generate(self, events: int, seed: int, *, users: int = 500, bad_ratio: float = 0.01
                 ) -> Iterator[tuple[bytes | None, bytes]]:
        return generate(events, seed=seed, users=users, bad_ratio=bad_ratio)


#: 2026-01-01T00:00:00Z
START_MS = 1_767_225_600_000


def generate(events: int, *, seed: int = 0, pages: int = 40, users: int = 500, step_ms: int = 50,
             late_ratio: float = 0.02, bad_ratio: float = 0.01) -> Iterator[tuple[bytes | None, bytes]]:
    """Page views keyed by page: event time advances ``step_ms`` per view with jitter; a
    ``late_ratio`` share arrives 2-5 minutes behind (late once its partition has moved on), a
    ``bad_ratio`` share is malformed in one of the ways ``parse`` rejects."""
    rng = random.Random(seed)
    bad = [lambda p, u, t: b"{not json",
           lambda p, u, t: json.dumps([p]).encode(),
           lambda p, u, t: json.dumps({"user": u, "ts": t, "duration_ms": 5}).encode(),
           lambda p, u, t: json.dumps({"page": p, "user": "", "ts": t, "duration_ms": 5}).encode(),
           lambda p, u, t: json.dumps({"page": p, "user": u, "ts": -t, "duration_ms": 5}).encode(),
           lambda p, u, t: json.dumps({"page": p, "user": u, "ts": t, "duration_ms": 1.5}).encode()]
    for i in range(events):
        page = f"/p{int(rng.random() ** 2 * pages):03d}"  # some pages are much busier
        user = f"v{int(rng.random() * users):05d}"
        ts = START_MS + i * step_ms + int(rng.random() * 2000) - 1000
        if rng.random() < late_ratio:
            ts -= 120_000 + int(rng.random() * 180_000)
        duration = int(rng.random() * 120_000)
        if rng.random() < bad_ratio:
            yield page.encode(), bad[i % len(bad)](page, user, ts)
        else:
            yield page.encode(), json.dumps({"page": page, "user": user, "ts": ts, "duration_ms": duration},
                                            separators=(",", ":")).encode()
