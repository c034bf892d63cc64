"""Deterministic ``user_activity`` load: the same arguments give byte-identical records.

Valid events: user ids ``u`` + the index zero-padded to the width of ``users`` (``u042`` for
500 users, ``u000042`` for 100000), event types ~60% view / 25% login / 15% purchase,
purchase amounts 0.01-500.00 written with two decimals, other amounts 0, ``ts`` = start +
10 ms per event with +-500 ms jitter (increasing-ish). Keys are the user id.

Bad records (probability ``bad_ratio`` per event, from an independent random stream so the valid
events do not change with the ratio) replace the event at their position. The k-th bad record
has reason ``REASONS[k % 6]`` and rotates through that reason's variants (tricky cases included:
booleans, NaN/Infinity, float ts, empty user id, arrays, non-UTF-8 bytes, ...). They are keyed by
their user id when they carry a valid one; records without one (invalid_json, not_an_object,
missing_user_id) have no key.

Skew: ``None`` = users uniformly; ``"zipf:S"`` (S > 0, finite) = the user of popularity rank r
is drawn with probability proportional to 1 / r**S over the finite population (so any S > 0 is
well defined; S around 1-1.5 is typical). Ranks are assigned to user ids by a seeded shuffle,
so the hot users are not simply the first ids.

Uses only ``random.Random.random()`` and ``shuffle`` (stable for a given seed), no wall clock:
``start_ts_ms=None`` means the fixed ``DEFAULT_START_TS_MS``, not "now".
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import random
from collections.abc import Callable, Iterator
from typing import NamedTuple

from jobs.demo.contract import REASONS

DEFAULT_START_TS_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
STEP_MS = 10
JITTER_MS = 500
MAX_CENTS = 50_000
#: cumulative event-type mix
MIX = (("view", 0.60), ("login", 0.85), ("purchase", 1.0))


class Record(NamedTuple):
    key: bytes | None
    value: bytes
    #: the contract reason this record was made to fail with; None for a valid event
    reason: str | None


def parse_skew(skew: str | None) -> float | None:
    """``None``/``""``/``"uniform"`` -> None; ``"zipf:S"`` -> S (finite, > 0). ValueError otherwise."""
    if skew is None or skew == "" or skew == "uniform":
        return None
    kind, sep, arg = skew.partition(":")
    if kind != "zipf" or not sep:
        raise ValueError(f"skew must be 'zipf:S' with a number S > 0 (e.g. zipf:1.2), got {skew!r}")
    try:
        s = float(arg)
    except ValueError:
        raise ValueError(f"zipf exponent must be a number > 0, got {arg!r}") from None
    if not math.isfinite(s) or s <= 0:
        raise ValueError(f"zipf exponent must be a finite number > 0, got {arg!r}")
    return s


def user_id(index: int, users: int) -> str:
    return f"u{index:0{len(str(users))}d}"


def _user_picker(users: int, exponent: float | None, seed: int, rng: random.Random) -> Callable[[], int]:
    if exponent is None:
        return lambda: int(rng.random() * users)
    cdf = list(itertools.accumulate(1.0 / (r ** exponent) for r in range(1, users + 1)))
    total = cdf[-1]
    by_rank = list(range(users))
    random.Random(f"streamops-zipf:{seed}").shuffle(by_rank)
    last = users - 1
    return lambda: by_rank[min(bisect.bisect_right(cdf, rng.random() * total), last)]


def generate_records(
    events: int,
    users: int,
    *,
    seed: int = 0,
    skew: str | None = None,
    bad_ratio: float = 0.0,
    start_ts_ms: int | None = None,
) -> Iterator[Record]:
    """``events`` records as ``Record(key, value, reason)``; see the module docstring."""
    if isinstance(events, bool) or not isinstance(events, int) or events < 0:
        raise ValueError(f"events must be an integer >= 0, got {events!r}")
    if isinstance(users, bool) or not isinstance(users, int) or users < 1:
        raise ValueError(f"users must be an integer >= 1, got {users!r}")
    if not (0.0 <= bad_ratio <= 1.0):
        raise ValueError(f"bad_ratio must be between 0 and 1, got {bad_ratio!r}")
    start = DEFAULT_START_TS_MS if start_ts_ms is None else int(start_ts_ms)
    if start < 0:
        raise ValueError(f"start_ts_ms must be >= 0, got {start_ts_ms!r}")
    exponent = parse_skew(skew)
    return _records(events, users, seed, exponent, bad_ratio, start)


def generate(
    events: int,
    users: int,
    *,
    seed: int = 0,
    skew: str | None = None,
    bad_ratio: float = 0.0,
    start_ts_ms: int | None = None,
) -> Iterator[tuple[bytes | None, bytes]]:
    """``(key, value)`` pairs; byte-identical for the same arguments."""
    return ((r.key, r.value) for r in generate_records(
        events, users, seed=seed, skew=skew, bad_ratio=bad_ratio, start_ts_ms=start_ts_ms))


def _records(events: int, users: int, seed: int, exponent: float | None, bad_ratio: float,
             start: int) -> Iterator[Record]:
    rng = random.Random(seed)
    bad_rng = random.Random(f"streamops-bad:{seed}")
    pick = _user_picker(users, exponent, seed, rng)
    width = len(str(users))
    # the hot path works on bytes; user keys are cached for populations that fit comfortably
    cached = [f"u{n:0{width}d}".encode() for n in range(users)] if users <= 1 << 20 else None
    rnd = rng.random
    bad_rnd = bad_rng.random
    template = b'{"user_id":"%s","event_type":"%s","amount":%s,"ts":%d}'
    jitter = 2 * JITTER_MS + 1
    n_bad = 0
    for i in range(events):
        n = pick()
        key = cached[n] if cached is not None else f"u{n:0{width}d}".encode()
        r = rnd()
        if r < 0.60:
            kind, amount = b"view", b"0"
        elif r < 0.85:
            kind, amount = b"login", b"0"
        else:
            kind, amount = b"purchase", b"%d.%02d" % divmod(1 + int(rnd() * MAX_CENTS), 100)
        ts = start + i * STEP_MS + int(rnd() * jitter) - JITTER_MS
        ts = max(ts, 0)
        if bad_ratio and bad_rnd() < bad_ratio:
            reason = REASONS[n_bad % len(REASONS)]
            variants = _BAD[reason]
            bad_key, value = variants[(n_bad // len(REASONS)) % len(variants)](
                key.decode(), kind.decode(), amount.decode(), ts)
            n_bad += 1
            yield Record(bad_key, value, reason)
        else:
            yield Record(key, template % (key, kind, amount, ts), None)


# -- bad records ------------------------------------------------------------------------------
_RAW = "\x00raw\x00"  # placeholder for a literal that json.dumps cannot write (1e999)


def _event_json(uid: str, kind: str, amount: str, ts: int, change: dict[str, object] | None = None) -> str:
    """The event as JSON with some fields replaced (``_DROP`` removes one, ``_Raw`` writes text)."""
    doc: dict[str, object] = {"user_id": uid, "event_type": kind, "amount": json.loads(amount), "ts": ts}
    raw = None
    for k, v in (change or {}).items():
        if v is _DROP:
            doc.pop(k, None)
        elif isinstance(v, _Raw):
            doc[k], raw = _RAW, v.text
        else:
            doc[k] = v
    text = json.dumps(doc, separators=(",", ":"))
    return text.replace(json.dumps(_RAW), raw) if raw is not None else text


class _Raw(NamedTuple):
    text: str


_DROP = object()

Variant = Callable[[str, str, str, int], tuple[bytes | None, bytes]]


def _keyless(**change: object) -> Variant:
    return lambda u, k, a, t: (None, _event_json(u, k, a, t, change).encode())


def _keyed(**change: object) -> Variant:
    return lambda u, k, a, t: (u.encode(), _event_json(u, k, a, t, change).encode())


def _const(value: bytes) -> Variant:
    return lambda u, k, a, t: (None, value)


_BAD: dict[str, tuple[Variant, ...]] = {
    "invalid_json": (
        lambda u, k, a, t: (None, _event_json(u, k, a, t).encode()[:-7]),  # truncated
        _const(b""),
        lambda u, k, a, t: (None, _event_json(u, k, a, t).encode().replace(b'"user_id":"', b'"user_id":"\xff\xfe')),
        _const(b"not json"),
        lambda u, k, a, t: (None, _event_json(u, k, a, t).encode("utf-16")),
        lambda u, k, a, t: (None, _event_json(u, k, a, t).encode() + b"}"),  # trailing garbage
    ),
    "not_an_object": (
        lambda u, k, a, t: (None, ("[" + _event_json(u, k, a, t) + "]").encode()),
        lambda u, k, a, t: (None, json.dumps(u).encode()),
        _const(b"42"),
        _const(b"null"),
        _const(b"true"),
    ),
    "missing_user_id": (
        _keyless(user_id=_DROP),
        _keyless(user_id=""),
        _keyless(user_id=42),
        _keyless(user_id=None),
        lambda u, k, a, t: (None, _event_json(u, k, a, t, {"user_id": [u]}).encode()),
    ),
    "bad_event_type": (
        _keyed(event_type="click"),
        _keyed(event_type=_DROP),
        lambda u, k, a, t: (u.encode(), _event_json(u, k, a, t, {"event_type": k.upper()}).encode()),
        _keyed(event_type=None),
        _keyed(event_type=1),
    ),
    "bad_amount": (
        _keyed(amount=-1.5),
        lambda u, k, a, t: (u.encode(), _event_json(u, k, a, t, {"amount": a}).encode()),  # a string
        _keyed(amount=True),
        _keyed(amount=_Raw("NaN")),
        _keyed(amount=_Raw("Infinity")),
        _keyed(amount=_Raw("-Infinity")),
        _keyed(amount=_DROP),
        _keyed(amount=_Raw("1e999")),
        _keyed(amount=None),
    ),
    "bad_ts": (
        lambda u, k, a, t: (u.encode(), _event_json(u, k, a, t, {"ts": t + 0.5}).encode()),
        lambda u, k, a, t: (u.encode(), _event_json(u, k, a, t, {"ts": float(t)}).encode()),
        lambda u, k, a, t: (u.encode(), _event_json(u, k, a, t, {"ts": str(t)}).encode()),
        _keyed(ts=-1),
        _keyed(ts=True),
        _keyed(ts=_DROP),
        _keyed(ts=None),
    ),
}
