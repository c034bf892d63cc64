"""bench/vs_kstreams.py's pure parts: the plain fold it checks both sides against, the check itself,
the peer's validation protocol, the build decision and the tables (no broker, no JVM)."""

from __future__ import annotations

import base64
import json
import os

import pytest

from bench.vs_kstreams import (
    EDGE_CASES,
    KSTREAMS_RATE,
    corpus,
    expected_of,
    expected_validation,
    latency_rows,
    needs_build,
    output_problems,
    rate_rows,
    validation_lines,
    validation_mismatches,
)
from jobs.demo.contract import REASONS
from jobs.demo.fold import profile_json, validate


def ev(uid: str, kind: str = "view", amount: object = 0, ts: int = 1) -> bytes:
    return json.dumps({"user_id": uid, "event_type": kind, "amount": amount, "ts": ts}).encode()


INPUT = [(("user-events", 0, 0), ev("u1", "purchase", 1.005)), (("user-events", 0, 1), b"not json"),
         (("user-events", 1, 0), ev("u1", "login", ts=7)), (("user-events", 1, 1), ev("u2")),
         (("user-events", 1, 2), ev("u2", ts=-1))]


# -- the plain fold ------------------------------------------------------------------------------------------
def test_expected_of_folds_valid_records_and_keeps_each_rejected_ones_reason():
    profiles, rejected = expected_of(INPUT)
    assert json.loads(profiles["u1"]) == {"user_id": "u1", "last_login_ts": 7, "purchases": 1,
                                          "total_amount": 1.01, "events": 2}  # 1.005 rounds half up
    assert profiles["u2"] == b'{"events":1,"last_login_ts":null,"purchases":0,"total_amount":0.0,"user_id":"u2"}'
    assert rejected == {("user-events", 0, 1): "invalid_json", ("user-events", 1, 2): "bad_ts"}


# -- the check of a side against it --------------------------------------------------------------------------
def side_output():
    profiles, rejected = expected_of(INPUT)
    return profiles, rejected, dict(profiles), [(w, r) for w, r in rejected.items()]


def test_output_problems_none_when_the_side_matches_the_fold():
    profiles, rejected, output, dlq = side_output()
    assert output_problems("kstreams", profiles, rejected, output, dlq) == []


def test_output_problems_a_value_that_differs_by_a_byte():
    profiles, rejected, output, dlq = side_output()
    output["u2"] = output["u2"].replace(b"0.0", b"0")  # equal as JSON numbers, not as the fold's bytes
    (p,) = output_problems("streamops", profiles, rejected, output, dlq)
    assert p.startswith("streamops: 'u2' is ")


def test_output_problems_missing_and_extra_users():
    profiles, rejected, output, dlq = side_output()
    del output["u1"]
    output["u3"] = b"{}"
    assert output_problems("s", profiles, rejected, output, dlq) == [
        "s: no output for user 'u1'", "s: output for 'u3', which the fold has no profile of"]


def test_output_problems_dlq_missing_duplicated_extra_and_wrong_reason():
    profiles, rejected, output, dlq = side_output()
    bad = [(("user-events", 0, 1), "invalid_json"), (("user-events", 0, 1), "invalid_json"),
           (("user-events", 1, 2), "bad_amount"), (("user-events", 1, 1), "bad_ts")]
    problems = output_problems("s", profiles, rejected, output, bad)
    assert problems == [
        "s: ('user-events', 0, 1) is in the DLQ 2 times",
        "s: ('user-events', 1, 1) is in the DLQ as bad_ts, the fold has it valid",
        "s: ('user-events', 1, 2) is in the DLQ as bad_amount, the fold says bad_ts",
    ]
    assert output_problems("s", profiles, rejected, output, dlq[:1]) == [
        "s: ('user-events', 1, 2) (bad_ts) is not in the DLQ"]


def test_output_problems_are_cut_to_the_first_few():
    profiles, rejected, _output, dlq = side_output()
    problems = output_problems("s", profiles, rejected, {}, dlq, most=1)
    assert problems == ["s: no output for user 'u1'", "s: ... 1 more"]


# -- the peer's validation protocol --------------------------------------------------------------------------
def test_validation_lines_base64_one_value_a_line_and_dash_for_null():
    assert validation_lines([None, b"", b"{}"]) == "-\n\n" + base64.b64encode(b"{}").decode() + "\n"


def test_expected_validation_gives_cents_for_purchases_only_and_the_user_as_json():
    assert expected_validation(ev("\u00fc", "purchase", 0.125, ts=5)) == 'ok 13 5 purchase "\\u00fc"'
    assert expected_validation(ev("u1", "view", 3.5)) == 'ok 0 1 view "u1"'
    assert expected_validation(None) == "invalid_json"


def answers(values):
    lines = [expected_validation(v) for v in values]
    from jobs.demo.fold import fold

    folded = fold(e for e, r in map(validate, values) if r is None)
    return "\n".join(lines + [f"profile {profile_json(p).decode()}" for p in folded.values()]) + "\n"


def test_validation_mismatches_none_for_the_folds_own_answers():
    values = [ev("u1", "purchase", 2.675), None, b"[]", ev("u2", "login", ts=9)]
    assert validation_mismatches(values, answers(values)) == []


def test_validation_mismatches_a_reason_a_missing_answer_and_a_profile():
    values = [ev("u1", "purchase", 2.675), b"[]"]
    out = answers(values).replace("not_an_object", "invalid_json").replace('"total_amount":2.68', '"total_amount":2.67')
    problems = validation_mismatches(values, out)
    assert problems[0].startswith("value 1 b'[]': the peer says 'invalid_json', fold.validate 'not_an_object'")
    assert any("only the peer gives" in p for p in problems)
    assert any("the peer does not give" in p for p in problems)
    assert validation_mismatches(values, "")[0] == "the peer answered 0 of 2 values"


def test_the_corpus_covers_every_reason_and_both_sides_of_the_edges():
    reasons = {validate(v)[1] for v in EDGE_CASES}
    assert reasons == {None, *REASONS}
    got = {v: validate(v)[1] for v in EDGE_CASES}
    assert got[None] == got[b""] == "invalid_json"
    assert got[b"null"] == "not_an_object"
    assert sum(1 for v in corpus() if v is not None and b'"big"' in v) > 10_000  # totals past 1e16


# -- the build decision and the tables -----------------------------------------------------------------------
def test_needs_build_when_the_jar_is_missing_or_older_than_a_source(tmp_path):
    jar, src = tmp_path / "peer.jar", tmp_path / "A.java"
    src.write_text("class A {}")
    assert needs_build(jar, [src])
    jar.write_bytes(b"")
    os.utime(src, (1_000, 1_000))
    os.utime(jar, (2_000, 2_000))
    assert not needs_build(jar, [src])
    os.utime(src, (3_000, 3_000))
    assert needs_build(jar, [src])


def test_rate_rows_ratio_to_the_peers_median():
    rows = rate_rows({KSTREAMS_RATE: [100_000.0, 120_000.0, 110_000.0], "streamops, all batches": [22_000.0, 20_000.0],
                      "empty": []})
    assert rows == [[KSTREAMS_RATE, "100,000", "110,000", "120,000", "1.00"],
                    ["streamops, all batches", "20,000", "21,000", "22,000", "0.19"]]


def test_rate_rows_without_the_peer():
    assert rate_rows({"streamops, all batches": [1.0]})[0][-1] == "-"


@pytest.mark.parametrize("base", [True, False])
def test_latency_rows(base):
    lat = {"streamops": {"p50": 2.5, "p90": 3.0, "max": 4.0, "probes": 80, "lost": 0}}
    if base:
        lat["kstreams"] = {"p50": 0.25, "p90": 0.3, "max": 0.5, "probes": 80, "lost": 0}
    rows = latency_rows(lat)
    assert rows[0] == ["streamops", "2.500", "3.000", "4.000", "80", "0", "10.00" if base else "-"]
