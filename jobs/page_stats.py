"""App ``page_stats``: per page and one-minute event-time window, views, distinct users, total and
longest time on page and when the page was last seen.

Input: JSON page views keyed by page, ``{"page": str, "user": str, "ts": epoch ms, "duration_ms": int}``.
Windows are tumbling, ``WINDOW_MS`` long. Each page keeps its own event-time watermark: the
latest ``ts`` seen for it, so a window closes once a view ``GRACE_MS`` past its end arrives, and a
view for a closed window is rejected as ``late`` (to the DLQ, counted there). That lateness depends
only on the page's own views in input order, not on how Spark cuts batches (Kafka Streams' stream
time, per key). Distinct users are exact: the window keeps its user ids until it closes.

Output, one record per page and window (key ``page@window_start``): the window's numbers,
updated while it is open; its last value stays once the window is closed and dropped from state.
"""

from __future__ import annotations

import bisect
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from streamops.job import Job, Record, Reject, is_int, is_text, json_object

WINDOW_MS = 60_000
GRACE_MS = 10_000
MAX_TS = 2**53  # JSON numbers stay exact below this

Event = dict[str, Any]
#: {"max_ts": int, "windows": {"<start ms>": {"views", "users" (sorted), "total_ms", "max_ms", "last_seen"}}}
State = dict[str, Any]


def window_start(ts: int) -> int:
    return ts - ts % WINDOW_MS


class PageStats(Job[Event, State]):
    key_name = "page"

    def parse(self, record: Record) -> Event | Reject:
        obj = json_object(record.value)
        if isinstance(obj, Reject):
            return obj
        if not is_text(obj.get("page")) or "@" in obj["page"]:
            return Reject("missing_page")
        if not is_text(obj.get("user")):
            return Reject("missing_user")
        if not is_int(obj.get("ts"), 0, MAX_TS):
            return Reject("bad_ts")
        if not is_int(obj.get("duration_ms"), 0, 86_400_000):
            return Reject("bad_duration")
        return {"page": obj["page"], "user": obj["user"], "ts": obj["ts"], "duration_ms": obj["duration_ms"]}

    def key(self, event: Event) -> str:
        return event["page"]

    def initial(self, key: str) -> State:
        return {"max_ts": None, "windows": {}}

    def screen(self, key: str, state: State, event: Event) -> str | None:
        closed_before = state["max_ts"] is not None and \
            window_start(event["ts"]) + WINDOW_MS + GRACE_MS <= state["max_ts"]
        return "late" if closed_before else None

    def update(self, key: str, state: State, events: Sequence[Event]) -> State:
        windows = {s: dict(w, users=list(w["users"])) for s, w in state["windows"].items()}
        max_ts = state["max_ts"]
        for e in events:
            w = windows.setdefault(str(window_start(e["ts"])),
                                   {"views": 0, "users": [], "total_ms": 0, "max_ms": 0, "last_seen": None})
            w["views"] += 1
            i = bisect.bisect_left(w["users"], e["user"])
            if i == len(w["users"]) or w["users"][i] != e["user"]:
                w["users"].insert(i, e["user"])
            w["total_ms"] += e["duration_ms"]
            w["max_ms"] = max(w["max_ms"], e["duration_ms"])
            w["last_seen"] = e["ts"] if w["last_seen"] is None else max(w["last_seen"], e["ts"])
            max_ts = e["ts"] if max_ts is None else max(max_ts, e["ts"])
        return {"max_ts": max_ts, "windows": windows}

    def emit(self, key: str, state: State) -> Mapping[str, Any]:
        return {f"{key}@{start}": {"page": key, "window_start": int(start), "window_end": int(start) + WINDOW_MS,
                                   "views": w["views"], "distinct_users": len(w["users"]),
                                   "total_time_ms": w["total_ms"], "max_time_ms": w["max_ms"],
                                   "last_seen": w["last_seen"]}
                for start, w in state["windows"].items()}

    def expire(self, key: str, state: State) -> State | None:
        """Closed windows leave the state (their last output stays); the watermark stays."""
        max_ts = state["max_ts"]
        if max_ts is None:
            return state
        return {"max_ts": max_ts, "windows": {s: w for s, w in state["windows"].items()
                                              if int(s) + WINDOW_MS + GRACE_MS > max_ts}}

    def generate(self, events: int, seed: int, *, users: int = 500, bad_ratio: float = 0.01
                 ) -> Iterator[tuple[bytes | None, bytes]]:
        return generate(events, seed=seed, users=users, bad_ratio=bad_ratio)


#: 2026-01-01T00:00:00Z
START_MS = 1_767_225_600_000


def generate(events: int, *, seed: int = 0, pages: int = 40, users: int = 500, step_ms: int = 50,
             late_ratio: float = 0.02, bad_ratio: float = 0.01) -> Iterator[tuple[bytes | None, bytes]]:
    """Page views keyed by page: event time advances ``step_ms`` per view with jitter; a
    ``late_ratio`` share arrives 2-5 minutes behind (late once the page has moved on), a
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
