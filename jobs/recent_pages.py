"""App ``recent_pages``: per user, the distinct pages visited in the last hour of stream time, and
all visits so far. The example of named state (``streamops.named_state``): the pages are a map
with a TTL, stored entry by entry, so a visit writes one entry instead of the user's whole set.

Input: JSON visits keyed by user, ``{"user": str, "page": str, "ts": epoch ms}``. A page leaves a
user's set once stream time (the largest event time its input partition has shown) is more than
an hour past the user's last visit to it, also for a user who never comes back: the TTL is a
timer. A visit more than ``GRACE_MS`` behind stream time is ``late`` (to the DLQ).

Output, one record per user (key: the user): ``{"user", "recent_pages", "visits"}``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from streamops.job import Job, Record, Reject, is_int, is_text, json_object
from streamops.named_state import MapOf, Value

TTL_MS = 3_600_000
GRACE_MS = 60_000
MAX_TS = 2**53 - 1

Event = dict[str, Any]


def _visited_at(page: str, ts: int) -> int:
    return ts


class RecentPages(Job[Event, dict]):
    key_name = "user"
    grace_ms = GRACE_MS
    #: page -> the user's last visit to it (dropped an hour of stream time after it); visits so far
    state_values = {"pages": MapOf(ttl_ms=TTL_MS, time=_visited_at), "visits": Value()}

    def parse(self, record: Record) -> Event | Reject:
        obj = json_object(record.value)
        if isinstance(obj, Reject):
            return obj
        if not is_text(obj.get("user")):
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

    def update(self, key: str, state: dict, events: Sequence[Event]) -> dict:
        pages = state["pages"]  # changed in place (``Job.update``)
        for e in events:
            pages[e["page"]] = max(e["ts"], pages.get(e["page"], 0))
        state["visits"] = (state["visits"] or 0) + len(events)
        return state

    def emit(self, key: str, state: dict) -> Mapping[str, Any]:
        return {key: {"user": key, "recent_pages": len(state["pages"]), "visits": state["visits"]}}

    def generate(self, events: int, seed: int, *, users: int = 300, bad_ratio: float = 0.01
                 ) -> Iterator[tuple[bytes | None, bytes]]:
        return generate(events, seed=seed, users=users, bad_ratio=bad_ratio)


START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def generate(events: int, *, seed: int = 0, users: int = 300, pages: int = 500, step_ms: int = 2_000,
             late_ratio: float = 0.01, bad_ratio: float = 0.01, quiet_ratio: float = 0.1
             ) -> Iterator[tuple[bytes | None, bytes]]:
    """``events`` visits keyed by user: event time advances ``step_ms`` per visit; a user's pages
    are drawn from ``pages`` with a skew (some pages often, most rarely); a ``quiet_ratio`` share
    of users stop half way (their pages leave by TTL alone); a ``late_ratio`` share is 5-20
    minutes behind; a ``bad_ratio`` share is malformed."""
    rng = random.Random(seed)
    names = [f"u{i:04d}" for i in range(users)]
    quiet = set(rng.sample(names, min(users - 1, int(users * quiet_ratio))))
    bad = [lambda u: b"{", lambda u: json.dumps({"user": u, "ts": 5}).encode(),
           lambda u: json.dumps({"user": u, "page": "/a", "ts": "soon"}).encode()]
    made, i = 0, -1
    while made < events:
        i += 1
        user = names[int(rng.random() ** 1.5 * users)]
        if user in quiet and made > events // 2:
            continue
        made += 1
        ts = START_MS + i * step_ms
        if rng.random() < bad_ratio:
            yield user.encode(), bad[i % len(bad)](user)
            continue
        if rng.random() < late_ratio:
            ts -= 5 * 60_000 + int(rng.random() * 15 * 60_000)
        page = f"/p{int(rng.random() ** 2 * pages):03d}"
        yield user.encode(), json.dumps({"user": user, "page": page, "ts": ts}, separators=(",", ":")).encode()
