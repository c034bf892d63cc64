"""App ``user_activity``: per-user activity profiles from ``user-events``.

Input: JSON events keyed by user id (``jobs.demo.contract`` states the rules, ``jobs.demo.generator``
makes them). State per user: the last login, the number of purchases, their total in cents and the
number of events, a native Spark aggregation (max and sums in the RocksDB state store). Output:
the profile with the total in currency units. Invalid records go to the DLQ with their reason.

A canonical event is parsed vectorized in Arrow (``parse_arrow``), about 3x faster than per
record; anything else takes ``parse``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from jobs.demo.contract import amount_cents
from streamops.arrow import parsed_arrow_schema
from streamops.job import Job, Max, Record, Reject, Sum

Event = dict[str, Any]

# -- the vectorized parser (optional: parse() alone gives the same rows) ------------------------------------------------------------------------
_WS = r"[ \t\n\r]*"


def _field(name: str, pattern: str) -> str:
    return rf'{_WS}"{name}"{_WS}:{_WS}{pattern}{_WS}'


#: The canonical event shape (keys in contract order, ASCII user_id without escapes, a plain
#: decimal amount of at most 12+3 digits, an integer ts that fits a long). A value matching it
#: is valid under the contract and its fields are exactly these groups, so it is parsed in
#: Arrow's C++ regex engine; anything else (1% bad records, escapes, exponents, other key
#: orders, extra keys) takes the exact Python validator. <= 15 significant digits means
#: Python's float round trip leaves the decimal unchanged, so cents computed from the text
#: equal ``contract.amount_cents``.
CANONICAL_EVENT = "^{" + ",".join([
    _field("user_id", r'"(?P<uid>[ !#-\[\]-~]+)"'),
    _field("event_type", r'"(?P<et>login|purchase|view)"'),
    _field("amount", r"(?P<ai>0|[1-9][0-9]{0,11})(?:\.(?P<af>[0-9]{1,3}))?"),
    _field("ts", r"(?P<ts>0|[1-9][0-9]{0,17})"),
]) + "}" + _WS + "$"


def _fast_rows(batch: pa.RecordBatch, matched: pa.StructArray, mask: pa.Array, schema: pa.Schema) -> pa.RecordBatch:
    import pyarrow.compute as pc

    m = matched.filter(mask)
    frac = pc.utf8_rpad(pc.cast(m.field("af"), pa.string()), 3, "0")  # "5" -> "500" thousandths
    cents = pc.add(pc.multiply(pc.cast(pc.cast(m.field("ai"), pa.string()), pa.int64()), 100),
                   pc.divide(pc.add(pc.cast(frac, pa.int64()), 5), 10))  # half up; ints: floor div
    kind = m.field("et")
    login = pc.equal(kind, "login")
    purchase = pc.equal(kind, "purchase")
    n = len(m)
    zero = pa.array([0] * n, pa.int64())
    return pa.RecordBatch.from_pydict({
        "user_id": pc.cast(m.field("uid"), pa.string()),
        "last_login_ts": pc.if_else(login, pc.cast(pc.cast(m.field("ts"), pa.string()), pa.int64()),
                                    pa.nulls(n, pa.int64())),
        "purchases": pc.if_else(purchase, pa.array([1] * n, pa.int64()), zero),
        "total_cents": pc.if_else(purchase, cents, zero),
        "events": pa.array([1] * n, pa.int64()),
        "reason": pa.nulls(n, pa.string()),
        "raw_key": pa.nulls(n, pa.binary()),
        "raw_value": pa.nulls(n, pa.binary()),
        "src_topic": batch.column("topic").filter(mask),
        "src_partition": batch.column("partition").filter(mask).cast(pa.int32()),
        "src_offset": batch.column("offset").filter(mask).cast(pa.int64()),
    }, schema=schema)


def parse_canonical(job: UserActivity, batch: pa.RecordBatch) -> tuple[pa.RecordBatch | None, pa.RecordBatch]:
    """Canonical values parsed in Arrow's C++ regex engine (``CANONICAL_EVENT``); the rest is
    returned for ``parse``. Rows equal what ``parse`` + ``contribute`` give (tested, and checked
    by ``streamops app lint``)."""
    import pyarrow.compute as pc

    values = batch.column("value")
    if pa.types.is_large_binary(values.type):
        values = values.cast(pa.binary())
    matched = pc.extract_regex(values, CANONICAL_EVENT)
    mask = pc.is_valid(matched)
    fast = int(pc.sum(mask).as_py() or 0)
    done = _fast_rows(batch, matched, mask, _PARSED) if fast else None
    return done, (batch.filter(pc.invert(mask)) if fast < len(batch) else None)



class UserActivity(Job[Event, dict]):
    key_name = "user_id"
    aggregate = {"last_login_ts": Max(), "purchases": Sum(), "total_cents": Sum(), "events": Sum()}

    def parse(self, record: Record) -> Event | Reject:
        from jobs.demo.fold import validate

        event, reason = validate(record.value)
        return Reject(reason) if reason is not None else event

    def key(self, event: Event) -> str:
        return event["user_id"]

    def contribute(self, event: Event) -> Mapping[str, Any]:
        kind = event["event_type"]
        return {"last_login_ts": event["ts"] if kind == "login" else None,
                "purchases": 1 if kind == "purchase" else 0,
                "total_cents": amount_cents(event["amount"]) if kind == "purchase" else 0,
                "events": 1}

    def emit(self, key: str, state: dict) -> Mapping[str, Any]:
        return {key: {"user_id": key, "last_login_ts": state["last_login_ts"], "purchases": state["purchases"],
                      "total_amount": round(state["total_cents"] / 100, 2), "events": state["events"]}}

    def generate(self, events: int, seed: int, *, users: int | None = None, bad_ratio: float = 0.01,
                 skew: str | None = None) -> Iterator[tuple[bytes | None, bytes]]:
        """``jobs.demo.generator``'s events; ``users`` defaults to one per 20 events (at most 100,000)."""
        from jobs.demo.generator import generate

        if users is None:
            users = max(1, min(100_000, events // 20))
        return generate(events, users, seed=seed, skew=skew, bad_ratio=bad_ratio)

    parse_arrow = parse_canonical


_PARSED = parsed_arrow_schema(UserActivity)
