"""The load generator: deterministic bytes, every DLQ reason, the promised mix and skew."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from jobs.demo.contract import EVENT_TYPES, REASONS
from jobs.demo.fold import validate
from jobs.demo.generator import (
    _BAD,
    DEFAULT_START_TS_MS,
    generate,
    generate_records,
    parse_skew,
    user_id,
)


def test_same_arguments_give_identical_bytes() -> None:
    args = {"seed": 11, "skew": "zipf:1.3", "bad_ratio": 0.1}
    a = list(generate(5000, 300, **args))
    assert a == list(generate(5000, 300, **args))
    assert a != list(generate(5000, 300, **{**args, "seed": 12}))
    assert all(isinstance(v, bytes) and (k is None or isinstance(k, bytes)) for k, v in a)


def test_generate_is_generate_records_without_reasons() -> None:
    assert list(generate(500, 10, seed=1, bad_ratio=0.2)) == [
        (r.key, r.value) for r in generate_records(500, 10, seed=1, bad_ratio=0.2)]


def test_valid_events_do_not_depend_on_the_bad_ratio() -> None:
    clean = list(generate_records(3000, 50, seed=4))
    dirty = list(generate_records(3000, 50, seed=4, bad_ratio=0.3))
    assert all(c == d for c, d in zip(clean, dirty) if d.reason is None)
    assert sum(d.reason is not None for d in dirty) > 500


@pytest.mark.parametrize("ratio", [0.02, 0.05, 0.3])
def test_bad_ratio_within_tolerance(ratio: float) -> None:
    n = 20_000
    bad = sum(r.reason is not None for r in generate_records(n, 100, seed=9, bad_ratio=ratio))
    sd = (n * ratio * (1 - ratio)) ** 0.5
    assert abs(bad - n * ratio) < 5 * sd, (bad, n * ratio)


@pytest.mark.parametrize("ratio,expected", [(0.0, 0), (1.0, 1000)])
def test_bad_ratio_extremes(ratio: float, expected: int) -> None:
    assert sum(r.reason is not None for r in generate_records(1000, 10, seed=1, bad_ratio=ratio)) == expected


def test_every_reason_and_every_variant_appears_and_validate_agrees() -> None:
    records = list(generate_records(20_000, 200, seed=2, bad_ratio=0.05))
    reasons = Counter(r.reason for r in records if r.reason)
    assert set(reasons) == set(REASONS)
    assert max(reasons.values()) - min(reasons.values()) <= 1, "reasons should rotate evenly"
    for r in records:
        assert validate(r.value)[1] == r.reason, r
    # each reason's variants rotate too: every tricky case is in the data
    for reason, variants in _BAD.items():
        assert len({r.value for r in records if r.reason == reason}) >= len(variants)
    values = {r.value for r in records}
    for must in (b"", b"null", b"42", b"true", b"not json"):
        assert must in values
    joined = b"\n".join(values)
    for fragment in (b'"amount":NaN', b'"amount":Infinity', b'"amount":-Infinity', b'"amount":true',
                     b'"amount":1e999', b'"user_id":""', b'"ts":true', b"\xff\xfe"):
        assert fragment in joined, fragment


def test_keys_are_user_ids_when_the_record_has_one() -> None:
    for r in generate_records(5000, 100, seed=3, bad_ratio=0.2):
        if r.reason in (None, "bad_event_type", "bad_amount", "bad_ts"):
            assert r.key is not None and json.loads(r.value)["user_id"] == r.key.decode(), r
        else:
            assert r.key is None, r


@pytest.mark.parametrize("users,example", [(1, "u0"), (9, "u8"), (10, "u07"), (500, "u042"), (100_000, "u000042")])
def test_user_ids_are_zero_padded_to_the_width_of_users(users: int, example: str) -> None:
    idx = int(example[1:])
    assert user_id(idx, users) == example
    ids = {json.loads(v)["user_id"] for _, v in generate(2000, users, seed=1)}
    assert all(len(u) == len(example) and 0 <= int(u[1:]) < users for u in ids)


def test_event_mix_amounts_and_timestamps() -> None:
    n = 30_000
    events = [json.loads(v) for _, v in generate(n, 1000, seed=8)]
    mix = Counter(e["event_type"] for e in events)
    assert set(mix) == set(EVENT_TYPES)
    for kind, share in (("view", 0.60), ("login", 0.25), ("purchase", 0.15)):
        assert abs(mix[kind] / n - share) < 0.015, (kind, mix[kind] / n)
    raw = [v for _, v in generate(n, 1000, seed=8)]
    for e, v in zip(events, raw):
        if e["event_type"] == "purchase":
            assert 0.01 <= e["amount"] <= 500.0
            text = v.split(b'"amount":')[1].split(b",")[0]
            assert len(text.split(b".")[1]) == 2, text  # written with two decimals
        else:
            assert e["amount"] == 0
    ts = [e["ts"] for e in events]
    assert abs(ts[0] - DEFAULT_START_TS_MS) <= 500
    assert all(isinstance(t, int) and t >= 0 for t in ts)
    assert all(ts[i + 100] > ts[i] for i in range(n - 100)), "ts should increase beyond the jitter"
    assert sum(b < a for a, b in itertools.pairwise(ts)) > 0, "ts should be increasing-ish, not sorted"


def test_start_ts_is_respected() -> None:
    ts = [json.loads(v)["ts"] for _, v in generate(100, 5, seed=1, start_ts_ms=0)]
    assert min(ts) >= 0 and max(ts) < 100 * 10 + 500


def test_zipf_skew_makes_the_top_user_much_hotter() -> None:
    def top_share(skew: str | None) -> float:
        counts = Counter(k for k, _ in generate(20_000, 1000, seed=6, skew=skew))
        return counts.most_common(1)[0][1] / 20_000

    uniform, zipf = top_share(None), top_share("zipf:1.2")
    assert uniform < 0.005
    assert zipf > 10 * uniform
    assert top_share("zipf:2") > zipf
    # ranks are shuffled: the hottest user is not simply the first id
    hottest = {Counter(k for k, _ in generate(5000, 1000, seed=s, skew="zipf:1.5")).most_common(1)[0][0]
               for s in range(5)}
    assert len(hottest) > 1


@pytest.mark.parametrize("text,value", [(None, None), ("", None), ("uniform", None), ("zipf:1.2", 1.2),
                                        ("zipf:0.5", 0.5), ("zipf:3", 3.0)])
def test_parse_skew(text: str | None, value: float | None) -> None:
    assert parse_skew(text) == value


@pytest.mark.parametrize("text", ["zipf", "zipf:", "zipf:0", "zipf:-1", "zipf:nan", "zipf:inf", "zipf:abc",
                                  "pareto:1.2", "1.2", "ZIPF:1.2"])
def test_parse_skew_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="zipf"):
        parse_skew(text)


@pytest.mark.parametrize("kwargs", [
    {"events": -1, "users": 1}, {"events": 1, "users": 0}, {"events": 1, "users": 1, "bad_ratio": 1.5},
    {"events": 1, "users": 1, "bad_ratio": -0.1}, {"events": 1, "users": 1, "bad_ratio": float("nan")},
    {"events": 1, "users": 1, "skew": "zipf:0"}, {"events": 1, "users": 1, "start_ts_ms": -5}, {"events": 1.5, "users": 1},
])
def test_invalid_arguments_are_rejected_up_front(kwargs: dict) -> None:
    events, users = kwargs.pop("events"), kwargs.pop("users")
    with pytest.raises(ValueError):
        generate(events, users, **kwargs)


def test_zero_events() -> None:
    assert list(generate(0, 5, seed=1, bad_ratio=0.5)) == []
