"""``streamops verify APP``: do the changelog and the output topic hold what the state store holds?

The state store at the checkpoint's last committed batch is the reference (read with Spark's
``statestore`` data source). The changelog topic's and the output topic's latest value per key
are compared with it (missing / extra / different keys, with samples); records of batches after
the verified one (a running app is one batch ahead at most) are ignored, so verify can run while
the app runs and needs no lease. Then Great Expectations suites from ``include/expectations/``
check the state's data quality (``<app>_state.json``) and the comparison's result
(``verify_result.json``: zero mismatches), writing an HTML report under
``<state_dir>/reports/verify/<app>/``. The outcome is recorded in the ledger (kind ``verify``).

Unlike ``streamops check`` this does not refold the input: it costs one state scan and two topic
scans, so it can run every hour on a large app. Everything app-specific comes from the declared
job: the state store is read through its serde (``state.store``), the changelog must hold the
serialized state per key and the output what ``emit`` makes of it.

A job that ``expire``s state (closed windows, ended sessions) leaves output records of what it
dropped, which no state explains any more. The rule (``split_output``): an output key is
*compared* when ``emit`` of a state in the store yields it, and *expired* otherwise; an expired
key's latest record can only be checked for form (``OutputShape``: JSON with the fields and JSON
types the job emits), and one that fails is *malformed*. The report counts all three, and says
"nothing to compare" instead of a bare OK when the state explains no key of a view.
"""

from __future__ import annotations

import gc
import json
import re
import struct
import threading
import time
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamops.checkpoints import layout
from streamops.exceptions import StreamopsError
from streamops.settings import Settings
from streamops.spec import AppSpec, load_job
from streamops.state.check import SAMPLES, Diff, NothingCommittedError, compare

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from streamops.ledger.store import Ledger
    from streamops.state.quality import QualityReport

VIEWS = ("changelog", "output")
RESULT_SUITE = "verify_result.json"
#: a last login up to this far ahead of the verifier's clock is producer clock skew, not a bug
CLOCK_SKEW_MS = 60_000
#: progress lines during a topic scan: at most one per this many seconds
PROGRESS_EVERY_S = 2.0

Progress = Callable[[str], None]


class VerifyFailedError(StreamopsError):
    """``streamops verify`` found a difference, an unreadable state store or a failed expectation.

    Operator action: read the summary (categories, samples, failed expectations) and open the
    HTML report it names; a state_unreadable / state_checksum result means restore the app from a
    savepoint or rebuild its state from the changelog, a changelog/output difference means
    investigate before relying on that topic (e.g. for a rebuild).
    """


# -- topic scans ---------------------------------------------------------------------------------
@dataclass
class TopicRead:
    """A topic's latest decoded value per key, as of the verified batch."""

    view: str
    topic: str
    values: dict[str, Any]
    records: int = 0
    tombstones: int = 0
    later: int = 0  # records written by batches after the verified one (ignored)
    undecodable: list[str] = field(default_factory=list)
    seconds: float = 0.0


def progress_line(label: str, done: int, total: int | None, width: int = 24) -> str:
    """``label [#########---------------]  38% 380,000/1,000,000`` (no bar when total is unknown)."""
    if not total:
        return f"{label} {done:,}"
    frac = min(done / total, 1.0)
    filled = int(frac * width)
    return f"{label} [{'#' * filled}{'-' * (width - filled)}] {frac:4.0%} {done:,}/{total:,}"


_scan_once = json.JSONDecoder().scan_once  # the C scanner


def decode_json(value: bytes) -> Any:
    """``json.loads`` for one compact UTF-8 document, ~2x faster on the common case.

    Why: at 1M values ``json.loads(bytes)`` spends a third of its time sniffing the encoding and
    matching whitespace. Anything unusual (whitespace, trailing data, errors) takes ``json.loads``.
    """
    try:
        text = value.decode()
        obj, end = _scan_once(text, 0)
        if end == len(text):
            return obj
    except (StopIteration, ValueError):
        pass
    return json.loads(value)


def scan_topic(bootstrap: str, topic: str, *, view: str, max_batch: int | None = None,
               batch_of: Callable[[list], int | None] | None = None,
               progress: Progress = lambda _m: None, decode: Callable[[bytes], Any] = decode_json) -> TopicRead:
    """Latest value per key (a tombstone deletes its key), skipping records of later batches.

    Values are decoded once, for surviving keys only; an undecodable value stays in the view as
    ``{"undecodable": ...}`` so it compares as different.
    """
    from streamops.kafka.admin import end_offsets
    from streamops.kafka.read import read_topic

    start = time.monotonic()
    try:
        total = sum(hi - lo for lo, hi in end_offsets(bootstrap, topic).values())
    except StreamopsError:
        total = None  # read_topic below raises the real error if the topic is not there
    label = f"  {view} {topic}:"
    latest: dict[str, bytes] = {}
    records = tombstones = later = 0
    check_batch = max_batch is not None and batch_of is not None
    next_report = start + PROGRESS_EVERY_S
    for m in read_topic(bootstrap, topic):
        records += 1
        if check_batch:
            headers = m.headers()
            if headers is not None:
                b = batch_of(headers)
                if b is not None and b > max_batch:
                    later += 1
                    continue
        key = m.key()
        if key is None:
            continue
        k = key.decode("utf-8", "backslashreplace")
        value = m.value()
        if value is None:
            tombstones += 1
            latest.pop(k, None)
        else:
            latest[k] = value
        if not records & 0x3FFF and time.monotonic() >= next_report:
            progress(progress_line(label, records, total))
            next_report = time.monotonic() + PROGRESS_EVERY_S
    values: dict[str, Any] = {}
    bad: list[str] = []
    for k, v in latest.items():
        try:
            values[k] = decode(v)
        except ValueError:
            values[k] = {"undecodable": v[:80].decode("utf-8", "backslashreplace")}
            bad.append(k)
    seconds = time.monotonic() - start
    progress(f"{progress_line(label, records, records)} -> {len(values):,} keys in {seconds:.1f}s"
             + (f" ({later:,} records of later batches ignored)" if later else ""))
    return TopicRead(view, topic, values, records, tombstones, later, sorted(bad), seconds)


def assemble_parts(job_cls: Any, read: TopicRead) -> TopicRead:
    """A named-state changelog's parts (``named_state.changelog_key``) as one state per key; a part
    that does not decode makes its key's state ``{"undecodable": ...}`` (it compares as different)."""
    import json as _json

    from streamops import named_state as ns

    good: dict[str, bytes] = {}
    bad: dict[str, str] = {}
    for ckey, raw in read.values.items():
        parts: Any = None
        try:
            parts = _json.loads(ckey)
            ns.assemble(job_cls.state_values, {ckey: raw})
            good[ckey] = raw
        except (ValueError, TypeError, IndexError, ns.StateShapeError) as exc:
            owner = parts[0] if isinstance(parts, list) and parts and isinstance(parts[0], str) else ckey
            bad[owner] = f"{ckey}: {exc}"[:80]
    values: dict[str, Any] = ns.assemble(job_cls.state_values, good)
    for k, why in bad.items():
        values[k] = {"undecodable": why}
    return TopicRead(read.view, read.topic, values, read.records, read.tombstones, read.later,
                     sorted({*read.undecodable, *bad}), read.seconds)


# -- state ---------------------------------------------------------------------------------------
@dataclass
class StateRead:
    """The state store at the verified batch (or why it could not be read)."""

    values: dict[str, Any] = field(default_factory=dict)
    table: pa.Table | None = None
    rows: int = 0
    error: str | None = None
    corrupt_files: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def readable(self) -> bool:
        return self.error is None

    def summary(self) -> dict[str, Any]:
        return {"readable": self.readable, "keys": len(self.values), "rows": self.rows, "error": self.error,
                "corrupt_files": self.corrupt_files[:SAMPLES], "corrupt_file_count": len(self.corrupt_files),
                "seconds": round(self.seconds, 2)}


def checksum_failures(state_dir: Path) -> list[str]:
    """Files under ``state_dir`` whose bytes do not match their Hadoop ``.NAME.crc`` sidecar.

    Why our own check: a corrupted RocksDB changelog shows up in Spark as "Stream is corrupted"
    with no file name; the sidecars (CRC32 per 512-byte chunk) name the file. A file changed by
    a concurrent writer between the two reads is read again once before it is reported.
    """
    bad = []
    if not state_dir.is_dir():
        return bad
    for crc in sorted(state_dir.rglob(".*.crc")):
        data = crc.with_name(crc.name[1:-4])
        for _attempt in range(2):
            try:
                ok = _crc_matches(crc.read_bytes(), data.read_bytes())
            except FileNotFoundError:  # removed by state maintenance meanwhile
                ok = True
            if ok:
                break
        else:
            bad.append(str(data.relative_to(state_dir.parent)))
    return bad


def _crc_matches(sidecar: bytes, data: bytes) -> bool:
    if len(sidecar) < 8 or sidecar[:4] != b"crc\x00":
        return False
    (chunk,) = struct.unpack(">i", sidecar[4:8])
    if chunk <= 0:
        return False
    sums = sidecar[8:]
    expected_chunks = (len(data) + chunk - 1) // chunk
    if len(sums) != 4 * expected_chunks:
        return False
    for i in range(expected_chunks):
        if zlib.crc32(data[i * chunk:(i + 1) * chunk]) != struct.unpack(">I", sums[4 * i:4 * i + 4])[0]:
            return False
    return True


_ERROR_CLASS = re.compile(r"(\[[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*\][^\n]*?)(?:\s+SQLSTATE: \w+)?\s*$")


def unreadable_reason(exc: BaseException) -> str:
    """One line from a (Java) stack trace: Spark's error class and the root cause."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    error_class = next((m.group(1).strip() for ln in lines if (m := _ERROR_CLASS.search(ln))), None)
    causes = [ln.removeprefix("Caused by: ") for ln in lines if ln.startswith("Caused by: ")]
    root = causes[-1] if causes else None
    if error_class and root and error_class not in root:
        return f"{error_class} (root cause: {root})"[:500]
    first = error_class or root or (lines[0] if lines else "")
    return f"{type(exc).__name__}: {first}"[:500] if not error_class else first[:500]


def read_state(job_cls: Any, spark: Any, checkpoint: Path, batch: int) -> StateRead:
    """Read the state store through the job's serde; any failure becomes ``error`` (not a crash).
    ``table`` is what the job emits for that state (the data-quality suite's rows)."""
    import pyarrow as pa

    from streamops.state.store import read_states

    start = time.monotonic()
    try:
        values = read_states(spark, job_cls, str(checkpoint), batch)
    except Exception as exc:  # noqa: BLE001  # Py4JJavaError, pyspark errors, OSError: all mean unreadable
        return StateRead(error=unreadable_reason(exc), seconds=time.monotonic() - start)
    job = job_cls()
    rows = [v for k, s in values.items() for v in job.emit(k, s).values()]  # in the job's field order
    return StateRead(values, pa.Table.from_pylist(rows) if rows else None, len(values),
                     seconds=time.monotonic() - start)


def emitted(job_cls: Any, states: dict[str, Any]) -> dict[str, Any]:
    """The output a job's states emit, per output key, as the output topic's JSON reads back."""
    from streamops.job import JsonSerde

    job, js = job_cls(), JsonSerde()
    return {okey: js.loads(js.dumps(v)) for k, s in states.items() for okey, v in job.emit(k, s).items()}


# -- output keys: compared, expired, malformed ------------------------------------------------------
#: how many sample events of the job's own ``generate`` teach ``OutputShape`` what it emits
SHAPE_SAMPLE_EVENTS = 2_000


def json_kind(value: Any) -> str:
    """The JSON type of a decoded value; ints and floats are both ``number`` (2.0 may read back as 2)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


@dataclass(frozen=True)
class OutputShape:
    """What the job's output values look like, learned from values ``emit`` made.

    Why learned: the job API declares no output schema; its output format is JSON and ``emit``
    is the only definition of a value. A value is well-formed when it has a JSON type emit gave,
    and, for objects, every field emit always gives, no field emit never gives, and each field of
    a JSON type emit gave it (a field emit only ever gave as null, e.g. a session's end while it is
    open, takes any type). Learning only widens: more reference values never reject more.
    """

    kinds: frozenset[str]
    fields: Mapping[str, frozenset[str]]
    required: frozenset[str]
    learned_from: int

    @classmethod
    def learn(cls, values: Iterable[Any]) -> OutputShape | None:
        """None when there is nothing to learn from."""
        kinds: set[str] = set()
        fields: dict[str, set[str]] = {}
        required: set[str] | None = None
        n = 0
        for value in values:
            n += 1
            kinds.add(json_kind(value))
            if isinstance(value, dict):
                required = set(value) if required is None else required & value.keys()
                for name, v in value.items():
                    fields.setdefault(name, set()).add(json_kind(v))
        if not n:
            return None
        return cls(frozenset(kinds), {f: frozenset(k) for f, k in fields.items()}, frozenset(required or ()), n)

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not a value the job emits, or None."""
        kind = json_kind(value)
        if kind not in self.kinds:
            return f"a JSON {kind}, the job emits {' or '.join(sorted(self.kinds))}"
        if not isinstance(value, dict):
            return None
        missing = sorted(self.required - value.keys())
        if missing:
            return "no field " + ", ".join(repr(f) for f in missing)
        for name, v in value.items():
            seen = self.fields.get(name)
            if seen is None:
                return f"field {name!r}, which the job does not emit"
            k = json_kind(v)
            if k not in seen and seen != {"null"}:
                return f"field {name!r} is a JSON {k}, the job emits {' or '.join(sorted(seen))}"
        return None


def sample_outputs(job_cls: Any, input_topic: str, events: int = SHAPE_SAMPLE_EVENTS) -> list[Any]:
    """The output values of the job's own sample (``generate``), folded as ``check`` folds input.

    Why: a state that emits nothing (every key expired, or a job that emits only when something
    closes) teaches ``OutputShape`` nothing; the sample's outputs include closed windows. A
    ``(key, value)`` pair is a record of ``input_topic``, a ``(topic, key, value)`` triple of its topic."""
    from streamops.job import Record
    from streamops.state.oracle import fold_input

    if not job_cls.can_generate():
        return []
    def records() -> Iterator[Record]:
        for i, item in enumerate(job_cls().generate(events, 0)):
            topic, key, value = item if len(item) == 3 else (input_topic, *item)
            yield Record(topic, 0, i, key, value)

    return list(fold_input(job_cls, records()).output.values())


@dataclass
class OutputSplit:
    """The output topic's keys as verify can check them (the rule is ``split_output``'s)."""

    to_compare: dict[str, Any] = field(default_factory=dict)  # key -> latest value: explained (all without expire)
    expired: list[str] = field(default_factory=list)  # sorted; no state emits them; well-formed
    malformed: list[tuple[str, str]] = field(default_factory=list)  # (key, why), sorted; expired, not well-formed
    shape: OutputShape | None = None  # what expired values were held to (None: JSON only)


def split_output(emitted: Mapping[str, Any], output: Mapping[str, Any], *, expires: bool,
                 shape: OutputShape | Callable[[], OutputShape | None] | None = None,
                 undecodable: Collection[str] = ()) -> OutputSplit:
    """Split the output topic's latest value per key by what the state store explains.

    The state *explains* an output key when ``emit`` of a key's state in the store yields it
    (``emitted``): Spark emits a key's output, then expires, so what ``expire`` kept emits what it
    emitted then, and the output's latest record must equal it. For a job whose output is per
    window (page_stats: state key ``/p001``, output keys ``/p001@<window start>``) the explained
    keys are the windows the state still holds, each compared on its own; a window ``expire``
    dropped leaves its key unexplained although its page's state exists. A job without ``expire``
    must explain every key: the others are compared too, and count as extra. For a job with
    ``expire`` they are *expired*: their last value was emitted by a state that is gone, so only
    its form is checked (decodes as JSON, and fits ``shape``; learned lazily when a callable);
    otherwise they are *malformed*.
    """
    out = OutputSplit()
    bad = set(undecodable)
    learned = False
    for k in sorted(output):
        if k in emitted or not expires:
            out.to_compare[k] = output[k]
            continue
        if k in bad:
            out.malformed.append((k, "not valid JSON"))
            continue
        if not learned:
            out.shape = shape() if callable(shape) else shape
            learned = True
        why = out.shape.problem(output[k]) if out.shape is not None else None
        if why is None:
            out.expired.append(k)
        else:
            out.malformed.append((k, why))
    return out


def state_frame(table: pa.Table) -> pd.DataFrame:
    """pandas for GX; nullable integers so a null last_login_ts stays an exact int64 column."""
    import pandas as pd
    import pyarrow as pa

    mapping = {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype()}
    return table.to_pandas(types_mapper=mapping.get)


# -- the report ----------------------------------------------------------------------------------
@dataclass
class ViewResult:
    """One topic compared with the state store; for the output, how its keys split (``split_output``)."""

    diff: Diff
    read: TopicRead
    split: OutputSplit | None = None

    @property
    def compared(self) -> int:
        """Keys held by both the state side and the topic (equal or different)."""
        return self.diff.expected - len(self.diff.missing)

    @property
    def expired(self) -> int:
        return len(self.split.expired) if self.split is not None else 0

    @property
    def malformed(self) -> list[tuple[str, str]]:
        return self.split.malformed if self.split is not None else []

    def summary(self) -> dict[str, Any]:
        s = self.diff.summary()
        s.pop("duplicates", None)
        s["state_keys"] = s.pop("expected")
        s.pop("actual")
        s["samples"]["undecodable"] = self.read.undecodable[:SAMPLES]
        s["samples"]["malformed"] = [{"key": k, "why": why} for k, why in self.malformed[:SAMPLES]]
        return {**s, "topic_keys": len(self.read.values), "compared": self.compared, "expired": self.expired,
                "malformed": len(self.malformed), "topic": self.read.topic,
                "undecodable": len(self.read.undecodable), "records": self.read.records,
                "tombstones": self.read.tombstones, "later_batch_records": self.read.later,
                "seconds": round(self.read.seconds, 2)}


def categorize(state: StateRead, views: Sequence[ViewResult], quality: QualityReport | None) -> list[str]:
    """What went wrong, as stable names: ``state_unreadable``, ``state_checksum``,
    ``<view>.missing|extra|different|undecodable|malformed``, ``quality.<check>``; empty when all is well."""
    out = []
    if not state.readable:
        out.append("state_unreadable")
    if state.corrupt_files:
        out.append("state_checksum")
    for v in views:
        d = v.diff
        for kind, n in (("missing", len(d.missing)), ("extra", len(d.extra)), ("different", len(d.different)),
                        ("undecodable", len(v.read.undecodable)), ("malformed", len(v.malformed))):
            if n:
                out.append(f"{d.view}.{kind}")
    if quality is not None:
        out.extend(f"quality.{r.check}" for r in quality.results if not r.success)
    return out


RESULT_COLUMNS = ["view", "state_keys", "topic_keys", "compared", "expired", "missing", "extra", "different",
                  "undecodable", "malformed"]


def result_frame(views: Sequence[ViewResult]) -> pd.DataFrame:
    """One row per view: the counts ``verify_result.json`` checks."""
    import pandas as pd

    return pd.DataFrame([{
        "view": v.diff.view, "state_keys": v.diff.expected, "topic_keys": len(v.read.values),
        "compared": v.compared, "expired": v.expired, "missing": len(v.diff.missing), "extra": len(v.diff.extra),
        "different": len(v.diff.different), "undecodable": len(v.read.undecodable), "malformed": len(v.malformed),
    } for v in views], columns=RESULT_COLUMNS)


@dataclass(frozen=True)
class KeyCounts:
    """The output topic's keys by what verify could do with them; they add up to its key count."""

    compared: int  # the state explains the key: its value was compared (equal or different)
    expired: int  # no state explains it (expire dropped it): well-formed
    malformed: int  # no state explains it, and it is not a value the job emits
    extra: int = 0  # a job without expire: no state explains it

    @classmethod
    def of(cls, view: ViewResult) -> KeyCounts:
        return cls(view.compared, view.expired, len(view.malformed), len(view.diff.extra))

    def line(self) -> str:
        return (f"{self.compared:,} compared, {self.expired:,} expired (well-formed), {self.malformed:,} malformed"
                + (f", {self.extra:,} extra" if self.extra else ""))


@dataclass
class VerifyReport:
    app: str
    batch_id: int
    state: StateRead
    views: list[ViewResult]
    quality: QualityReport | None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    operation_id: int | None = None

    @property
    def categories(self) -> list[str]:
        return categorize(self.state, self.views, self.quality)

    @property
    def ok(self) -> bool:
        return not self.categories

    @property
    def report_html(self) -> str | None:
        return self.quality.report_html if self.quality is not None else None

    def _view(self, name: str) -> ViewResult | None:
        return next((v for v in self.views if v.diff.view == name), None)

    @property
    def output_keys(self) -> KeyCounts | None:
        """None when the output was not compared (the state store was unreadable)."""
        out = self._view("output")
        return KeyCounts.of(out) if out is not None else None

    @property
    def nothing_to_compare(self) -> str | None:
        """Why the output (or everything) was compared over no key, or None: an OK over nothing says so."""
        out = self._view("output")
        if out is None or out.diff.expected:
            return None
        why = (f"the state store at batch {self.batch_id} holds no key" if not self.state.values
               else f"the state store's {len(self.state.values):,} keys emit no output key")
        keys = self.output_keys
        if out.read.values and keys is not None:
            why += f"; output keys: {keys.line()}"
        return why

    def headline(self) -> str:
        verdict = "OK" if self.ok else "FAILED (" + ", ".join(self.categories) + ")"
        nothing = self.nothing_to_compare
        return f"verify {self.app}: {verdict} as of batch {self.batch_id}" + (
            f", but nothing to compare: {nothing}" if nothing and self.ok else "")

    def ledger_summary(self) -> dict[str, Any]:
        """What the ledger keeps (``after``): counts, no samples of values."""
        return {
            "batch_id": self.batch_id, "ok": self.ok, "categories": self.categories,
            "state": {k: v for k, v in self.state.summary().items() if k != "seconds"},
            "views": {v.diff.view: {k: v.summary()[k] for k in
                                    ("topic", "state_keys", "topic_keys", "compared", "expired", "missing", "extra",
                                     "different", "undecodable", "malformed")} for v in self.views},
            "output_keys": None if self.output_keys is None else asdict(self.output_keys),
            "nothing_to_compare": self.nothing_to_compare,
            "quality": None if self.quality is None else {
                r.check: {"suite": r.suite, "evaluated": r.evaluated, "failed": len(r.failures)}
                for r in self.quality.results},
            "report_html": self.report_html, "seconds": round(self.seconds, 1),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "app": self.app, "batch_id": self.batch_id, "ok": self.ok, "categories": self.categories,
            "state": self.state.summary(), "views": [v.summary() for v in self.views],
            "output_keys": None if self.output_keys is None else asdict(self.output_keys),
            "nothing_to_compare": self.nothing_to_compare,
            "quality": None if self.quality is None else self.quality.to_dict(),
            "report_html": self.report_html, "notes": self.notes, "seconds": round(self.seconds, 2),
            "timings": {k: round(v, 2) for k, v in self.timings.items()}, "operation_id": self.operation_id,
        }

    def raise_if_failed(self) -> None:
        """For tasks: fail with the readable summary (the log then shows the report path too)."""
        if not self.ok:
            raise VerifyFailedError(render(self))


def render(report: VerifyReport) -> str:
    st = report.state
    lines = [report.headline()]
    if st.readable:
        lines.append(f"  state      {len(st.values):>10,} keys"
                     + (f" in {st.rows:,} rows" if st.rows != len(st.values) else ""))
    else:
        lines.append(f"  state      UNREADABLE: {st.error}")
    for f in st.corrupt_files[:SAMPLES]:
        lines.append(f"      checksum mismatch: {f}")
    if len(st.corrupt_files) > SAMPLES:
        lines.append(f"      ... and {len(st.corrupt_files) - SAMPLES} more files")
    for v in report.views:
        s = v.summary()
        lines.append(f"  {s['view']:<10} {s['topic_keys']:>10,} keys  missing {s['missing']}  extra {s['extra']}  "
                     f"different {s['different']}  undecodable {s['undecodable']}   ({s['topic']}: "
                     f"{s['records']:,} records, {s['tombstones']:,} tombstones"
                     + (f", {s['later_batch_records']:,} of later batches ignored" if s["later_batch_records"]
                        else "") + ")")
        if v.split is not None:
            lines.append(f"      output keys: {KeyCounts.of(v).line()}")
        for kind in ("missing", "extra", "undecodable"):
            for key in s["samples"][kind]:
                lines.append(f"      {kind}: {key}")
        for m in s["samples"]["malformed"]:
            lines.append(f"      malformed: {m['key']}  {m['why']}")
        for d in s["samples"]["different"]:
            lines.append(f"      different: {d['key']}  state {json.dumps(d['expected'], default=str)}  "
                         f"{s['view']} {json.dumps(d['actual'], default=str)}")
    if report.quality is not None:
        lines.extend("  quality    " + ln if not ln.startswith("  ") else "           " + ln
                     for ln in report.quality.summary_lines())
    lines.extend(f"  note       {n}" for n in report.notes)
    if report.report_html:
        lines.append(f"  report     {report.report_html}")
    lines.append(f"  took       {report.seconds:.1f}s ("
                 + ", ".join(f"{k} {v:.1f}s" for k, v in report.timings.items()) + ")")
    return "\n".join(lines)


# -- the whole run -------------------------------------------------------------------------------
#: HTML reports kept per app (~4 MB each, mostly Great Expectations' static files): two days hourly
REPORTS_KEPT = 48


def _report_dir(settings: Settings, app: str, batch: int) -> Path:
    """A new report folder; the oldest beyond ``REPORTS_KEPT`` are deleted (names sort by time)."""
    import shutil

    root = settings.state_dir / "reports" / "verify" / app
    if root.is_dir():
        for old in sorted(p for p in root.iterdir() if p.is_dir())[:-(REPORTS_KEPT - 1) or None]:
            shutil.rmtree(old, ignore_errors=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return root / f"{stamp}-batch{batch}"


def verify(spec: AppSpec, settings: Settings, *, ledger: Ledger | None = None, record: bool = True,
           who: str | None = None, spark: Any = None, progress: Progress = lambda _m: None,
           now_ms: int | None = None, html: bool = True) -> VerifyReport:
    """Compare changelog and output with the state store at the last committed batch, run the
    GX suites, record the outcome in the ledger (``record``; a verify takes no lease).

    ``now_ms``: the instant last logins must not be after (default: now + ``CLOCK_SKEW_MS``).
    Raises ``NothingCommittedError`` before anything is read if no batch is committed.
    """
    # millions of small dicts and no reference cycles: the cyclic GC would only rescan them
    # again and again (~30% of the decode time at 1M keys)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        report = _verify(spec, settings, spark=spark, progress=progress, now_ms=now_ms, html=html)
    finally:
        if gc_was_enabled:
            gc.enable()
    if record:
        report.operation_id = _record(report, settings, ledger, who)
    return report


def _verify(spec: AppSpec, settings: Settings, *, spark: Any, progress: Progress, now_ms: int | None,
            html: bool) -> VerifyReport:
    import pandas  # noqa: F401  # imported here, before the threads below import lazily
    import pyarrow  # noqa: F401

    from streamops.app.checkpoint import checkpoint_dir
    from streamops.state import quality as q

    t0 = time.monotonic()
    timings: dict[str, float] = {}
    job_cls = load_job(spec, settings.repo)
    ckpt = checkpoint_dir(settings, spec)
    batch = layout.last_committed_batch(ckpt)
    if batch is None:
        raise NothingCommittedError(f"{spec.name}: no committed batch in {ckpt}")
    progress(f"verifying {spec.name} as of batch {batch} (checkpoint {ckpt})")

    # the state scan runs mostly in the JVM: overlap it with the topic scans (Python) below
    state_box: dict[str, Any] = {}

    def read_state_in_background() -> None:
        ts = time.monotonic()
        try:
            own = spark is None
            session = _session(settings) if own else spark
            timings["spark_start"] = time.monotonic() - ts
            try:
                state_box["state"] = read_state(job_cls, session, ckpt, batch)
            finally:
                if own:
                    session.stop()
        except BaseException as exc:  # noqa: BLE001  # re-raised in the main thread
            state_box["error"] = exc

    import pyspark.sql  # noqa: F401  # before the thread: no concurrent first import of pyspark

    worker = threading.Thread(target=read_state_in_background, name="verify-state", daemon=True)
    worker.start()
    try:
        ts = time.monotonic()
        corrupt = checksum_failures(ckpt / "state")
        timings["checksums"] = time.monotonic() - ts
        ts = time.monotonic()
        from streamops.job import JsonSerde
        from streamops.spark.query.records import batch_of

        topics = {"changelog": spec.changelog_topic, "output": spec.live_output_topic}
        serde = job_cls.state_serde
        named = job_cls.has_named_state()
        decoders = {"changelog": (lambda v: v) if named else decode_json if isinstance(serde, JsonSerde)
                    else serde.loads, "output": decode_json}
        reads = {view: scan_topic(settings.kafka_bootstrap, topics[view], view=view, max_batch=batch,
                                  batch_of=batch_of, progress=progress, decode=decoders[view]) for view in VIEWS}
        if named:  # one record per part of a key's state: put each key's state together
            reads["changelog"] = assemble_parts(job_cls, reads["changelog"])
        timings["topics"] = time.monotonic() - ts
        ts = time.monotonic()
        q.prefetch()  # ~8 s of imports, also overlapped with the state scan
        timings["gx_import"] = time.monotonic() - ts
    finally:
        if worker.is_alive():
            progress("  waiting for the state store scan")
        worker.join()
    if "error" in state_box:
        raise state_box["error"]
    state: StateRead = state_box["state"]
    state.corrupt_files = corrupt
    timings["state"] = state.seconds
    notes: list[str] = []
    if not state.readable:
        progress(f"  state store at batch {batch}: UNREADABLE: {state.error}")
        notes.append("the topics were read but not compared: the state store is the reference")
        views: list[ViewResult] = []
        quality = None
    else:
        progress(f"  state store at batch {batch}: {len(state.values):,} keys in {state.seconds:.1f}s")
        ts = time.monotonic()
        out = emitted(job_cls, state.values)
        split = split_job_output(job_cls, out, reads["output"], notes, input_topic=spec.input_topics[0])
        views = [ViewResult(compare("changelog", state.values, reads["changelog"].values), reads["changelog"]),
                 ViewResult(compare("output", out, split.to_compare), reads["output"], split)]
        timings["compare"] = time.monotonic() - ts
        ts = time.monotonic()
        quality = run_quality(spec, settings, state, views, batch=batch, now_ms=now_ms, html=html,
                              notes=notes, progress=progress)
        timings["quality"] = time.monotonic() - ts
    return VerifyReport(spec.name, batch, state, views, quality, notes, time.monotonic() - t0, timings)


def split_job_output(job_cls: Any, emitted_now: Mapping[str, Any], output: TopicRead, notes: list[str], *,
                     input_topic: str = "input") -> OutputSplit:
    """``split_output`` for a declared job, noting how expired keys were checked.
    ``input_topic``: the app's first input topic (where ``generate``'s pairs go)."""
    split = split_output(emitted_now, output.values, expires=job_cls.has_expire(),
                         shape=lambda: _learn_shape(job_cls, emitted_now, notes, input_topic),
                         undecodable=output.undecodable)
    if split.expired or split.malformed:
        notes.append(_shape_note(split))
    return split


def _learn_shape(job_cls: Any, emitted_now: Mapping[str, Any], notes: list[str],
                 input_topic: str) -> OutputShape | None:
    """``OutputShape`` from what the state emits plus the job's sample (a sample that fails is noted)."""
    try:
        sample = sample_outputs(job_cls, input_topic)
    except Exception as exc:  # noqa: BLE001  # the job's own generate/update: a note, not a crash
        notes.append(f"the job's sample could not be folded for the output shape: {type(exc).__name__}: {exc}")
        sample = []
    return OutputShape.learn([*emitted_now.values(), *sample])


def _shape_note(split: OutputSplit) -> str:
    """How expired output records were checked (they cannot be compared without the input)."""
    head = "output keys no state explains (dropped by expire) were checked for form only, not for their values"
    if split.shape is None:
        return head + ": as JSON (neither the state nor the job's sample emits a value to learn fields from)"
    return head + f": JSON with the fields and types of the {split.shape.learned_from:,} values the state and " \
                  "the job's sample emit (`streamops check` compares them with the input)"


def run_quality(spec: AppSpec, settings: Settings, state: StateRead, views: Sequence[ViewResult], *,
                batch: int, now_ms: int | None = None, html: bool = True, notes: list[str] | None = None,
                progress: Progress = lambda _m: None) -> QualityReport:
    """The GX part: the app's state suite and output suite (each if it has one) and the result suite.
    The output suite (``<app>_output.json``) is for jobs whose output no state explains, such as
    windows emitted once they close: their output records are the data to judge."""
    from streamops.state import quality as q

    suites = q.suites_dir(settings.repo)
    checks = []
    state_suite = suites / f"{spec.name}_state.json"
    if not state_suite.exists():
        if notes is not None:
            notes.append(f"no state data-quality suite ({state_suite} does not exist)")
    elif state.table is not None:
        checks.append(q.Check("state", state_suite, state_frame(state.table)))
    elif notes is not None:
        notes.append("the state store's states emit no output records (an empty store, or windows written "
                     "only once they close): the state data-quality suite was not run")
    output_suite = suites / f"{spec.name}_output.json"
    values = [v for view in views if view.read.view == "output" for v in view.read.values.values()
              if isinstance(v, dict)]
    if output_suite.exists() and values:
        import pyarrow as pa

        checks.append(q.Check("output", output_suite, state_frame(pa.Table.from_pylist(values))))
    checks.append(q.Check("result", suites / RESULT_SUITE, result_frame(views)))
    docs = _report_dir(settings, spec.name, batch) if html else None
    progress(f"  running {len(checks)} expectation suite(s)" + (f", report in {docs}" if docs else ""))
    now = int(time.time() * 1000) + CLOCK_SKEW_MS if now_ms is None else int(now_ms)
    return q.run_checks(checks, parameters={"now_ms": now}, docs_dir=docs,
                        run_name=f"{spec.name}-batch{batch}")


def _session(settings: Settings):
    from streamops.state.check import _local_spark

    return _local_spark(settings)


def _record(report: VerifyReport, settings: Settings, ledger: Ledger | None, who: str | None) -> int:
    """A verify is read-only: logged with ``record`` (no lease), so it runs beside other operations."""
    from streamops.ledger.store import Ledger, requested_by

    own = ledger is None
    lg = Ledger.open(settings.ledger_db_url) if own else ledger
    try:
        return lg.record(report.app, "verify", {"batch_id": report.batch_id}, who=requested_by(who),
                         outcome="succeeded" if report.ok else "failed",
                         error=None if report.ok else report.headline(), after=report.ledger_summary())
    finally:
        if own:
            lg.close()
