"""Offset specs and batch planning: edge-case tables, no Kafka, no Spark."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from streamops.exceptions import ConfigError
from streamops.spark.offsets import (
    EARLIEST,
    LATEST,
    DataLossError,
    OffsetRange,
    OffsetSpecError,
    cap_to_target,
    format_offsets,
    offsets_from_dict,
    parse_ending_offsets,
    parse_no_match_strategy,
    parse_starting_offsets,
    parse_timestamp,
    parse_topics,
    plan_batch,
    plan_bounded_read,
    rate_limit,
    resolve_offsets,
    resolve_timestamp_offsets,
)

T = "events"
A, B = "a", "b"


def tps(topic: str, n: int) -> list[tuple[str, int]]:
    return [(topic, p) for p in range(n)]


# -- parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("a", ("a",)),
        ("a,b", ("a", "b")),
        (" a , b ,, a ", ("a", "b")),
    ],
)
def test_parse_topics(value, expected):
    assert parse_topics(value) == expected


@pytest.mark.parametrize("value", [None, "", " , ,"])
def test_parse_topics_rejects_empty(value):
    with pytest.raises(OffsetSpecError, match="subscribe"):
        parse_topics(value)


@pytest.mark.parametrize(
    "value, streaming, expected",
    [
        (None, True, "latest"),
        (None, False, "earliest"),
        ("", True, "latest"),
        ("EARLIEST", True, "earliest"),
        (" latest ", True, "latest"),
        ("earliest", False, "earliest"),
        ('{"events": {"0": 23, "1": -2}}', True, {(T, 0): 23, (T, 1): EARLIEST}),
        ('{"events": {"0": -1}}', True, {(T, 0): LATEST}),
        ('{"events": {"0": 0, "1": -2}}', False, {(T, 0): 0, (T, 1): EARLIEST}),
    ],
)
def test_parse_starting_offsets(value, streaming, expected):
    assert parse_starting_offsets(value, [T], streaming=streaming) == expected


@pytest.mark.parametrize(
    "value, streaming, message",
    [
        ('{"events": {"0": 23', True, "not valid JSON"),
        ("earliestt", True, "not valid JSON"),
        ("[1, 2]", True, "non-empty JSON object"),
        ("{}", True, "non-empty JSON object"),
        ('{"other": {"0": 1}}', True, "names topic 'other', which is not subscribed"),
        ('{"events": {"0": -3}}', True, "only negative values allowed are -1 \\(latest\\) and -2"),
        ('{"events": {"0": -100}}', False, "is negative"),
        ('{"events": {"x": 1}}', True, "partition 'x' of topic 'events' is not a non-negative integer"),
        ('{"events": {"-1": 1}}', True, "partition '-1'"),
        ('{"events": {"0": 1.5}}', True, "offset 1.5 for events-0 is not an integer"),
        ('{"events": {"0": true}}', True, "not an integer"),
        ('{"events": {"0": "5"}}', True, "not an integer"),
        ('{"events": []}', True, "must be an object of partition -> offset"),
        ("latest", False, "can't be 'latest' for batch"),
        ('{"events": {"0": -1}}', False, "events-0 can't be latest"),
    ],
)
def test_parse_starting_offsets_errors(value, streaming, message):
    with pytest.raises(OffsetSpecError, match=message):
        parse_starting_offsets(value, [T], streaming=streaming)


def test_spec_errors_are_config_errors_with_exit_code_2():
    with pytest.raises(ConfigError) as info:
        parse_starting_offsets("{bad", [T], streaming=True)
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, "latest"),
        ("latest", "latest"),
        ('{"events": {"0": 10, "1": -1}}', {(T, 0): 10, (T, 1): LATEST}),
    ],
)
def test_parse_ending_offsets(value, expected):
    assert parse_ending_offsets(value, [T]) == expected


@pytest.mark.parametrize(
    "value, message",
    [
        ("earliest", "can't be 'earliest'"),
        ('{"events": {"0": -2}}', "events-0 can't be earliest"),
        ('{"nope": {"0": 1}}', "not subscribed"),
        ("{", "not valid JSON"),
    ],
)
def test_parse_ending_offsets_errors(value, message):
    with pytest.raises(OffsetSpecError, match=message):
        parse_ending_offsets(value, [T])


@pytest.mark.parametrize(
    "value, expected", [(None, None), ("", None), ("0", 0), (" 1700000000000 ", 1700000000000), (5, 5)]
)
def test_parse_timestamp(value, expected):
    assert parse_timestamp(value) == expected


@pytest.mark.parametrize(
    "value, message", [("yesterday", "epoch milliseconds"), ("-5", ">= 0"), ("1.5", "integer")]
)
def test_parse_timestamp_errors(value, message):
    with pytest.raises(OffsetSpecError, match=message):
        parse_timestamp(value)


def test_parse_no_match_strategy():
    assert parse_no_match_strategy(None) == "error"
    assert parse_no_match_strategy("LATEST") == "latest"
    with pytest.raises(OffsetSpecError, match="'error' or 'latest'"):
        parse_no_match_strategy("earliest")


# -- JSON round trip ---------------------------------------------------------------------------


def test_format_offsets_is_sorted_spark_json_and_round_trips():
    offsets = {(B, 10): 5, (A, 2): 7, (A, 10): 1, (B, 0): 0}
    text = format_offsets(offsets)
    assert text == '{"a":{"2":7,"10":1},"b":{"0":0,"10":5}}'
    assert offsets_from_dict(text) == offsets
    assert offsets_from_dict(json.loads(text)) == offsets
    # insertion order of the input does not matter
    assert format_offsets(dict(reversed(list(offsets.items())))) == text


# -- resolution --------------------------------------------------------------------------------

LO = {(T, 0): 0, (T, 1): 5, (T, 2): 0}
HI = {(T, 0): 10, (T, 1): 20, (T, 2): 0}


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("earliest", LO),
        ("latest", HI),
        ({(T, 0): 3, (T, 1): EARLIEST, (T, 2): LATEST}, {(T, 0): 3, (T, 1): 5, (T, 2): 0}),
    ],
)
def test_resolve_offsets(spec, expected):
    assert resolve_offsets(spec, tps(T, 3), LO, HI, option="startingOffsets") == expected


@pytest.mark.parametrize(
    "spec, message",
    [
        ({(T, 0): 3, (T, 1): 3}, "missing: events-2 \\(use -2 for earliest, -1 for latest\\)"),
        ({(T, 0): 3, (T, 1): 3, (T, 2): 0, (T, 7): 1}, "do not exist: events-7"),
    ],
)
def test_resolve_offsets_requires_exactly_the_existing_partitions(spec, message):
    with pytest.raises(OffsetSpecError, match=message):
        resolve_offsets(spec, tps(T, 3), LO, HI, option="startingOffsets")


@pytest.mark.parametrize(
    "found, strategy, expected",
    [
        ({(T, 0): 4, (T, 1): 7}, "error", {(T, 0): 4, (T, 1): 7}),
        ({(T, 0): 4, (T, 1): -1}, "latest", {(T, 0): 4, (T, 1): 20}),
        ({(T, 0): None, (T, 1): 7}, "latest", {(T, 0): 10, (T, 1): 7}),
    ],
)
def test_resolve_timestamp_offsets(found, strategy, expected):
    assert resolve_timestamp_offsets(found, HI, timestamp=123, strategy=strategy) == expected


def test_resolve_timestamp_offsets_no_match_fails_by_default():
    with pytest.raises(OffsetSpecError, match="no offset matched startingTimestamp 123 in events-1"):
        resolve_timestamp_offsets({(T, 0): 4, (T, 1): -1}, HI, timestamp=123)


# -- plan_batch: data loss, new and removed partitions --------------------------------------------


@pytest.mark.parametrize(
    "name, start, earliest, latest, end, ranges, n_warnings",
    [
        (
            "nothing new",
            {(T, 0): 10}, {(T, 0): 0}, {(T, 0): 10},
            {(T, 0): 10}, [], 0,
        ),
        (
            "plain progress",
            {(T, 0): 3, (T, 1): 0}, {(T, 0): 0, (T, 1): 0}, {(T, 0): 10, (T, 1): 4},
            {(T, 0): 10, (T, 1): 4}, [OffsetRange(T, 0, 3, 10), OffsetRange(T, 1, 0, 4)], 0,
        ),
        (
            "new partition starts at its earliest (0)",
            {(T, 0): 5}, {(T, 0): 0, (T, 1): 0}, {(T, 0): 5, (T, 1): 3},
            {(T, 0): 5, (T, 1): 3}, [OffsetRange(T, 1, 0, 3)], 0,
        ),
        (
            "new empty partition is remembered at its earliest",
            {(T, 0): 5}, {(T, 0): 0, (T, 1): 0}, {(T, 0): 5, (T, 1): 0},
            {(T, 0): 5, (T, 1): 0}, [], 0,
        ),
        (
            "new topic partitions (second topic created later)",
            {(A, 0): 1}, {(A, 0): 0, (B, 0): 0, (B, 1): 0}, {(A, 0): 1, (B, 0): 2, (B, 1): 1},
            {(A, 0): 1, (B, 0): 2, (B, 1): 1}, [OffsetRange(B, 0, 0, 2), OffsetRange(B, 1, 0, 1)], 0,
        ),
    ],
)
def test_plan_batch_without_loss(name, start, earliest, latest, end, ranges, n_warnings):
    for fail in (True, False):
        plan = plan_batch(start, latest, earliest, None, fail)
        assert plan.end == end, name
        assert plan.ranges == ranges, name
        assert len(plan.warnings) == n_warnings, name


LOSS_CASES = [
    # name, start, earliest, latest, expected end, expected ranges, error fragments
    (
        "records deleted below start",
        {(T, 0): 3, (T, 1): 2}, {(T, 0): 7, (T, 1): 0}, {(T, 0): 10, (T, 1): 2},
        {(T, 0): 10, (T, 1): 2}, [OffsetRange(T, 0, 7, 10)],
        ["records deleted in events-0", "next offset to read is 3", "earliest available offset is 7",
         "offsets 3..6 (4 records)"],
    ),
    (
        "everything deleted (earliest == latest)",
        {(T, 0): 3}, {(T, 0): 10}, {(T, 0): 10},
        {(T, 0): 10}, [],
        ["records deleted in events-0", "offsets 3..9 (7 records)"],
    ),
    (
        "partition removed",
        {(T, 0): 3, (T, 1): 4}, {(T, 0): 0}, {(T, 0): 5},
        {(T, 0): 5}, [OffsetRange(T, 0, 3, 5)],
        ["partitions gone", "events-1 (next offset to read was 4)"],
    ),
    (
        "topic removed",
        {(A, 0): 1, (B, 0): 9}, {(A, 0): 0}, {(A, 0): 1},
        {(A, 0): 1}, [],
        ["partitions gone", "b-0"],
    ),
    (
        "new partition whose first records were already deleted",
        {(T, 0): 5}, {(T, 0): 0, (T, 1): 4}, {(T, 0): 5, (T, 1): 9},
        {(T, 0): 5, (T, 1): 9}, [OffsetRange(T, 1, 4, 9)],
        ["new partition events-1 starts at offset 4 instead of 0", "records 0..3"],
    ),
    (
        "offsets went back (topic recreated)",
        {(T, 0): 50}, {(T, 0): 0}, {(T, 0): 7},
        {(T, 0): 7}, [],
        ["offsets of events-0 went back from 50 to latest 7"],
    ),
]


@pytest.mark.parametrize("name, start, earliest, latest, end, ranges, fragments", LOSS_CASES)
def test_plan_batch_data_loss_fails_when_fail_on_data_loss(
    name, start, earliest, latest, end, ranges, fragments
):
    with pytest.raises(DataLossError) as info:
        plan_batch(start, latest, earliest, None, True)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{name}: {fragment!r} not in {message!r}"
    assert "failOnDataLoss=false" in message  # tells the operator the remedy


@pytest.mark.parametrize("name, start, earliest, latest, end, ranges, fragments", LOSS_CASES)
def test_plan_batch_data_loss_skips_with_warning(name, start, earliest, latest, end, ranges, fragments):
    plan = plan_batch(start, latest, earliest, None, False)
    assert plan.end == end, name
    assert plan.ranges == ranges, name
    assert len(plan.warnings) == 1, plan.warnings
    for fragment in fragments:
        assert fragment in plan.warnings[0], f"{name}: {fragment!r} not in {plan.warnings[0]!r}"


def test_plan_batch_skip_ahead_then_rate_limit_counts_from_earliest():
    plan = plan_batch({(T, 0): 0}, {(T, 0): 100}, {(T, 0): 90}, 5, False)
    assert plan.ranges == [OffsetRange(T, 0, 90, 95)]
    assert plan.end == {(T, 0): 95}


def test_plan_batch_requires_earliest_for_every_partition():
    with pytest.raises(ValueError, match="earliest offsets missing for events-1"):
        plan_batch({}, {(T, 0): 1, (T, 1): 1}, {(T, 0): 0})


# -- maxOffsetsPerTrigger ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "limit, sizes, expected",
    [
        # everything fits: take all
        (100, [10, 20, 30], [10, 20, 30]),
        (60, [10, 20, 30], [10, 20, 30]),
        # exact proportions
        (30, [10, 20, 30], [5, 10, 15]),
        (40, [100, 300], [10, 30]),
        # largest remainder: 10 * (1/3, 1/3, 1/3) -> 3.33 each, the spare 1 goes to the first
        (10, [5, 5, 5], [4, 3, 3]),
        # small partitions are not starved (Spark rounds them up; we keep the total exact)
        (10, [1000, 1, 1], [8, 1, 1]),
        (3, [1000, 1, 1], [1, 1, 1]),
        # fewer records allowed than partitions with data: the biggest shares win, total stays exact
        (2, [1, 1000, 1], [0, 2, 0]),
        (2, [500, 1000, 1], [1, 1, 0]),
        (1, [5, 5, 5], [1, 0, 0]),
        # empty partitions get nothing, never negative
        (5, [0, 10, 0], [0, 5, 0]),
        (5, [0, 0, 0], [0, 0, 0]),
    ],
)
def test_rate_limit_table(limit, sizes, expected):
    got = rate_limit(limit, {(T, p): s for p, s in enumerate(sizes)})
    assert [got[(T, p)] for p in range(len(sizes))] == expected


def _check_allocation(limit: int, sizes: dict, alloc: dict) -> None:
    nonempty = [tp for tp, s in sizes.items() if s > 0]
    total = sum(max(s, 0) for s in sizes.values())
    assert sum(alloc.values()) == min(limit, total), "total must be exactly min(limit, available)"
    for tp, s in sizes.items():
        assert 0 <= alloc[tp] <= max(s, 0), f"{tp}: {alloc[tp]} outside [0, {s}]"
    if limit >= len(nonempty):
        assert all(alloc[tp] >= 1 for tp in nonempty), f"a partition with data was starved: {alloc}"
    if total > limit:
        quota = {tp: limit * max(s, 0) / total for tp, s in sizes.items()}
        lifted = sum(1 for tp in nonempty if quota[tp] < 1 and alloc[tp] == 1)
        for tp in sizes:
            assert abs(alloc[tp] - quota[tp]) < 1 + lifted, f"{tp}: {alloc[tp]} vs quota {quota[tp]:.2f}"


def test_rate_limit_invariants_on_random_inputs():
    rng = random.Random(20261122)
    for _ in range(2000):
        n = rng.randint(1, 8)
        sizes = {(rng.choice([A, B]), p): rng.choice([0, 1, 2, 7, rng.randint(0, 10_000)]) for p in range(n)}
        limit = rng.choice([1, 2, 3, n, 10, 97, rng.randint(1, 20_000)])
        alloc = rate_limit(limit, sizes)
        _check_allocation(limit, sizes, alloc)
        # deterministic: any insertion order gives the same answer
        items = list(sizes.items())
        rng.shuffle(items)
        assert rate_limit(limit, dict(items)) == alloc


def test_rate_limit_is_monotone_in_size_when_nobody_is_lifted():
    sizes = {(T, p): s for p, s in enumerate([10, 200, 3000, 45, 45, 1])}
    for limit in range(6, 3301):
        alloc = rate_limit(limit, sizes)
        for a, b in itertools.permutations(sizes, 2):
            if sizes[a] > sizes[b]:
                assert alloc[a] >= alloc[b], (limit, alloc)


def test_rate_limit_rejects_non_positive_limit():
    with pytest.raises(ValueError):
        rate_limit(0, {(T, 0): 1})


@pytest.mark.parametrize("limit", [1, 2, 5, 7, 100])
def test_plan_batch_max_offsets_per_trigger_over_successive_batches(limit):
    """Feeding each end back as the next start reads everything exactly once, <= limit per batch."""
    latest = {(T, 0): 17, (T, 1): 3, (T, 2): 0, (T, 3): 40}
    earliest = {tp: 0 for tp in latest}
    start = {tp: 0 for tp in latest}
    seen: dict = {tp: [] for tp in latest}
    for _ in range(200):
        end, ranges, warnings = plan_batch(start, latest, earliest, limit, True)
        assert not warnings
        assert sum(r.size for r in ranges) <= limit
        for r in ranges:
            assert r.start == start[r.tp]
            seen[r.tp].extend(range(r.start, r.end))
        if end == start:
            break
        start = end
    assert start == latest
    assert seen == {tp: list(range(latest[tp])) for tp in latest}


def test_plan_batch_new_partition_shares_the_limit():
    plan = plan_batch({(T, 0): 0}, {(T, 0): 90, (T, 1): 10}, {(T, 0): 0, (T, 1): 0}, 10, True)
    assert plan.end == {(T, 0): 9, (T, 1): 1}
    assert [r.size for r in plan.ranges] == [9, 1]


# -- bounded (batch) reads -------------------------------------------------------------------------


def test_plan_bounded_read_checks_bounds():
    lo, hi = {(T, 0): 0}, {(T, 0): 10}
    assert plan_bounded_read({(T, 0): 2}, {(T, 0): 8}, lo, hi).ranges == [OffsetRange(T, 0, 2, 8)]
    with pytest.raises(OffsetSpecError, match="endingOffsets for events-0 is 11 but the partition's latest"):
        plan_bounded_read({(T, 0): 2}, {(T, 0): 11}, lo, hi)
    with pytest.raises(OffsetSpecError, match="starting offset 9 of events-0 is after its ending offset 8"):
        plan_bounded_read({(T, 0): 9}, {(T, 0): 8}, lo, hi)


def test_plan_bounded_read_data_loss_rule_applies():
    with pytest.raises(DataLossError, match="records deleted in events-0"):
        plan_bounded_read({(T, 0): 2}, {(T, 0): 8}, {(T, 0): 5}, {(T, 0): 10}, True)
    plan = plan_bounded_read({(T, 0): 2}, {(T, 0): 8}, {(T, 0): 5}, {(T, 0): 10}, False)
    assert plan.ranges == [OffsetRange(T, 0, 5, 8)] and len(plan.warnings) == 1


def test_cap_to_target_drops_partitions_born_after_the_target():
    capped = cap_to_target({(T, 0): 50, (T, 1): 3, (T, 2): 9}, {(T, 0): 40, (T, 1): 5})
    assert capped == {(T, 0): 40, (T, 1): 3}


def test_replanning_an_end_that_records_deletion_overtook_reads_nothing():
    """partitions(start, end) after a restart: earliest moved past the planned end."""
    plan = plan_batch({(T, 0): 2}, {(T, 0): 8}, {(T, 0): 12}, None, False)
    assert plan.ranges == [] and len(plan.warnings) == 1
    assert plan.end == {(T, 0): 12}
