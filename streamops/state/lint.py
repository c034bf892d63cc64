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

import shutil
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamops.job import Job, JobDeclarationError, JsonSerde, Record, Reject, key_or_reject, validate_job
from streamops.named_state import decode_changelog
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
         progress: Callable[[str], None] = lambda _m: None) -> LintReport:
    """Run the checks (module docstring); ``spark=None`` skips the Spark ones (pure checks only)."""
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
        checks.append(("spark equals the python fold", lambda: _spark(job_cls, records, spark, state_partitions,
                                                                       progress)))
    for check, run in checks:
        progress(f"  {check} ...")
        try:
            report.checks.append(LintCheck(check, True, run()))
        except _Failed as exc:
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


class _Failed(Exception):
    pass


def _parse(job_cls: type[Job], records: list[Record]) -> str:
    job = job_cls()
    events = rejected = 0
    for r in records:
        parsed = job.parse(r)
        if isinstance(parsed, Reject):
            if not isinstance(parsed.reason, str) or not parsed.reason:
                raise _Failed(f"record {r.partition}/{r.offset}: a Reject needs a non-empty reason")
            rejected += 1
        else:
            key = key_or_reject(job, parsed)
            if isinstance(key, Reject):  # not UTF-8 text: the platform rejects it (BAD_KEY)
                rejected += 1
                continue
            if not isinstance(key, str):
                raise _Failed(f"key() must return a str, got {type(key).__name__} for record {r.partition}/{r.offset}")
            events += 1
    if not events:
        raise _Failed("no record of the sample parsed to an event")
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
                raise _Failed(str(exc)) from None
        data = serde.dumps(state)
        if not isinstance(data, bytes):
            raise _Failed(f"state_serde.dumps must return bytes, got {type(data).__name__}")
        if serde.loads(data) != state:
            bad.append(k)
        for okey, value in job.emit(k, state).items():
            if not isinstance(okey, str):
                raise _Failed(f"emit() keys must be str, got {okey!r}")
            _JSON.dumps(value)  # raises if the output is not JSON
    if bad:
        k = bad[0]
        raise _Failed(f"{len(bad)} of {len(folded)} states change through state_serde (a set, a tuple, a non-str "
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
                raise _Failed(f"key {k!r}: update over {len(evs)} events in one call differs from the same events "
                              f"in two calls split at {split}: update must not depend on how Spark cuts batches; "
                              f"{_differs(whole, two, 'one call', 'two calls')}")
            if expires:
                end = normalized(job_cls, job.expire(k, whole))
                cut = normalized(job_cls, job.expire(k, _fold_split(job, k, evs, screens, split, expire=True)))
                if end != cut:
                    raise _Failed(f"key {k!r}: expiring after event {split} changed the final state: expire may drop "
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
                raise _Failed(f"key {k!r}: its output differs when its {len(evs)} events come in two batches split at "
                              f"{split} (timers fired by the watermark in between): a closed window must not change; "
                              f"{_differs(one_out, two_out, 'one batch', 'two batches')}")
            end = normalized(job_cls, job.expire(k, whole) if job_cls.has_expire() else whole)
            cut = normalized(job_cls, job.expire(k, second) if job_cls.has_expire() else second)
            if end != cut:
                raise _Failed(f"key {k!r}: its state differs when its events come in two batches split at {split}: "
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
        raise _Failed(f"{found}, and the job depends on order ({why}); {need}. Key the input by the job's key "
                      f"(Kafka's default partitioner keeps one key in one partition; `streamops produce` and "
                      f"--from-file do that)")
    return f"{found}: fine for this job, its result does not depend on order"


def _spark(job_cls: type[Job], records: list[Record], spark: Any, state_partitions: int,
           progress: Callable[[str], None]) -> str:
    from streamops.spark.query.plan import JobQuery, Topics
    from streamops.state import seed
    from streamops.state.store import read_states

    expected = fold_input(job_cls, records)
    query = JobQuery(job_cls, state_partitions=state_partitions, topics=Topics("out", "changelog", "dlq", TICKS))
    root = Path(tempfile.mkdtemp(prefix="streamops-lint-"))
    try:
        got, batches = _run_stream(spark, query, records, root)
        diffs = _compare(job_cls, expected, got)
        states = read_states(spark, job_cls, str(root / "checkpoint"), batches - 1)
        if states != expected.states:
            diffs.append(_diff("state store", expected.states, states))
        if diffs:
            raise _Failed("; ".join(diffs))
        progress("  seeding a checkpoint from the states ...")
        seed.write_seed_input(query.seed_table(expected.states), root / "seed-input", seed.seed_columns(query))
        seed.seed_checkpoint(spark, query, root / "seed-input", root / "seeded", state_partitions=state_partitions,
                             timeout=300)
        seeded = read_states(spark, job_cls, str(root / "seeded"), 0)
        if seeded != expected.states:
            raise _Failed("a checkpoint seeded from the states " + _diff("reads back", expected.states, seeded))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return (f"{batches} micro-batches: {len(expected.states)} states, {len(expected.output)} output keys, "
            f"{len(expected.rejected)} DLQ records equal; seeded checkpoint reads back equal")


#: a job with stream time: the file stream's stand-in for the app's ticks topic
TICKS = "ticks"


def write_stream_input(records: list[Record], folder: Path, parts: int) -> list[Path]:
    """The sample as ``parts`` parquet files of Kafka-shaped rows, one micro-batch each, in order.

    Spark's file source takes new files oldest first (by modification time, in ms), and files
    written within the same few ms tie, so their order was the listing's: a later part read first
    made a screening job (page_stats' late views) differ from the fold now and then. Each part's
    modification time is set one second after the previous one's.
    """
    import datetime as dt
    import os
    import time

    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    base = time.time() - parts
    paths = []
    default_ts = int(dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp() * 1_000_000)
    for i in range(parts):
        chunk = records[i * len(records) // parts:(i + 1) * len(records) // parts]
        path = folder / f"part-{i}.parquet"
        pq.write_table(pa.table({
            "key": pa.array([r.key for r in chunk], pa.binary()), "value": pa.array([r.value for r in chunk], pa.binary()),
            "topic": [r.topic for r in chunk], "partition": pa.array([r.partition for r in chunk], pa.int32()),
            "offset": pa.array([r.offset for r in chunk], pa.int64()),
            "timestamp": pa.array([default_ts if r.timestamp_ms is None else r.timestamp_ms * 1000 for r in chunk],
                                  pa.timestamp("us", tz="UTC")),
        }), path)
        os.utime(path, (base + i, base + i))
        paths.append(path)
    return paths


def _run_stream(spark: Any, query: Any, records: list[Record], root: Path, parts: int = 3) -> tuple[dict, int]:
    """The job's query over the sample as a file stream of Kafka-shaped rows, in ``parts`` batches
    (a job with stream time: and the batches its ticks start, each a file of one tick record)."""
    parts = len(write_stream_input(records, root / "input", parts))
    got: dict[str, dict] = {"out": {}, "changelog": {}, "dlq": {}}
    partitions = sorted({(r.topic, r.partition) for r in records})
    ticks, last = [0], [-1]

    def sink(df, batch_id: int) -> None:
        from streamops.spark.query.records import dlq_entry

        last[0] = max(last[0], batch_id)
        table = df.toArrow()
        if query.timed and query.advance_clocks(table, batch_id, root / "checkpoint", partitions).ticks:
            _write_tick(root / "input", ticks[0])
            ticks[0] += 1
        for r in query.records(table, batch_id):
            if r.topic == "dlq":
                where, reason = dlq_entry(list(r.headers))
                got["dlq"][where] = reason
            else:
                got[r.topic][r.key.decode()] = r.value

    from streamops.spark.session import ROCKSDB_PROVIDER

    ddl = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
    spark.conf.set("spark.sql.shuffle.partitions", str(query.state_partitions))
    provider = "spark.sql.streaming.stateStore.providerClass"
    saved = spark.conf.get(provider, None)
    if query.named:  # transformWithState runs on RocksDB only (the apps' store)
        spark.conf.set(provider, ROCKSDB_PROVIDER)
    try:
        raw = spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).parquet(str(root / "input"))
        stream = (query.build(raw, checkpoint=root / "checkpoint").writeStream.outputMode("update")
                  .foreachBatch(sink).option("checkpointLocation", str(root / "checkpoint")).start())
        try:
            stream.processAllAvailable()
        finally:
            stream.stop()
    finally:
        if saved is None:
            spark.conf.unset(provider)
        else:
            spark.conf.set(provider, saved)
    return got, last[0] + 1


def _write_tick(folder: Path, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"key": pa.array([None], pa.binary()), "value": pa.array([b""], pa.binary()),
                             "topic": [TICKS], "partition": pa.array([0], pa.int32()),
                             "offset": pa.array([n], pa.int64()),
                             "timestamp": pa.array([0], pa.timestamp("us", tz="UTC"))}), folder / f"tick-{n}.parquet")


def _compare(job_cls: type[Job], expected: Expected, got: dict) -> list[str]:
    diffs = []
    output = {k: _JSON.loads(v) for k, v in got["out"].items()}
    if output != expected.output:
        diffs.append(_diff("output", expected.output, output))
    changelog = decode_changelog(job_cls, got["changelog"])
    if changelog != expected.states:
        diffs.append(_diff("changelog", expected.states, changelog))
    if got["dlq"] != expected.rejected:
        diffs.append(_diff("dlq", expected.rejected, got["dlq"]))
    return diffs


def _diff(view: str, expected: dict, actual: dict) -> str:
    missing = [k for k in expected if k not in actual]
    extra = [k for k in actual if k not in expected]
    different = [k for k in expected if k in actual and expected[k] != actual[k]]
    sample = ""
    if different:
        k = different[0]
        sample = f"; e.g. {k!r}: python {expected[k]!r} spark {actual[k]!r}"
    return (f"{view} differs from the python fold: {len(missing)} missing, {len(extra)} extra, "
            f"{len(different)} different{sample}")[:1500]
