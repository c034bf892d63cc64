"""The truth oracle: fold the input in plain Python and compare with what the app produced.

Three views are compared with the expected per-key state, all as of the checkpoint's last
committed batch: Spark's state store (the ``statestore`` data source), the changelog topic's
latest value per key and the output topic's latest value per key. The DLQ must hold each
invalid input record exactly once, with the right reason.

The changelog, output and DLQ are read past open transactions (``read_topic``'s
``past_open_transactions``): one that hangs is named (``OpenTransactionError``), where stopping at
the last stable offset would report keys missing that are there.

Everything app-specific comes from the app's declared job (``streamops.job``): the expected
state, output and DLQ are the job's own ``update``/``emit``/``expire`` folded in plain Python
(``state.oracle``), the state store is read through its serde (``state.store``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamops.checkpoints import layout
from streamops.exceptions import StreamopsError
from streamops.host import jars
from streamops.settings import Settings
from streamops.spark import pydaemon
from streamops.spark.local_log import quiet_console_conf
from streamops.spec import AppSpec, load_job

if TYPE_CHECKING:
    from streamops.kafka.config import KafkaConfig

SAMPLES = 5


@dataclass
class Diff:
    """How one view differs from the expected state."""

    view: str
    expected: int
    actual: int
    missing: list = field(default_factory=list)  # keys expected but absent
    extra: list = field(default_factory=list)  # keys present but not expected
    different: list = field(default_factory=list)  # (key, expected, actual)
    duplicates: int = 0
    ahead: int = 0  # DLQ entries of input records past the checkpoint (not compared)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.different or self.duplicates)

    def summary(self) -> dict[str, Any]:
        return {
            "view": self.view, "ok": self.ok, "expected": self.expected, "actual": self.actual,
            "missing": len(self.missing), "extra": len(self.extra), "different": len(self.different),
            "duplicates": self.duplicates, "ahead": self.ahead,
            "samples": {
                "missing": [str(k) for k in self.missing[:SAMPLES]],
                "extra": [str(k) for k in self.extra[:SAMPLES]],
                "different": [{"key": str(k), "expected": e, "actual": a}
                              for k, e, a in self.different[:SAMPLES]],
            },
        }


def compare(view: str, expected: dict, actual: dict) -> Diff:
    """Pure per-key comparison (sorted samples so reports are stable)."""
    missing = sorted(k for k in expected if k not in actual)
    extra = sorted(k for k in actual if k not in expected)
    different = sorted(
        ((k, expected[k], actual[k]) for k in expected if k in actual and expected[k] != actual[k]),
        key=lambda t: str(t[0]),
    )
    return Diff(view, len(expected), len(actual), missing, extra, different)


@dataclass(frozen=True)
class SplitKeys:
    """Keys whose input came from several partitions: the likely cause of a difference in an
    order-dependent job (Spark keeps a key's order only within one partition)."""

    count: int
    example: str
    partitions: tuple[tuple[str, int], ...]

    def message(self) -> str:
        where = ", ".join(f"{t}/{p}" for t, p in self.partitions)
        return (f"{self.count} key(s) have input in several partitions, e.g. {self.example!r} in {where}: the app "
                f"orders a key's events per micro-batch by (topic, partition, offset) and this fold over the whole "
                f"input, which differ for such a key when the job depends on order; key the input by the job's "
                f"key so one key stays in one partition (`streamops produce` does: Kafka's default partitioner)")

    def to_dict(self) -> dict[str, Any]:
        return {"keys": self.count, "example": self.example,
                "partitions": [f"{t}/{p}" for t, p in self.partitions], "message": self.message()}


def likely_cause(job_cls: type, diffs: list[Diff], split_keys: dict[str, set[tuple[str, int]]]) -> SplitKeys | None:
    """Name keys in several input partitions when views differ and the job may depend on order
    (a native aggregation does not, nor a job that orders its events by event time across
    partitions); the example is a key that differs when there is one."""
    ordered = job_cls.has_time() and job_cls.fire_timers_by == "watermark"
    if all(d.ok for d in diffs) or not split_keys or job_cls.is_aggregate() or ordered:
        return None
    named = [str(k) for d in diffs if d.view in ("state", "changelog")
             for k in (*d.missing, *d.extra, *(k for k, _e, _a in d.different))]
    example = next((k for k in named if k in split_keys), None) or min(split_keys)
    return SplitKeys(len(split_keys), example, tuple(sorted(split_keys[example])))


@dataclass
class CheckReport:
    app: str
    batch_id: int | None
    input_records: int
    offsets: dict
    diffs: list[Diff]
    range: dict | None = None  # the input range folded, when not all of it
    cause: SplitKeys | None = None  # the likely cause of the differences, when one is known

    @property
    def ok(self) -> bool:
        return self.batch_id is not None and all(d.ok for d in self.diffs)

    def to_dict(self) -> dict[str, Any]:
        return {"app": self.app, "ok": self.ok, "batch_id": self.batch_id,
                "input_records": self.input_records, "offsets": self.offsets, "range": self.range,
                "views": [d.summary() for d in self.diffs],
                "likely_cause": None if self.cause is None else {"split_keys": self.cause.to_dict()}}


class NothingCommittedError(StreamopsError):
    """The app's checkpoint has no committed batch yet.

    Operator action: deploy/run the app and wait for its first batch, then check again.
    """


def committed_batch(settings: Settings, spec: AppSpec) -> tuple[Path, int]:
    """The app's checkpoint and its last committed batch (what ``check`` and ``verify`` compare as of)."""
    from streamops.app.checkpoint import checkpoint_dir

    ckpt = checkpoint_dir(settings, spec)
    batch = layout.last_committed_batch(ckpt)
    if batch is None:
        raise NothingCommittedError(f"{spec.name}: no committed batch in {ckpt}")
    return ckpt, batch


@dataclass(frozen=True)
class _Scope:
    """What one check compares as of: the committed batch, its offsets, the input range folded."""

    spec: AppSpec
    kafka: KafkaConfig
    ckpt: Path
    batch: int
    offsets: dict  # topic -> {partition: offset} the batch committed
    start: dict  # topic -> {"partition": offset} the checkpoint started at (``reset``), or {}
    since_ms: int | None
    wait_s: float  # open_transaction_wait_s

    @property
    def ranged(self) -> bool:
        return self.since_ms is not None or bool(self.start)


def run_check(spec: AppSpec, settings: Settings, kafka: KafkaConfig, *, spark=None, since_ms: int | None = None,
              open_transaction_wait_s: float = 30.0,
              progress: Callable[[str], None] = lambda _m: None) -> CheckReport:
    """``since_ms``: fold only input records with a timestamp at or after it (a reset to a
    datetime). Without it, a checkpoint made by ``reset`` is folded from the offsets it started
    at. With either range, the output and DLQ may hold records from before it: only the keys and
    input records in the range are compared there. ``open_transaction_wait_s``: how long a
    transaction may stay open below the end of a sink topic (a running app's batch) before it is
    named hanging (``OpenTransactionError``). ``kafka``: the app's client configuration."""
    job_cls = load_job(spec, settings.repo)
    ckpt, batch = committed_batch(settings, spec)
    sc = _Scope(spec, kafka, ckpt, batch, layout.committed_offsets(ckpt),
                layout.start_offsets(ckpt) or {}, since_ms, open_transaction_wait_s)
    progress(f"folding the input up to batch {batch}'s offsets {sc.offsets}")
    folded, records = _fold(job_cls, sc)
    progress(f"{records} input records -> {len(folded.states)} keys, {len(folded.output)} output keys, "
             f"{len(folded.rejected)} rejected")
    progress("reading the state store")
    diffs = [compare("state", folded.states, _state_store(job_cls, sc, settings, spark))]
    diffs += _topic_diffs(job_cls, sc, folded, progress)
    progress(f"reading {spec.dlq_topic}")
    diffs.append(_dlq_diff(sc, folded.rejected))
    report = CheckReport(spec.name, batch, records,
                         {t: {str(p): o for p, o in parts.items()} for t, parts in sc.offsets.items()}, diffs)
    report.range = {"start_offsets": sc.start or None, "since_ms": since_ms} if sc.ranged else None
    report.cause = likely_cause(job_cls, diffs, folded.split_keys)
    return report


def _fold(job_cls: type, sc: _Scope) -> tuple[Any, int]:
    """The job folded in plain Python over the input up to the batch's offsets (in the range, if
    any), as of the batch's watermark for a job with stream time: (the fold, input records read)."""
    from streamops.kafka.admin import partitions
    from streamops.kafka.read import read_topic
    from streamops.state.oracle import DERIVED, fold_input, record_of

    counted = {"n": 0}
    input_partitions = {topic: partitions(sc.kafka, topic) for topic in sc.spec.input_topics}

    def messages():
        for topic in sc.spec.input_topics:
            # partitions the committed batch does not cover (yet) contribute nothing
            end = {p: sc.offsets.get(topic, {}).get(p, 0) for p in input_partitions[topic]}
            first = {int(p): int(o) for p, o in sc.start.get(topic, {}).items()}
            for m in read_topic(sc.kafka, topic, end=end):
                if m.offset() < first.get(m.partition(), 0):
                    continue
                if sc.since_ms is not None and m.timestamp()[1] < sc.since_ms:
                    continue
                counted["n"] += 1
                yield m

    # a job with stream time: as of the batch's watermark (Spark learns it a batch or two late), with
    # the raised stream times its idle inputs' records were judged against (``stream_time.step_clocks``)
    timed = job_cls.has_time()
    clocks = layout.read_clocks(sc.ckpt, sc.batch) if timed and sc.batch is not None else None
    folded = fold_input(job_cls, (record_of(m) for m in messages()),
                        partitions=[(t, p) for t, ps in input_partitions.items() for p in ps],
                        watermark=layout.batch_watermark(sc.ckpt, sc.batch) if timed else DERIVED,
                        raises=clocks.raises if clocks is not None else None)
    return folded, counted["n"]


def _state_store(job_cls: type, sc: _Scope, settings: Settings, spark) -> dict:
    """The state store at the batch, read on ``spark`` (default: a local session of its own)."""
    from streamops.state.store import read_states

    own_spark = spark is None
    if own_spark:
        spark = _local_spark(settings)
    try:
        _ = spark.streams.active  # a session passed in may not have the coordinator yet
        return read_states(spark, job_cls, str(sc.ckpt), sc.batch)
    finally:
        if own_spark:
            spark.stop()


def _topic_diffs(job_cls: type, sc: _Scope, folded: Any, progress: Callable[[str], None]) -> list[Diff]:
    """The changelog's and the output topic's latest value per key compared with the fold's."""
    from streamops.kafka.read import latest_per_key
    from streamops.named_state import decode_changelog

    spec = sc.spec
    progress(f"reading {spec.changelog_topic}")
    changelog = compare("changelog", folded.states, decode_changelog(job_cls, latest_per_key(
        sc.kafka, spec.changelog_topic, decode=lambda v: v, past_open_transactions=True,
        stall_timeout=sc.wait_s)))
    progress(f"reading {spec.live_output_topic}")
    output = latest_per_key(sc.kafka, spec.live_output_topic, past_open_transactions=True,
                            stall_timeout=sc.wait_s)
    if sc.ranged:  # keys only seen before the range keep their older output
        output = {k: v for k, v in output.items() if k in folded.output}
    return [changelog, compare("output", folded.output, output)]


def _dlq_diff(sc: _Scope, invalid: dict) -> Diff:
    """The DLQ compared with the input records the fold rejected: each once, with its reason."""
    from streamops.kafka.read import read_topic
    from streamops.spark.query.records import dlq_entry

    seen: dict = {}
    dupes = 0
    in_range = {(t, p, o) for t, p, o in invalid} if sc.ranged else None
    ahead = 0
    recreated = _recreated(sc.kafka, sc.spec)
    for m in read_topic(sc.kafka, sc.spec.dlq_topic, past_open_transactions=True, stall_timeout=sc.wait_s):
        where, reason = dlq_entry(m.headers())
        if m.timestamp()[1] < recreated.get(where[0], {}).get(str(where[1]), 0):
            continue  # about a record of the input partition's previous life (it was recreated since)
        if where[2] >= sc.offsets.get(where[0], {}).get(int(where[1]), 0):
            # written by a run past this checkpoint (before a restore / undo); the commit protocol
            # keeps it from being written twice when the app gets there again
            ahead += 1
            continue
        if in_range is not None and where not in in_range and not _after_range(where, sc.start, sc.since_ms):
            continue
        if where in seen:
            dupes += 1
        seen[where] = reason
    dlq = compare("dlq", {f"{t}/{p}/{o}": r for (t, p, o), r in invalid.items()},
                  {f"{t}/{p}/{o}": r for (t, p, o), r in seen.items()})
    dlq.duplicates = dupes
    dlq.ahead = ahead
    return dlq


def _recreated(kafka: KafkaConfig, spec: AppSpec) -> dict[str, dict[str, int]]:
    """Input partitions recreated since the app first read them, and when that was noticed
    (``spark.commit``): DLQ entries written before then are about records that are gone."""
    from streamops.app.marker import last_marker

    return (last_marker(kafka, spec.commits_topic, spec.name) or {}).get("input_recreated") or {}


def _after_range(where: tuple, start: dict, since_ms: int | None) -> bool:
    """A DLQ entry for an input record inside the range (so it must have been expected):
    with an offset range, one at or after the start offset; a time range is judged by the fold."""
    topic, partition, offset = where
    if since_ms is not None:
        return False
    return int(offset) >= int(start.get(topic, {}).get(str(partition), 0))


def _local_spark(settings: Settings):
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", settings.host)
    spark = (SparkSession.builder.master("local[1]").appName("streamops-check")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
             .config("spark.ui.showConsoleProgress", "false")
             .config(map=jars.spark_conf())
             .config(map=pydaemon.conf())
             .config(map=quiet_console_conf())
             .getOrCreate())
    _ = spark.streams.active  # creates the StateStoreCoordinator the state reader talks to
    return spark


def render(report: CheckReport) -> str:
    lines = [f"check {report.app}: {'OK' if report.ok else 'MISMATCH'} as of batch {report.batch_id} "
             f"({report.input_records} input records"
             + (f" in the range {json.dumps(report.range)}" if report.range else "") + ")"]
    for d in report.diffs:
        s = d.summary()
        lines.append(f"  {s['view']:<10} expected {s['expected']:>8}  actual {s['actual']:>8}  "
                     f"missing {s['missing']}  extra {s['extra']}  different {s['different']}"
                     f"{'  duplicates ' + str(s['duplicates']) if s['duplicates'] else ''}")
        for kind in ("missing", "extra", "different"):
            for sample in s["samples"][kind]:
                lines.append(f"      {kind}: {json.dumps(sample, default=str)}")
    if report.cause is not None:
        lines.append(f"  likely cause: {report.cause.message()}")
    return "\n".join(lines)

