"""Pure offset planning for the Kafka source: Spark-compatible offset specs and batch plans.

Nothing here talks to Kafka or Spark. Callers fetch partitions and watermarks, pass plain dicts
keyed by ``(topic, partition)`` in, and get plain values back, so every rule is unit-testable.

Offsets are *next* offsets, as in Spark's Kafka source: ``{"t": {"0": 23}}`` means the next record
to read from partition 0 of ``t`` is offset 23. In offset specs ``-2`` means earliest and ``-1``
latest. Semantics follow ``org.apache.spark.sql.kafka010`` (KafkaSourceProvider,
KafkaMicroBatchStream, KafkaOffsetReaderAdmin); where we differ, the docstring says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from streamops.exceptions import ConfigError, StreamopsError

TP = tuple[str, int]
"""A Kafka topic partition: ``(topic, partition)``."""

EARLIEST: int = -2
LATEST: int = -1

OffsetSpec = Literal["earliest", "latest"] | dict[TP, int]
"""An unresolved spec: a keyword, or per-partition offsets that may hold -1 / -2."""

NoMatchStrategy = Literal["error", "latest"]

INSTRUCTION_FAIL = (
    "Records may have been lost because they are not available in Kafka any more (retention, "
    "delete_records, or the topic was deleted/recreated). Operator action: to skip ahead and "
    "continue, set the source option failOnDataLoss=false (the skipped range is logged as a "
    "warning); to reprocess from a known position, start a new checkpoint with startingOffsets."
)
INSTRUCTION_SKIP = "Skipped because failOnDataLoss=false; set failOnDataLoss=true to fail the query instead."


class OffsetSpecError(ConfigError):
    """An offset option (startingOffsets, endingOffsets, startingTimestamp, ...) is invalid.

    Operator action: fix the option named in the message; nothing was read.
    """


class DataLossError(StreamopsError):
    """Offsets the query still needed are gone from Kafka and failOnDataLoss is true.

    Operator action: read which topic/partition/offsets are gone in the message; either accept the
    loss (failOnDataLoss=false skips ahead with a warning) or restart from a new checkpoint with
    explicit startingOffsets.
    """


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition: one Spark input partition reads one range."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.end - self.start


class BatchPlan(NamedTuple):
    """What one (micro-)batch reads: unpacks as ``end, ranges, warnings = plan_batch(...)``."""

    end: dict[TP, int]
    ranges: list[OffsetRange]
    warnings: list[str]


# -- formatting --------------------------------------------------------------------------------


def tp_name(tp: TP) -> str:
    """``topic-partition`` as Kafka tools print it."""
    return f"{tp[0]}-{tp[1]}"


def offsets_to_dict(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` -> ``{"t": {"p": o}}``, topics and partitions sorted (stable JSON)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def format_offsets(offsets: Mapping[TP, int]) -> str:
    """Spark-compatible offsets JSON: ``{"t":{"0":23,"1":-2}}`` (sorted, compact)."""
    return json.dumps(offsets_to_dict(offsets), separators=(",", ":"))


def offsets_from_dict(value: Mapping[str, Mapping[str, int]] | str) -> dict[TP, int]:
    """Inverse of :func:`offsets_to_dict` (also accepts its JSON string); no validation of values."""
    obj = json.loads(value) if isinstance(value, str) else value
    return {(topic, int(p)): int(o) for topic, parts in obj.items() for p, o in parts.items()}


# -- parsing -----------------------------------------------------------------------------------

_SPEC_HINT = 'expected \'earliest\', \'latest\' or JSON like {"topic": {"0": 23, "1": -2}}'


def parse_topics(value: str | None) -> tuple[str, ...]:
    """The ``subscribe`` option: comma-separated topic names, blanks ignored, order kept."""
    topics = tuple(dict.fromkeys(t.strip() for t in (value or "").split(",") if t.strip()))
    if not topics:
        raise OffsetSpecError(
            f"no topics to subscribe to: option 'subscribe' is {value!r}; give comma-separated topic names"
        )
    return topics


def parse_json_offsets(option: str, value: str, topics: Iterable[str]) -> dict[TP, int]:
    try:
        obj = json.loads(value)
    except json.JSONDecodeError as exc:
        raise OffsetSpecError(
            f"{option} is not valid JSON ({exc.msg} at character {exc.pos}): {value!r}; {_SPEC_HINT}"
        ) from None
    if not isinstance(obj, dict) or not obj:
        raise OffsetSpecError(f"{option} must be a non-empty JSON object: {value!r}; {_SPEC_HINT}")
    known = set(topics)
    out: dict[TP, int] = {}
    for topic, parts in obj.items():
        if topic not in known:
            raise OffsetSpecError(
                f"{option} names topic {topic!r}, which is not subscribed (subscribe={sorted(known)})"
            )
        if not isinstance(parts, dict) or not parts:
            raise OffsetSpecError(
                f"{option} for topic {topic!r} must be an object of partition -> offset, got {parts!r}"
            )
        for key, offset in parts.items():
            try:
                partition = int(key)
            except (TypeError, ValueError):
                partition = -1
            if partition < 0 or str(partition) != str(key).strip():
                raise OffsetSpecError(
                    f"{option}: partition {key!r} of topic {topic!r} is not a non-negative integer"
                )
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise OffsetSpecError(
                    f"{option}: offset {offset!r} for {topic}-{partition} is not an integer"
                )
            if offset < EARLIEST:
                raise OffsetSpecError(
                    f"{option}: offset {offset} for {topic}-{partition} is negative; the only negative "
                    f"values allowed are {LATEST} (latest) and {EARLIEST} (earliest)"
                )
            out[(topic, partition)] = offset
    return out


def parse_starting_offsets(value: str | None, topics: Iterable[str], *, streaming: bool) -> OffsetSpec:
    """``startingOffsets``; default ``latest`` for streaming, ``earliest`` for batch (as Spark)."""
    text = (value or "").strip()
    if not text:
        return "latest" if streaming else "earliest"
    low = text.lower()
    if low in ("earliest", "latest"):
        if low == "latest" and not streaming:
            raise OffsetSpecError("startingOffsets can't be 'latest' for batch queries on Kafka")
        return low  # type: ignore[return-value]
    spec = parse_json_offsets("startingOffsets", text, topics)
    if not streaming:
        for tp, off in sorted(spec.items()):
            if off == LATEST:
                raise OffsetSpecError(
                    f"startingOffsets for {tp_name(tp)} can't be latest (-1) for batch queries on Kafka"
                )
    return spec


def parse_ending_offsets(value: str | None, topics: Iterable[str]) -> OffsetSpec:
    """``endingOffsets`` (batch only); default ``latest``; ``earliest`` / -2 are rejected (as Spark)."""
    text = (value or "").strip()
    if not text:
        return "latest"
    low = text.lower()
    if low == "latest":
        return "latest"
    if low == "earliest":
        raise OffsetSpecError("endingOffsets can't be 'earliest' for batch queries on Kafka")
    spec = parse_json_offsets("endingOffsets", text, topics)
    for tp, off in sorted(spec.items()):
        if off == EARLIEST:
            raise OffsetSpecError(
                f"endingOffsets for {tp_name(tp)} can't be earliest (-2) for batch queries on Kafka"
            )
    return spec


def parse_timestamp(value: str | int | None, option: str = "startingTimestamp") -> int | None:
    """A timestamp option in epoch milliseconds (>= 0), or None when unset."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        ts = int(str(value).strip())
    except ValueError:
        raise OffsetSpecError(f"{option} must be epoch milliseconds (an integer), got {value!r}") from None
    if ts < 0:
        raise OffsetSpecError(f"{option} must be >= 0 (epoch milliseconds), got {ts}")
    return ts


def parse_no_match_strategy(value: str | None) -> NoMatchStrategy:
    """``startingOffsetsByTimestampStrategy``: ``error`` (default, as Spark) or ``latest``."""
    low = (value or "error").strip().lower()
    if low not in ("error", "latest"):
        raise OffsetSpecError(
            f"startingOffsetsByTimestampStrategy must be 'error' or 'latest', got {value!r}"
        )
    return low  # type: ignore[return-value]


# -- resolution --------------------------------------------------------------------------------


def resolve_offsets(
    spec: OffsetSpec,
    partitions: Iterable[TP],
    earliest: Mapping[TP, int],
    latest: Mapping[TP, int],
    *,
    option: str,
) -> dict[TP, int]:
    """Concrete next offsets for every partition. A JSON spec must name every partition (as Spark)."""
    parts = sorted(set(partitions))
    if spec == "earliest":
        return {tp: earliest[tp] for tp in parts}
    if spec == "latest":
        return {tp: latest[tp] for tp in parts}
    assert isinstance(spec, dict)
    missing = [tp for tp in parts if tp not in spec]
    unknown = sorted(tp for tp in spec if tp not in set(parts))
    if unknown:
        raise OffsetSpecError(
            f"{option} names partitions that do not exist: {', '.join(map(tp_name, unknown))} "
            f"(existing: {', '.join(map(tp_name, parts)) or 'none'})"
        )
    if missing:
        raise OffsetSpecError(
            f"{option} must give an offset for every partition of the subscribed topics; missing: "
            f"{', '.join(map(tp_name, missing))} (use -2 for earliest, -1 for latest)"
        )
    out = {}
    for tp in parts:
        off = spec[tp]
        out[tp] = earliest[tp] if off == EARLIEST else latest[tp] if off == LATEST else off
    return out


def resolve_timestamp_offsets(
    found: Mapping[TP, int | None],
    latest: Mapping[TP, int],
    *,
    timestamp: int,
    strategy: NoMatchStrategy = "error",
) -> dict[TP, int]:
    """Offsets from ``offsets_for_times``: -1/None means no record at or after ``timestamp``.

    ``strategy="error"`` fails like Spark's default; ``"latest"`` starts such partitions at latest.
    """
    out: dict[TP, int] = {}
    for tp in sorted(found):
        off = found[tp]
        if off is None or off < 0:
            if strategy == "error":
                raise OffsetSpecError(
                    f"no offset matched startingTimestamp {timestamp} in {tp_name(tp)} (no record at or "
                    f"after that time); set startingOffsetsByTimestampStrategy=latest to start such "
                    f"partitions at their latest offset"
                )
            out[tp] = latest[tp]
        else:
            out[tp] = off
    return out


def check_batch_bounds(start: Mapping[TP, int], end: Mapping[TP, int], latest: Mapping[TP, int]) -> None:
    """Batch reads: every start <= end <= latest, else say which partition is wrong."""
    for tp in sorted(end):
        if end[tp] > latest[tp]:
            raise OffsetSpecError(
                f"endingOffsets for {tp_name(tp)} is {end[tp]} but the partition's latest offset is "
                f"{latest[tp]}: a batch read can't wait for records that do not exist yet"
            )
        if tp in start and start[tp] > end[tp]:
            raise OffsetSpecError(
                f"starting offset {start[tp]} of {tp_name(tp)} is after its ending offset {end[tp]}"
            )


# -- planning ----------------------------------------------------------------------------------


def rate_limit(limit: int, sizes: Mapping[TP, int]) -> dict[TP, int]:
    """Split ``limit`` records across partitions proportionally to their available ``sizes``.

    Like Spark's ``KafkaMicroBatchStream.rateLimit`` (prorate by size, don't starve small
    partitions) but exact: the total is ``min(limit, available)``, never more (Spark rounds small
    shares up and can exceed the limit, and rounds the others down and can leave part of it unused).
    Largest-remainder rounding; a partition with data gets at least 1 whenever ``limit`` is at least
    the number of such partitions (taken from the largest share). Ties break by (topic, partition),
    so the result does not depend on dict order.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    have = {tp: max(0, int(s)) for tp, s in sizes.items()}
    total = sum(have.values())
    if total <= limit:
        return have
    nonempty = sorted(tp for tp, s in have.items() if s > 0)
    alloc = {tp: 0 for tp in have}
    remainder: dict[TP, int] = {}
    for tp in nonempty:
        alloc[tp], remainder[tp] = divmod(limit * have[tp], total)
    left = limit - sum(alloc.values())
    for tp in sorted(nonempty, key=lambda t: (-remainder[t], t))[:left]:
        alloc[tp] += 1
    if limit >= len(nonempty):
        for tp in nonempty:
            if alloc[tp] == 0:
                # pigeonhole: with sum == limit >= len(nonempty) and one zero, some share is >= 2
                donor = max(nonempty, key=lambda t: (alloc[t], have[t]))
                alloc[donor] -= 1
                alloc[tp] = 1
    return alloc


def plan_batch(
    start: Mapping[TP, int],
    latest: Mapping[TP, int],
    earliest: Mapping[TP, int],
    max_offsets_per_trigger: int | None = None,
    fail_on_data_loss: bool = True,
) -> BatchPlan:
    """End offsets, ranges to read and data-loss warnings for one batch.

    ``start``: next offsets of the previous batch (or the initial offsets); ``latest`` / ``earliest``:
    the watermarks of every partition that exists now (``latest`` may also be a planned end, e.g. a
    batch ``endingOffsets`` or a micro-batch end being re-planned after a restart).

    Rules (Spark's, raised as :class:`DataLossError` when ``fail_on_data_loss`` else returned as
    warnings, and the plan skips ahead):
    - a partition in ``latest`` but not in ``start`` is new and starts at its earliest offset (data
      loss if that is not 0: records were deleted before the query saw the partition);
    - a start below the partition's earliest offset: records deleted -> skip to earliest;
    - a start above the partition's latest offset: the partition went back (topic recreated) ->
      skip to latest;
    - a partition in ``start`` but not in ``latest`` disappeared -> dropped from the plan.
    ``max_offsets_per_trigger`` caps the total records of the batch via :func:`rate_limit`.
    """
    missing_lo = sorted(tp for tp in latest if tp not in earliest)
    if missing_lo:
        raise ValueError(f"earliest offsets missing for {', '.join(map(tp_name, missing_lo))}")
    warnings: list[str] = []

    def data_loss(message: str) -> None:
        if fail_on_data_loss:
            raise DataLossError(f"{message}. {INSTRUCTION_FAIL}")
        warnings.append(f"{message}. {INSTRUCTION_SKIP}")

    gone = sorted(tp for tp in start if tp not in latest)
    if gone:
        data_loss(
            "partitions gone (topic deleted, or recreated with fewer partitions): "
            + ", ".join(f"{tp_name(tp)} (next offset to read was {start[tp]})" for tp in gone)
        )
    begin: dict[TP, int] = {}
    for tp in sorted(latest):
        lo, hi = earliest[tp], latest[tp]
        if tp not in start:
            if lo != 0:
                data_loss(
                    f"new partition {tp_name(tp)} starts at offset {lo} instead of 0: "
                    f"records 0..{lo - 1} were deleted before the query saw the partition"
                )
            begin[tp] = lo
            continue
        b = start[tp]
        if b < lo:
            data_loss(
                f"records deleted in {tp_name(tp)}: the next offset to read is {b} but the earliest "
                f"available offset is {lo}, so offsets {b}..{lo - 1} ({lo - b} records) are gone"
            )
            b = lo
        elif b > hi:
            data_loss(
                f"offsets of {tp_name(tp)} went back from {b} to latest {hi} (topic deleted and "
                f"recreated?): offsets {hi}..{b - 1} can't be matched to what was read"
            )
            b = hi
        begin[tp] = b
    # a re-planned end can lie below an earliest that moved past it: nothing left to read there
    sizes = {tp: max(0, latest[tp] - begin[tp]) for tp in begin}
    take = rate_limit(max_offsets_per_trigger, sizes) if max_offsets_per_trigger is not None else sizes
    end = {tp: begin[tp] + take[tp] for tp in begin}
    ranges = [OffsetRange(tp[0], tp[1], begin[tp], end[tp]) for tp in sorted(begin) if end[tp] > begin[tp]]
    return BatchPlan(end, ranges, warnings)


def plan_bounded_read(
    start: Mapping[TP, int],
    end: Mapping[TP, int],
    earliest: Mapping[TP, int],
    latest: Mapping[TP, int],
    fail_on_data_loss: bool = True,
) -> BatchPlan:
    """A batch read from resolved ``start`` to resolved ``end`` (both cover the same partitions)."""
    check_batch_bounds(start, end, latest)
    return plan_batch(start, end, earliest, None, fail_on_data_loss)


def cap_to_target(latest: Mapping[TP, int], target: Mapping[TP, int]) -> dict[TP, int]:
    """Trigger.AvailableNow: never plan past the offsets seen when the trigger was prepared.

    Partitions that appeared after that are left out (their data is newer than the target).
    """
    return {tp: min(off, target[tp]) for tp, off in latest.items() if tp in target}
