"""``streamops app lint APP``: is a job declaration sound, before any cluster or broker sees it?

On a sample (the job's ``generate``, or a JSON-lines file): the declaration is complete; every
record parses to an event or a rejection; every state survives its serde; ``update`` gives the
same state whether a key's events come in one call or split over two batches, and ``expire`` as
often as Spark may call it changes nothing (the two properties ``check`` relies on); a job whose
result depends on order gets each key's records from one partition (Spark keeps order only
within a partition, so ``check``'s fold and the app would disagree otherwise); then, in a
local Spark, the job's own query over the sample in several micro-batches equals the plain-Python
fold (output, changelog, DLQ and state store), and a checkpoint seeded from the changelog's states
reads back the same states (what rebuild-state and compaction do). A sample that makes more than
``LATE_SHARE`` of its records late gets a warning while ``ok`` stays true (``streamops.state.sample``).
"""

from __future__ import annotations

import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamops.job import Job, JobDeclarationError, JsonSerde, Record, Reject, key_or_reject, validate_job
from streamops.state.lint_spark import SparkCheckFailed, spark_check
from streamops.state.oracle import Expected, events_by_key, fold_input, fold_key, normalized
from streamops.state.sample import LATE_SHARE, lateness, sample_records

__all__ = ["LATE_SHARE", "LintCheck", "LintReport", "LintWarning", "lint", "render", "sample_records"]

SAMPLES = 3
_JSON = JsonSerde()


@dataclass
class LintCheck:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class LintWarning:
    """Something about the sample the report shows while ``ok`` stays true (``counts``: its numbers)."""

    name: str
    detail: str
    counts: dict[str, Any] = field(default_factory=dict)


@dataclass
class LintReport:
    job: str
    records: int
    checks: list[LintCheck] = field(default_factory=list)
    topics: dict[str, int] = field(default_factory=dict)  # sample records per input topic
    warnings: list[LintWarning] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "ok": self.ok, "records": self.records, "topics": self.topics,
                "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
                "warnings": [{"name": w.name, "detail": w.detail, **w.counts} for w in self.warnings]}


def render(report: LintReport) -> str:
    per_topic = ": " + ", ".join(f"{t} {n}" for t, n in report.topics.items()) if len(report.topics) > 1 else ""
    warned = f", {len(report.warnings)} warning{'s' if len(report.warnings) > 1 else ''}" if report.warnings else ""
    head = f"lint {report.job}: {'OK' if report.ok else 'FAILED'}{warned} ({report.records} sample records{per_topic})"
    lines = [head]
    for c in report.checks:
        lines.append(f"  {'ok  ' if c.ok else 'FAIL'} {c.name}" + (f": {c.detail}" if c.detail else ""))
    lines += [f"  WARN {w.name}: {w.detail}" for w in report.warnings]
    return "\n".join(lines)


def lint(job_cls: type, records: list[Record], *, spark: Any = None, state_partitions: int = 2,
         progress: Callable[[str], None] = lambda _m: None, partitions: Sequence[tuple[str, int]] | None = None,
         idle_timeouts: Mapping[str, str] | None = None) -> LintReport:
    """Run the checks (module docstring); ``spark=None`` skips the Spark ones (pure checks only).
    A job with stream time also gets the sample's watermark over ``partitions`` (every partition of
    its inputs) and what ``idle_timeouts`` change (``sample_watermark``; never a failure)."""
    name = getattr(job_cls, "__name__", str(job_cls))
    report = LintReport(name, len(records), topics=dict(Counter(r.topic for r in records)))
    try:
        validate_job(job_cls)
    except JobDeclarationError as exc:
        report.checks.append(LintCheck("declaration", False, str(exc)))
        return report
    report.checks.append(LintCheck("declaration", True, "aggregate" if job_cls.is_aggregate() else "update"))
    checks: list[tuple[str, Callable[[], str]]] = [
        ("parse", lambda: _parse(job_cls, records)),
        ("serde round trip", lambda: _serde(job_cls, records)),
        ("batch split", lambda: _split(job_cls, records)),
        (ONE_PARTITION, lambda: _one_partition(job_cls, records)),
    ]
    if spark is not None:
        checks.append(("spark equals the python fold", lambda: spark_check(job_cls, records, spark, state_partitions,
                                                                           progress)))
    if job_cls.has_time() and partitions:
        from streamops.state.sample_watermark import sample_watermark

        checks.append(("watermark", lambda: sample_watermark(job_cls, records, partitions, idle_timeouts).describe()))
    for check, run in checks:
        progress(f"  {check} ...")
        try:
            report.checks.append(LintCheck(check, True, run()))
        except (Failed, SparkCheckFailed) as exc:
            report.checks.append(LintCheck(check, False, str(exc)))
        except Exception as exc:  # noqa: BLE001 - the job's own code raised: that is the finding
            where = traceback.extract_tb(exc.__traceback__)[-1]
            report.checks.append(LintCheck(check, False, f"{type(exc).__name__}: {exc} "
                                                         f"({Path(where.filename).name}:{where.lineno})"))
    report.warnings += _late_warning(job_cls, records)
    return report


#: the name of the warning that the sample makes more than ``LATE_SHARE`` of its records late
LATE_RECORDS = "late records"


def _late_warning(job_cls: type[Job], records: list[Record]) -> list[LintWarning]:
    """A warning when the sample makes many records late (none when the job raises: a check says so)."""
    try:
        late = lateness(job_cls, records)
    except Exception:  # noqa: BLE001 - the job's own code raised: a check already reports it
        return []
    if not late.warns():
        return []
    return [LintWarning(LATE_RECORDS, late.detail(), {"late": late.late, "records": late.records,
                                                      "share": round(late.share, 4), "limit": LATE_SHARE})]


class Failed(Exception):
    """A check found what it looks for (the job is not sound)."""



def _parse(job_cls: type[Job], records: list[Record]) -> str:
    job = job_cls()
    events = rejected = 0
    for r in records:
        parsed = job.parse(r)
        if isinstance(parsed, Reject):
            if not isinstance(parsed.reason, str) or not parsed.reason:
                raise Failed(f"record {r.partition}/{r.offset}: a Reject needs a non-empty reason")
            rejected += 1
        else:
            key = key_or_reject(job, parsed)
            if isinstance(key, Reject):  # not UTF-8 text: the platform rejects it (BAD_KEY)
                rejected += 1
                continue
            if not isinstance(key, str):
                raise Failed(f"key() must return a str, got {type(key).__name__} for record {r.partition}/{r.offset}")
            events += 1
    if not events:
        raise Failed("no record of the sample parsed to an event")
    return f"{events} events, {rejected} rejected"


def _serde(job_cls: type[Job], records: list[Record]) -> str:
    job, serde = job_cls(), job_cls.state_serde
    folded = _fold_raw(job_cls, records)
    bad = []
    for k, state in folded.items():
        if job_cls.state_values is not None:
            from streamops.named_state import StateShapeError, check_shape

            try:
                check_shape(job_cls.state_values, k, state)
            except StateShapeError as exc:
                raise Failed(str(exc)) from None
        data = serde.dumps(state)
        if not isinstance(data, bytes):
            raise Failed(f"state_serde.dumps must return bytes, got {type(data).__name__}")
        if serde.loads(data) != state:
            bad.append(k)
        for okey, value in job.emit(k, state).items():
            if not isinstance(okey, str):
                raise Failed(f"emit() keys must be str, got {okey!r}")
            _JSON.dumps(value)  # raises if the output is not JSON
    if bad:
        k = bad[0]
        raise Failed(f"{len(bad)} of {len(folded)} states change through state_serde (a set, a tuple, a non-str "
                      f"dict key?): e.g. {k!r}: {folded[k]!r} -> {serde.loads(serde.dumps(folded[k]))!r}")
    return f"{len(folded)} states"


def _fold_raw(job_cls: type[Job], records: list[Record]) -> dict[str, Any]:
    """Final states before expire and before the serde (what ``update`` itself returns)."""
    if job_cls.is_aggregate():
        return fold_input(job_cls, records).states
    if job_cls.has_time():
        from streamops import stream_time
        from streamops.state.oracle import timed_items

        job = job_cls()
        items, wm = timed_items(job, records, Expected(), None)
        return {k: stream_time.run_key(job, k, None, evs, wm, {}) for k, evs in items.items()}
    job, screens = job_cls(), job_cls.has_screen()
    return {k: fold_key(job, k, evs, screens=screens) for k, evs in events_by_key(job, records).items()}


def _fold_split(job: Job, key: str, events: list, screens: bool, split: int, expire: bool = False) -> Any:
    """The key's events as two batches, expiring between them if ``expire`` (as Spark may)."""
    state = fold_key(job, key, events[:split], screens=screens)
    if expire:
        kept = job.expire(key, state)
        state = job.initial(key) if kept is None else kept
    return fold_key(job, key, events[split:], screens=screens, state=state)


def _split(job_cls: type[Job], records: list[Record]) -> str:
    if job_cls.is_aggregate():
        return "native aggregation: Spark merges the fields"
    if job_cls.has_time():
        return _split_timed(job_cls, records)
    job = job_cls()
    events = events_by_key(job, records)
    screens, expires = job_cls.has_screen(), job_cls.has_expire()
    for k, evs in events.items():
        whole = fold_key(job, k, evs, screens=screens)
        for split in {len(evs) // 3, len(evs) // 2, len(evs) - 1} - {0}:
            two = _fold_split(job, k, evs, screens, split)
            if two != whole:
                raise Failed(f"key {k!r}: update over {len(evs)} events in one call differs from the same events "
                              f"in two calls split at {split}: update must not depend on how Spark cuts batches; "
                              f"{_differs(whole, two, 'one call', 'two calls')}")
            if expires:
                end = normalized(job_cls, job.expire(k, whole))
                cut = normalized(job_cls, job.expire(k, _fold_split(job, k, evs, screens, split, expire=True)))
                if end != cut:
                    raise Failed(f"key {k!r}: expiring after event {split} changed the final state: expire may drop "
                                  f"only what no later event changes (screen must reject events for it); "
                                  f"{_differs(end, cut, 'no expire between', 'expired after event ' + str(split))}")
    return f"{len(events)} keys, each split in up to three places"


def _split_timed(job_cls: type[Job], records: list[Record]) -> str:
    """A job with stream time, cut as Spark may cut it: a key's events in two batches, the first
    ending with a watermark no later than the stream time of any event after it (Spark's lags),
    expire and emit between them. The final state and everything emitted must be the same as in
    one batch: what ``streamops.stream_time`` guarantees when ``on_timer`` and ``expire`` keep
    their contracts (a closed window never changes; expire drops only what is closed)."""
    from streamops import stream_time
    from streamops.state.oracle import Expected, timed_items

    job = job_cls()
    items, wm = timed_items(job, records, Expected(), None)

    def emitted(key: str, states: list) -> dict:
        out: dict = {}
        for s in states:
            out.update(job.emit(key, s))
        return out

    for k, evs in items.items():
        whole = stream_time.run_key(job, k, None, evs, wm, {})
        for split in {len(evs) // 3, len(evs) // 2, len(evs) - 1} - {0}:
            later = [stream_time.clock_after(i) for i in evs[split:]]
            mid = min([*later, wm]) if wm is not None else None
            first = stream_time.run_key(job, k, None, evs[:split], mid, {})
            kept = job.expire(k, first) if job_cls.has_expire() else first
            second = stream_time.run_key(job, k, kept, evs[split:], wm, {})
            one_out, two_out = emitted(k, [whole]), emitted(k, [first, second])
            if two_out != one_out:
                raise Failed(f"key {k!r}: its output differs when its {len(evs)} events come in two batches split at "
                              f"{split} (timers fired by the watermark in between): a closed window must not change; "
                              f"{_differs(one_out, two_out, 'one batch', 'two batches')}")
            end = normalized(job_cls, job.expire(k, whole) if job_cls.has_expire() else whole)
            cut = normalized(job_cls, job.expire(k, second) if job_cls.has_expire() else second)
            if end != cut:
                raise Failed(f"key {k!r}: its state differs when its events come in two batches split at {split}: "
                              f"expire may drop only what no later event changes, on_timer must clear what it fired; "
                              f"{_differs(end, cut, 'one batch', 'two batches')}")
    return f"{len(items)} keys, each cut in up to three places with the watermark moving in between"


#: how much of one value a lint failure shows
SHOWN_CHARS = 240
_ABSENT = object()


def _short(value: Any) -> str:
    text = "(absent)" if value is _ABSENT else repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def _differs(a: Any, b: Any, how_a: str, how_b: str) -> str:
    """The values that differ, so that a failure can be understood without rerunning it: for two
    dicts (an output, a state's fields) the first entries that differ, otherwise both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [k for k in sorted({*a, *b}, key=repr) if a.get(k, _ABSENT) != b.get(k, _ABSENT)]
        more = f" (and {len(keys) - SAMPLES} more)" if len(keys) > SAMPLES else ""
        return "; ".join(f"{k!r}: {how_a} {_short(a.get(k, _ABSENT))}, {how_b} {_short(b.get(k, _ABSENT))}"
                         for k in keys[:SAMPLES]) + more
    return f"{how_a} {_short(a)}, {how_b} {_short(b)}"


#: the name of the check that one key's records come from one partition
ONE_PARTITION = "one key, one partition"


def key_partitions(job_cls: type[Job], records: Iterable[Record]) -> dict[str, set[tuple[str, int]]]:
    """Each key's (topic, partition) pairs, over the records ``parse`` accepts."""
    job = job_cls()
    where: dict[str, set[tuple[str, int]]] = {}
    for r in records:
        parsed = job.parse(r)
        key = parsed if isinstance(parsed, Reject) else key_or_reject(job, parsed)
        if not isinstance(key, Reject):
            where.setdefault(key, set()).add((r.topic, r.partition))
    return where


def order_dependence(job_cls: type[Job], records: list[Record]) -> str | None:
    """Why the job's result depends on the order of a key's events (None: it does not, as far as
    the sample shows): ``screen`` judges each event by the state before it; otherwise ``update``
    over a key's events reversed gives another state."""
    if job_cls.is_aggregate():
        return None
    if job_cls.has_time():
        return "it has stream time: lateness and timers follow each partition's events in offset order"
    if job_cls.has_screen():
        return "it declares screen(), which judges each event by the state before it"
    job = job_cls()
    for k, evs in events_by_key(job, records).items():
        events = [ev for _w, ev in evs]
        if len(events) > 1 and normalized(job_cls, job.update(k, job.initial(k), events)) != \
                normalized(job_cls, job.update(k, job.initial(k), events[::-1])):
            return f"update() gives key {k!r} another state when its events come in another order"
    return None


def _one_partition(job_cls: type[Job], records: list[Record]) -> str:
    if job_cls.has_time() and job_cls.fire_timers_by == "watermark":
        return ("the job orders each key's events by event time across partitions and topics "
                "(fire_timers_by = 'watermark'): its keys may have records in several partitions")
    where = key_partitions(job_cls, records)
    split = {k: v for k, v in where.items() if len(v) > 1}
    need = "a job whose result depends on order needs that: Spark keeps a key's order only within a partition"
    if not split:
        return f"each of {len(where)} keys has its records in one partition ({need})"
    k = min(split)
    found = (f"{len(split)} of {len(where)} keys have records in several partitions, e.g. {k!r} in "
             f"{', '.join(f'{t}/{p}' for t, p in sorted(split[k]))}")
    why = order_dependence(job_cls, records)
    if why is not None:
        raise Failed(f"{found}, and the job depends on order ({why}); {need}. Key the input by the job's key "
                      f"(Kafka's default partitioner keeps one key in one partition; `streamops produce` and "
                      f"--from-file do that)")
    return f"{found}: fine for this job, its result does not depend on order"
