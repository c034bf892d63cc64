"""Stream time and timers: the rule Spark and ``check``'s fold both follow, so that a job's result is
a function of its input alone, whatever the batch cut (docs/architecture.md, "Stream time").

- An event's time is ``Job.timestamp(event)`` (default: the Kafka record's timestamp), epoch ms in
  ``[MIN_TS, MAX_TS]``; outside that the record goes to the DLQ as ``bad_timestamp``.
- **Partition stream time**: per input partition, the largest event time of the partition's
  records so far (parsed ones). It depends only on the partition's own records in offset order.
- **Late**: an event more than ``grace_ms`` behind its partition's stream time before it.
- **A key's clock**: its partition's stream time at the key's latest event. Before and after each
  of its events, the key's timers up to its clock fire (oldest first, one ``on_timer`` per time).
- A job with ``fire_timers_by = "watermark"`` gets each event as a ``Timed`` item in ``update``
  and its timers fire only by the watermark: no partition's stream time, so no input can bring an
  event behind it that is not late. That is what ordering a key's events from several partitions
  or topics by event time needs (``streamops.joins``).
- **Watermark**: the smallest stream time over all input partitions (None while one of them has
  shown nothing). No partition's stream time is ever below it, so a timer fired by the watermark
  is one every later event of the key would have fired first anyway: the watermark fires timers
  of keys that get no events (a session whose user went quiet) without changing any result.

Spark learns the watermark a batch or two late (``streamops.spark.query``); that only moves
*when* a timer fires, never the state it leaves, and at the end of the input the app catches up
(tick records), so its final state is the fold's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streamops import named_state
from streamops.exceptions import StreamopsError

#: event times and timers are epoch ms in this range (JSON numbers are exact below 2**53; Spark's
#: event-time timeout must be positive, and a timer's is its time - 1)
MIN_TS = 2
MAX_TS = 2**53 - 1
LATE = "late"
BAD_TIMESTAMP = "bad_timestamp"

Coords = tuple[str, int, int]
Partition = tuple[str, int]


class TimerError(StreamopsError):
    """A job's timers break the rule (``on_timer`` left its own timer, or a timer out of range).

    Operator action: fix the job's ``timers``/``on_timer`` (docs/writing-a-job.md, "Time")."""


@dataclass(frozen=True, slots=True)
class Timed:
    """An accepted event with its time and its partition's stream time before it."""

    where: Coords
    event: Any
    ts: int
    stream_time: int | None


def valid_ts(ts: Any) -> bool:
    return isinstance(ts, int) and not isinstance(ts, bool) and MIN_TS <= ts <= MAX_TS


def event_time(job: Any, event: Any, record_ts: int | None) -> int | None:
    """The event's time, or None when it is missing or out of range (``bad_timestamp``)."""
    ts = job.timestamp(event) if type(job).overrides("timestamp") else record_ts
    return ts if valid_ts(ts) else None


def is_late(item: Timed, grace_ms: int) -> bool:
    return item.stream_time is not None and item.ts < item.stream_time - grace_ms


def clock_after(item: Timed) -> int:
    return item.ts if item.stream_time is None else max(item.ts, item.stream_time)


def fire(job: Any, key: str, state: Any, upto: int | None) -> Any:
    """``state`` after its timers up to ``upto`` fired, oldest first (a timer ``on_timer`` adds
    that is already due fires too). The TTL of named state maps (``named_state``) is a timer too:
    it drops the entries whose time ran out before ``on_timer`` sees the state."""
    if upto is None:
        return state
    cls = type(job)
    ttl = cls.ttl_maps()
    ts = next_timer(job, key, state)
    while ts is not None and ts <= upto:
        if ttl:
            state = named_state.drop_expired(ttl, state, ts)
        user = _user_timer(job, key, state) if cls.overrides("on_timer") else None
        if user is not None and user <= ts:
            state = job.on_timer(key, state, user)
            after = _user_timer(job, key, state)
            if after is not None and after <= user:
                raise TimerError(f"{cls.__name__}.on_timer({key!r}, ts={user}) left a timer at or before it "
                                 f"({after}): it must clear the timers it fired")
        ts = next_timer(job, key, state)
    return state


def _user_timer(job: Any, key: str, state: Any) -> int | None:
    timers = list(job.timers(key, state))
    if not timers:
        return None
    ts = min(timers)
    if not valid_ts(ts):
        raise TimerError(f"{type(job).__name__}.timers({key!r}) holds {ts!r}: timers are epoch ms in "
                         f"[{MIN_TS}, {MAX_TS}]")
    return ts


def next_timer(job: Any, key: str, state: Any) -> int | None:
    """The state's next timer: its own (``timers``) or a TTL map's next expiry."""
    user = _user_timer(job, key, state)
    ttl = type(job).ttl_maps()
    if not ttl:
        return user
    expiry = named_state.next_expiry(ttl, state)
    return expiry if user is None else user if expiry is None else min(user, expiry)


def run_key(job: Any, key: str, state: Any, items: Iterable[Timed], watermark: int | None,
            rejected: dict[Coords, str]) -> Any:
    """One key's events (in input order) and then the watermark, applied to ``state`` (None: the
    initial state): what Spark does per key and batch, and ``check``'s fold once for all input.
    Late and screened events go to ``rejected``."""
    cls = type(job)
    grace = cls.grace_ms or 0
    screens, timers = cls.has_screen(), cls.has_timers()
    by_watermark = cls.fire_timers_by == "watermark"
    state = job.initial(key) if state is None else state
    if by_watermark:  # the job orders its events itself (``Job.fire_timers_by``): no timer between them
        ontime = []
        for item in items:
            if is_late(item, grace):
                rejected[item.where] = LATE
            else:
                ontime.append(item)
        if ontime:
            state = job.update(key, state, ontime)
        return fire(job, key, state, watermark)
    # the state's next timer, known between changes: most events fire nothing, so they skip timers()
    due = next_timer(job, key, state) if timers else None
    for item in items:
        if is_late(item, grace):
            rejected[item.where] = LATE
            continue
        clock = clock_after(item)
        if due is not None and due <= clock:
            state = fire(job, key, state, clock)
        reason = job.screen(key, state, item.event) if screens else None
        if reason is not None:
            rejected[item.where] = reason
            continue
        state = job.update(key, state, [item.event])
        if timers:
            due = next_timer(job, key, state)
            if due is not None and due <= clock:
                state = fire(job, key, state, clock)
                due = next_timer(job, key, state)
    return fire(job, key, state, watermark) if timers else state


def advance(clocks: dict[Partition, int], partition: Partition, ts: int) -> int | None:
    """Record an event at ``ts`` in ``partition``; its stream time before the event."""
    before = clocks.get(partition)
    if before is None or ts > before:
        clocks[partition] = ts
    return before


def watermark(clocks: Mapping[Partition, int | None], partitions: Iterable[Partition]) -> int | None:
    """The smallest stream time over ``partitions`` (None while one has shown no event)."""
    low: int | None = None
    for p in partitions:
        st = clocks.get(p)
        if st is None:
            return None
        low = st if low is None else min(low, st)
    return low


# -- idle inputs ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class StreamTimeStep:
    """Stream time after a batch, with idleness (``step_clocks``)."""

    clocks: dict[Partition, int]
    watermark: int | None
    #: released partitions and since when (epoch ms)
    idle: dict[Partition, int]
    #: each partition's end offset and when it last moved (epoch ms)
    moved: dict[Partition, tuple[int, int]]
    #: every raise a released partition's records were judged against: (offset, stream time)
    raises: dict[Partition, list[tuple[int, int]]]


def step_clocks(before: Mapping[Partition, int], after: Mapping[Partition, int], partitions: Iterable[Partition],
                ends: Mapping[Partition, int], *, idle: Mapping[Partition, int] | None = None,
                moved: Mapping[Partition, tuple[int, int]] | None = None,
                raises: Mapping[Partition, list[tuple[int, int]]] | None = None,
                timeouts_ms: Mapping[str, int] | None = None, now_ms: int = 0) -> StreamTimeStep:
    """The driver's step after a batch: ``before`` the stream times the batch's records were judged
    against, ``after`` with the batch's events folded in, ``ends`` each partition's end offset.

    Idleness (Flink's ``withIdleness``, Kafka Streams' ``max.task.idle.ms``): a partition of a topic
    in ``timeouts_ms`` whose end offset has not moved for that long is *released*: its stream time is
    raised to the watermark of the partitions still active (of those that have shown an event, when
    every partition is quiet), so it stops holding the watermark back,
    and every partition's stream time stays at or above the watermark (the rule that lets a timer
    fire by the watermark without changing any result). Once it shows records again it is active
    again; its records were judged against the raised stream time, which is kept as a *raise*
    (offset of its first new record, stream time): ``check``'s fold replays the raises, so it stays
    exact, but the result now depends on when records arrived, not only on the input."""
    parts = list(partitions)
    clocks = dict(after)
    idle_now = dict(idle or {})
    moved_now = dict(moved or {})
    raised = {p: list(r) for p, r in (raises or {}).items()}
    timeouts = timeouts_ms or {}
    for p in parts:
        end = ends.get(p)
        last = moved_now.get(p)
        if end is None or (p[0] not in timeouts and p not in idle_now) or (last is not None and last[0] == end):
            continue  # watched: the partitions of a topic with a timeout, and those still released
        if p in idle_now:  # showed records again: judged against the raised stream time
            del idle_now[p]
            if before.get(p) is not None and last is not None:
                raised.setdefault(p, []).append((last[0], int(before[p])))
        moved_now[p] = (end, now_ms)
    for p in release_due(moved_now, idle_now, timeouts, now_ms):
        if p in parts:
            idle_now[p] = now_ms
    active = [p for p in parts if p not in idle_now]
    # the partitions still active set the watermark; when every one is quiet, those that have shown
    # an event (so the last timers of a whole input that stopped fire too)
    shown = [clocks[p] for p in parts if clocks.get(p) is not None]
    low = watermark(clocks, active) if active else (min(shown) if shown else None)
    if low is not None:
        for p in idle_now:
            st = clocks.get(p)
            clocks[p] = low if st is None else max(st, low)
    return StreamTimeStep(clocks, watermark(clocks, parts), idle_now, moved_now, raised)


def apply_raises(clocks: dict[Partition, int], partition: Partition, offset: int,
                 raises: Mapping[Partition, list[tuple[int, int]]], done: dict[Partition, int]) -> None:
    """Before ``partition``'s record at ``offset`` (in offset order): its stream time raised by every
    raise at or below that offset not yet applied (``done`` counts them per partition)."""
    todo = raises.get(partition)
    if not todo:
        return
    i = done.get(partition, 0)
    while i < len(todo) and todo[i][0] <= offset:
        st = clocks.get(partition)
        clocks[partition] = todo[i][1] if st is None else max(st, todo[i][1])
        i += 1
    done[partition] = i


# -- for people ---------------------------------------------------------------------------------
def span(ms: int) -> str:
    """A duration the way an operator reads it: 850ms, 42s, 4m12s, 3h05m, 2d03h."""
    s = ms // 1000
    if ms < 1000:
        return f"{ms}ms"
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def utc(ms: int) -> str:
    """Epoch ms as an ISO time in UTC (to the millisecond only when it has one)."""
    from datetime import UTC, datetime

    t = datetime.fromtimestamp(ms / 1000, UTC)
    return t.isoformat(timespec="milliseconds" if ms % 1000 else "seconds").replace("+00:00", "Z")


def release_due(moved: Mapping[Partition, tuple[int, int]], idle: Mapping[Partition, int],
                timeouts_ms: Mapping[str, int], now_ms: int) -> list[Partition]:
    """Partitions ``step_clocks`` would release now: watched, not released, quiet for their timeout.
    The driver wakes its query for them when no batch runs (nothing else would)."""
    return sorted(p for p, (_end, ms) in moved.items()
                  if p not in idle and p[0] in timeouts_ms and now_ms - ms >= timeouts_ms[p[0]])
