"""The plain-Python fold of a declared job: what its state, output and DLQ must hold.

The same ``parse``, ``key``, ``update`` (or the aggregation's fields), ``screen``, ``emit`` and
``expire`` the Spark query runs, folded over the input in input order, with no Spark. ``check``
compares the app with it; ``app lint`` compares a Spark run on a sample with it.

Why the output is ``emit`` of the state *before* ``expire``: Spark emits a key's output after
each batch's update and expires after that, so the latest output of everything a key ever held
(a closed window included) is its final value. ``expire`` may only drop what no later event can
change (``screen`` rejects events of a closed window), so expiring once at the end leaves the
same state as expiring after every batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamops import named_state, stream_time
from streamops.job import Job, JsonSerde, Record, Reject, fold_fields, key_or_reject
from streamops.stream_time import Partition, Timed

_JSON = JsonSerde()

Coords = tuple[str, int, int]


@dataclass
class Expected:
    """What a job must have produced from some input."""

    states: dict[str, Any] = field(default_factory=dict)  # per key, after expire (deleted: absent)
    output: dict[str, Any] = field(default_factory=dict)  # latest value per output key, as JSON reads it
    rejected: dict[Coords, str] = field(default_factory=dict)  # input record -> DLQ reason
    records: int = 0
    #: keys whose accepted events came from more than one (topic, partition): their order in the
    #: app (per batch) and in this fold (all at once) may differ
    split_keys: dict[str, set[tuple[str, int]]] = field(default_factory=dict)
    #: each key's first (topic, partition), to find the split ones
    _first: dict[str, tuple[str, int]] = field(default_factory=dict, repr=False, compare=False)


def normalized(job_cls: type[Job], state: Any) -> Any:
    """A state as it reads back from the changelog (through the serde)."""
    serde = job_cls.state_serde
    return serde.loads(serde.dumps(state))


#: idle partitions' raised stream times: (offset, stream time) in offset order, per partition
Raises = Mapping[Partition, list[tuple[int, int]]]

#: ``fold_input``'s default watermark: the one the input gives (``stream_time.watermark``)
DERIVED = "derived"


def fold_input(job_cls: type[Job], records: Iterable[Record], partitions: Iterable[Partition] | None = None,
               watermark: int | None | str = DERIVED, raises: Raises | None = None) -> Expected:
    """Jobs with stream time: ``partitions`` are every input partition (the watermark waits for
    each; default: those the records come from); ``watermark`` overrides the one they give (the
    app's as of a batch: Spark learns it a batch or two late, ``check`` compares with that batch);
    ``raises``: the app's idle partitions' raised stream times (``stream_time.step_clocks``)."""
    job = job_cls()
    out = Expected()
    if job_cls.has_time():
        finals = fold_timed(job, records, out, partitions, watermark, raises)
    elif job_cls.is_aggregate():
        fields = job_cls.aggregate or {}
        acc: dict[str, dict] = {}
        for _where, k, event in _parsed(job, records, out):
            acc[k] = fold_fields(fields, acc.get(k), [job.contribute(event)])
        finals = acc
    else:
        screens = job_cls.has_screen()
        finals = {k: fold_key(job, k, evs, screens=screens, rejected=out.rejected)
                  for k, evs in events_by_key(job, records, out).items()}
    for k, state in finals.items():
        for okey, value in job.emit(k, state).items():
            out.output[okey] = _JSON.loads(_JSON.dumps(value))
        kept = job.expire(k, state) if job_cls.has_expire() else state
        if kept is not None and job_cls.state_values is not None and named_state.is_empty(job_cls.state_values, kept):
            kept = None  # named state: a key whose every part is empty has nothing stored
        if kept is not None:
            out.states[k] = normalized(job_cls, kept)
    return out


def fold_timed(job: Job, records: Iterable[Record], out: Expected, partitions: Iterable[Partition] | None,
               watermark: int | None | str = DERIVED, raises: Raises | None = None) -> dict[str, Any]:
    """A job with stream time: each key's events (``timed_items``) then the final watermark, through
    ``stream_time.run_key``."""
    items, wm = timed_items(job, records, out, partitions, watermark, raises)
    return {k: stream_time.run_key(job, k, None, evs, wm, out.rejected) for k, evs in items.items()}


def timed_items(job: Job, records: Iterable[Record], out: Expected, partitions: Iterable[Partition] | None,
                watermark: int | None | str = DERIVED, raises: Raises | None = None
                ) -> tuple[dict[str, list[Timed]], int | None]:
    """Each key's events with their times (sorted as ``events_by_key``): each partition's records in
    offset order give its stream time at each event (raised where ``raises`` say); and the watermark
    after all of them."""
    ordered = sorted(records, key=lambda r: (r.topic, r.partition, r.offset))
    clocks: dict[Partition, int] = {}
    items: dict[str, list[Timed]] = {}
    raises = raises or {}
    applied: dict[Partition, int] = {}
    for r in ordered:
        out.records += 1
        if raises:
            stream_time.apply_raises(clocks, (r.topic, r.partition), r.offset, raises, applied)
        parsed = job.parse(r)
        if isinstance(parsed, Reject):
            out.rejected[(r.topic, r.partition, r.offset)] = parsed.reason
            continue
        ts = stream_time.event_time(job, parsed, r.timestamp_ms)
        if ts is None:
            out.rejected[(r.topic, r.partition, r.offset)] = stream_time.BAD_TIMESTAMP
            continue
        k = key_or_reject(job, parsed)
        if isinstance(k, Reject):
            out.rejected[(r.topic, r.partition, r.offset)] = k.reason
            continue
        _note_partition(out, k, r)
        before = stream_time.advance(clocks, (r.topic, r.partition), ts)
        items.setdefault(k, []).append(Timed((r.topic, r.partition, r.offset), parsed, ts, before))
    for p in raises:  # raises past the last record (a partition released and still quiet)
        stream_time.apply_raises(clocks, p, 2**63, raises, applied)
    wm = stream_time.watermark(clocks, set(clocks) if partitions is None else partitions) \
        if watermark == DERIVED else watermark
    return items, wm


def _note_partition(out: Expected, key: str, r: Record) -> None:
    tp = out._first.get(key)
    if tp is None:
        out._first[key] = (r.topic, r.partition)
    elif tp != (r.topic, r.partition):
        out.split_keys.setdefault(key, {tp}).add((r.topic, r.partition))


def events_by_key(job: Job, records: Iterable[Record], out: Expected | None = None
                  ) -> dict[str, list[tuple[Coords, Any]]]:
    """Each key's accepted events with where they came from, sorted by (topic, partition, offset):
    the order Spark folds them in when they come from one partition (Spark sorts each micro-batch's
    events so; events of several partitions may interleave differently across batches)."""
    events: dict[str, list[tuple[Coords, Any]]] = {}
    for where, k, event in _parsed(job, records, Expected() if out is None else out):
        events.setdefault(k, []).append((where, event))
    for evs in events.values():
        evs.sort(key=lambda ce: ce[0])
    return events


def fold_key(job: Job, key: str, events: list[tuple[Coords, Any]], *, screens: bool, state: Any = None,
             rejected: dict[Coords, str] | None = None) -> Any:
    """One key's events folded into ``state`` (default: the initial state): through ``screen`` one
    at a time (its rejections into ``rejected``), else in one ``update`` call."""
    state = job.initial(key) if state is None else state
    if screens:
        for where, ev in events:
            reason = job.screen(key, state, ev)
            if reason is None:
                state = job.update(key, state, [ev])
            elif rejected is not None:
                rejected[where] = reason
    elif events:
        state = job.update(key, state, [ev for _w, ev in events])
    return state


def _parsed(job: Job, records: Iterable[Record], out: Expected) -> Iterator[tuple[Coords, str, Any]]:
    """(where, key, event) of each record ``parse`` accepts; rejections, the count and keys seen in
    several partitions go to ``out``."""
    for r in records:
        out.records += 1
        parsed = job.parse(r)
        k = parsed if isinstance(parsed, Reject) else key_or_reject(job, parsed)
        if isinstance(k, Reject):
            out.rejected[(r.topic, r.partition, r.offset)] = k.reason
        else:
            _note_partition(out, k, r)
            yield (r.topic, r.partition, r.offset), k, parsed


def record_of(message) -> Record:
    """A confluent-kafka message as the job's ``Record``."""
    kind, ts = message.timestamp()
    return Record(message.topic(), message.partition(), message.offset(), message.key(), message.value(),
                  ts if kind else None)
