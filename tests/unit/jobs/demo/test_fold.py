"""The oracle: validate() follows the contract's ordered reasons; fold() builds exact profiles."""

from __future__ import annotations

import json
import random

import pytest

from jobs.demo.contract import REASONS
from jobs.demo.fold import fold, new_profile, profile_json, validate
from jobs.demo.generator import generate


def ev(**fields: object) -> bytes:
    doc: dict[str, object] = {"user_id": "u1", "event_type": "view", "amount": 0, "ts": 1000}
    for k, v in fields.items():
        if v is DROP:
            doc.pop(k)
        else:
            doc[k] = v
    return json.dumps(doc).encode()


DROP = object()
VALID = ev()

INVALID = [
    # invalid_json: not UTF-8 JSON, empty, null
    ("null value", None, "invalid_json"),
    ("empty bytes", b"", "invalid_json"),
    ("whitespace only", b"  \n", "invalid_json"),
    ("plain text", b"not json", "invalid_json"),
    ("truncated", VALID[:-3], "invalid_json"),
    ("trailing garbage", VALID + b"}", "invalid_json"),
    ("non-UTF-8 bytes", VALID.replace(b'"u1"', b'"u1\xff"'), "invalid_json"),
    ("UTF-16 (not sniffed)", VALID.decode().encode("utf-16"), "invalid_json"),
    ("UTF-8 BOM", b"\xef\xbb\xbf" + VALID, "invalid_json"),
    ("single quotes", b"{'user_id': 'u1'}", "invalid_json"),
    ("nested too deep", b"[" * 100_000 + b"]" * 100_000, "invalid_json"),
    # not_an_object
    ("JSON array", b'[{"user_id":"u1","event_type":"view","amount":0,"ts":1}]', "not_an_object"),
    ("JSON string", b'"u1"', "not_an_object"),
    ("JSON number", b"42", "not_an_object"),
    ("JSON null text", b"null", "not_an_object"),
    ("JSON true", b"true", "not_an_object"),
    # missing_user_id
    ("no user_id", ev(user_id=DROP), "missing_user_id"),
    ("empty user_id", ev(user_id=""), "missing_user_id"),
    ("numeric user_id", ev(user_id=42), "missing_user_id"),
    ("null user_id", ev(user_id=None), "missing_user_id"),
    ("list user_id", ev(user_id=["u1"]), "missing_user_id"),
    ("bool user_id", ev(user_id=True), "missing_user_id"),
    # bad_event_type
    ("no event_type", ev(event_type=DROP), "bad_event_type"),
    ("unknown event_type", ev(event_type="click"), "bad_event_type"),
    ("upper-case event_type", ev(event_type="LOGIN"), "bad_event_type"),
    ("padded event_type", ev(event_type=" view"), "bad_event_type"),
    ("null event_type", ev(event_type=None), "bad_event_type"),
    ("numeric event_type", ev(event_type=1), "bad_event_type"),
    ("list event_type", ev(event_type=["view"]), "bad_event_type"),
    # bad_amount
    ("no amount", ev(amount=DROP), "bad_amount"),
    ("string amount", ev(amount="12.50"), "bad_amount"),
    ("bool amount true", ev(amount=True), "bad_amount"),
    ("bool amount false", ev(amount=False), "bad_amount"),
    ("null amount", ev(amount=None), "bad_amount"),
    ("negative amount", ev(amount=-0.01), "bad_amount"),
    ("negative int amount", ev(amount=-1), "bad_amount"),
    ("amount above MAX_AMOUNT", ev(amount=10**12 + 1), "bad_amount"),
    ("huge float amount", ev(amount=1e26), "bad_amount"),
    ("ts above a long", ev(ts=2**63), "bad_ts"),
    ("NaN amount", VALID.replace(b'"amount": 0', b'"amount": NaN'), "bad_amount"),
    ("Infinity amount", VALID.replace(b'"amount": 0', b'"amount": Infinity'), "bad_amount"),
    ("-Infinity amount", VALID.replace(b'"amount": 0', b'"amount": -Infinity'), "bad_amount"),
    ("overflowing amount", VALID.replace(b'"amount": 0', b'"amount": 1e999'), "bad_amount"),
    ("object amount", ev(amount={"v": 1}), "bad_amount"),
    # bad_ts
    ("no ts", ev(ts=DROP), "bad_ts"),
    ("float ts", ev(ts=1000.5), "bad_ts"),
    ("integral float ts", ev(ts=1000.0), "bad_ts"),
    ("exponent ts", VALID.replace(b'"ts": 1000', b'"ts": 1e3'), "bad_ts"),
    ("string ts", ev(ts="1000"), "bad_ts"),
    ("negative ts", ev(ts=-1), "bad_ts"),
    ("bool ts", ev(ts=True), "bad_ts"),
    ("null ts", ev(ts=None), "bad_ts"),
]


@pytest.mark.parametrize("value,reason", [pytest.param(v, r, id=name) for name, v, r in INVALID])
def test_invalid_records_get_their_reason(value: bytes | None, reason: str) -> None:
    assert validate(value) == (None, reason)


def test_the_table_covers_every_reason() -> None:
    assert {r for _, _, r in INVALID} == set(REASONS)


@pytest.mark.parametrize(
    "value,reason",
    [
        pytest.param(b'{"user_id":"","event_type":"x","amount":-1,"ts":-1}', "missing_user_id", id="uid-before-type"),
        pytest.param(b'{"user_id":"u","event_type":"x","amount":-1,"ts":-1}', "bad_event_type", id="type-before-amount"),
        pytest.param(b'{"user_id":"u","event_type":"view","amount":true,"ts":1.5}', "bad_amount", id="amount-before-ts"),
        pytest.param(b'[1', "invalid_json", id="json-before-object"),
    ],
)
def test_the_first_reason_in_contract_order_wins(value: bytes, reason: str) -> None:
    assert validate(value) == (None, reason)


@pytest.mark.parametrize(
    "value,event",
    [
        pytest.param(VALID, {"user_id": "u1", "event_type": "view", "amount": 0, "ts": 1000}, id="plain"),
        pytest.param(ev(amount=12.5, event_type="purchase"),
                     {"user_id": "u1", "event_type": "purchase", "amount": 12.5, "ts": 1000}, id="float-amount"),
        pytest.param(ev(amount=0.0), {"user_id": "u1", "event_type": "view", "amount": 0.0, "ts": 1000}, id="zero-float"),
        pytest.param(ev(amount=-0.0), {"user_id": "u1", "event_type": "view", "amount": -0.0, "ts": 1000}, id="minus-zero"),
        pytest.param(ev(ts=0), {"user_id": "u1", "event_type": "view", "amount": 0, "ts": 0}, id="ts-zero"),
        pytest.param(ev(ts=2**63 - 1), {"user_id": "u1", "event_type": "view", "amount": 0, "ts": 2**63 - 1}, id="max-ts"),
        pytest.param(ev(user_id=" "), {"user_id": " ", "event_type": "view", "amount": 0, "ts": 1000}, id="blank-uid"),
        pytest.param(ev(user_id="ü"), {"user_id": "ü", "event_type": "view", "amount": 0, "ts": 1000}, id="non-ascii"),
        pytest.param(ev(extra=[1, 2]), {"user_id": "u1", "event_type": "view", "amount": 0, "ts": 1000}, id="extra-field"),
        pytest.param(VALID.decode(), {"user_id": "u1", "event_type": "view", "amount": 0, "ts": 1000}, id="str"),
        pytest.param(bytearray(VALID), {"user_id": "u1", "event_type": "view", "amount": 0, "ts": 1000}, id="bytearray"),
    ],
)
def test_valid_records_yield_exactly_the_contract_fields(value: object, event: dict) -> None:
    got, reason = validate(value)  # type: ignore[arg-type]
    assert reason is None
    assert got == event
    assert list(got) == ["user_id", "event_type", "amount", "ts"]


# -- fold ---------------------------------------------------------------------------------------
def e(uid: str, kind: str, amount: float = 0, ts: int = 0) -> dict:
    return {"user_id": uid, "event_type": kind, "amount": amount, "ts": ts}


def test_fold_builds_profiles_as_the_contract_defines() -> None:
    events = [
        e("a", "login", ts=5), e("a", "view", ts=9), e("a", "purchase", 10.25, 7), e("a", "login", ts=3),
        e("a", "purchase", 0.75, 8), e("b", "view", ts=1), e("b", "purchase", 3, 2),
    ]
    assert fold(events) == {
        "a": {"user_id": "a", "last_login_ts": 5, "purchases": 2, "total_amount": 11.0, "events": 5},
        "b": {"user_id": "b", "last_login_ts": None, "purchases": 1, "total_amount": 3.0, "events": 2},
    }


def test_fold_of_nothing() -> None:
    assert fold([]) == {}
    assert fold([], into={"a": new_profile("a")}) == {"a": new_profile("a")}


def test_amounts_of_non_purchases_do_not_count() -> None:
    assert fold([e("a", "view", 99.0), e("a", "login", 5, ts=1)])["a"]["total_amount"] == 0.0


def test_total_is_exact_and_order_independent() -> None:
    # a float sum depends on the order: 0.1 + 0.2 + 0.3 != 0.3 + 0.2 + 0.1
    amounts = [0.1, 0.2, 0.3, 1e9, 0.07, 499.99, 0.01] * 50
    totals, float_sums = set(), set()
    for seed in range(20):
        shuffled = amounts[:]
        random.Random(seed).shuffle(shuffled)
        float_sums.add(sum(shuffled))
        totals.add(fold(e("a", "purchase", a) for a in shuffled)["a"]["total_amount"])
    assert len(float_sums) > 1, "the input should make a naive float sum order-dependent"
    assert totals == {50_000_025_033.5}  # 50 * (1e9 + 500.67), exact


@pytest.mark.parametrize("amounts,total", [
    ([0.005], 0.01), ([1.005], 1.01), ([0.004], 0.0), ([0.1, 0.2], 0.3), ([500, 0.01], 500.01), ([], 0.0),
    # each amount is rounded to cents before summing (contract.amount_cents), as the Spark job does
    ([0.005, 0.005], 0.02), ([0.004, 0.004, 0.004], 0.0), ([2.675, 2.675], 5.36),
])
def test_each_amount_rounds_half_up_to_cents(amounts: list[float], total: float) -> None:
    profiles = fold([e("a", "view")] + [e("a", "purchase", a) for a in amounts])
    assert profiles["a"]["total_amount"] == total
    assert profiles["a"]["purchases"] == len(amounts)


def test_fold_is_order_independent_on_generated_data() -> None:
    events = [ev for ev, _ in map(validate, (v for _, v in generate(3000, 40, seed=3, bad_ratio=0.05))) if ev]
    expected = fold(events)
    for seed in range(3):
        shuffled = events[:]
        random.Random(seed).shuffle(shuffled)
        assert fold(shuffled) == expected
    assert sum(p["events"] for p in expected.values()) == len(events)
    assert sum(p["purchases"] for p in expected.values()) == sum(ev["event_type"] == "purchase" for ev in events)
    for uid, p in expected.items():
        logins = [ev["ts"] for ev in events if ev["user_id"] == uid and ev["event_type"] == "login"]
        assert p["last_login_ts"] == (max(logins) if logins else None)


def test_incremental_fold_equals_one_fold_and_leaves_input_alone() -> None:
    events = [ev for ev, _ in map(validate, (v for _, v in generate(2000, 30, seed=5))) if ev]
    first = fold(events[:700])
    snapshot = json.loads(json.dumps(first))
    assert fold(events[700:], into=first) == fold(events)
    assert first == snapshot, "fold() modified `into`"


def test_profile_json_is_canonical() -> None:
    p = {"user_id": "u\u00fc", "total_amount": 1.5, "events": 2, "purchases": 1, "last_login_ts": None}
    raw = profile_json(p)
    assert raw == b'{"events":2,"last_login_ts":null,"purchases":1,"total_amount":1.5,"user_id":"u\\u00fc"}'
    assert json.loads(raw) == p
    assert profile_json(dict(reversed(list(p.items())))) == raw
