"""An app's dead-letter topic at a glance: the newest records per partition, counted by reason
per minute, and the newest few shown with their headers decoded and their values cut short."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from streamops.results import Result
from streamops.settings import Settings
from streamops.spec import AppSpec

if TYPE_CHECKING:
    from streamops.kafka.config import KafkaConfig

#: what a shown key or value keeps (the source coordinates in its headers find the whole record)
SHOWN_BYTES = 300


@dataclass(frozen=True)
class DlqRecord:
    partition: int
    offset: int
    timestamp_ms: int | None
    reason: str | None
    headers: dict[str, str]
    key: str | None
    value: str | None
    value_bytes: int


@dataclass(frozen=True)
class DlqSummary:
    topic: str
    read: int  # records looked at (the newest ``last`` per partition)
    by_reason: dict[str, int] = field(default_factory=dict)
    #: minute (epoch ms) -> reason -> records
    per_minute: dict[int, dict[str, int]] = field(default_factory=dict)
    newest: list[DlqRecord] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _text(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    cut = raw[:SHOWN_BYTES].decode("utf-8", "backslashreplace")
    return cut + ("…" if len(raw) > SHOWN_BYTES else "")


def dlq_summary(settings: Settings, spec: AppSpec, *, last: int = 500, shown: int = 20) -> DlqSummary:
    """Reads at most ``last`` records per partition of the app's DLQ topic; a broker that does
    not answer gives ``error`` (the page shows the rest)."""
    from streamops.app.topics import H_REASON
    from streamops.kafka.read import read_topic
    from streamops.kafka.security import kafka_config

    records: list[DlqRecord] = []
    try:
        kafka = kafka_config(settings, spec)  # the app's clients; a bad configuration is shown as the error
        for m in read_topic(kafka, spec.dlq_topic, last=last, stall_timeout=10):
            headers = {k: (v or b"").decode("utf-8", "backslashreplace") for k, v in (m.headers() or [])}
            ts_type, ts = m.timestamp()
            value = m.value()
            records.append(DlqRecord(m.partition(), m.offset(), ts if ts_type else None, headers.get(H_REASON),
                                     headers, _text(m.key()), _text(value), len(value or b"")))
    except Exception as exc:  # noqa: BLE001 - a page must still show the rest
        return DlqSummary(spec.dlq_topic, 0, error=str(exc).splitlines()[0][:300])
    by_reason = Counter(r.reason or "?" for r in records)
    per_minute: dict[int, Counter] = {}
    for r in records:
        if r.timestamp_ms is not None:
            per_minute.setdefault(r.timestamp_ms // 60_000 * 60_000, Counter())[r.reason or "?"] += 1
    newest = sorted(records, key=lambda r: (r.timestamp_ms or 0, r.offset), reverse=True)[:shown]
    return DlqSummary(spec.dlq_topic, len(records), dict(by_reason.most_common()),
                      {k: dict(v) for k, v in sorted(per_minute.items())}, newest)


# -- the DLQ summary DAG's digest: what is new since the last one ----------------------------------
#: a digest reads at most this many records per partition (the oldest beyond it are counted as skipped)
DIGEST_MAX_PER_PARTITION = 100_000


@dataclass(frozen=True)
class DlqDigest:
    """The DLQ records written since the previous digest (``AppDir.dlq_cursor``)."""

    app: str
    topic: str
    #: partition -> [first offset read, next offset] of this digest
    ranges: dict[int, tuple[int, int]]
    records: int
    by_reason: dict[str, int]
    #: records between the cursor and what was read (more than DIGEST_MAX_PER_PARTITION were new)
    skipped: int = 0
    newest: list[DlqRecord] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-plain (an XCom): ranges as ``{"partition": [first, next]}``."""
        return {**asdict(self), "ranges": {str(p): [lo, hi] for p, (lo, hi) in self.ranges.items()}}


def _cursor(appdir: Any) -> dict[int, int]:
    """partition -> the next offset the last digest did not count (``AppDir.dlq_cursor``)."""
    return {int(p): int(o) for p, o in ((appdir.read(appdir.dlq_cursor) or {}).get("offsets") or {}).items()}


@dataclass(frozen=True)
class DlqNews(Result):
    """Records in an app's DLQ topic beyond the last digest's cursor: how many, and each
    partition's end offset (``ends``, partition as a string: the asset event's JSON)."""

    app: str
    topic: str
    records: int
    ends: dict[str, int]


def new_records(settings: Settings, spec: AppSpec | None) -> DlqNews | None:
    """The DLQ asset watcher's poll: the news when the app's DLQ topic has records beyond the
    last digest's cursor, else None (also when the topic does not exist yet, or ``spec`` is None:
    no such app). One metadata request: the topic's end offsets.

    ``spec`` comes from the watcher's own ``SpecFile``, which re-reads the file only when it
    changed: with a parse each poll cost the triggerer 28.6 ms of CPU, without it 3.7
    (bench/dlq_poll.py)."""
    from streamops.app.dir import AppDir
    from streamops.kafka.admin import end_offsets
    from streamops.kafka.exceptions import TopicNotFoundError
    from streamops.kafka.security import kafka_config

    if spec is None:
        return None
    app = spec.name
    appdir = AppDir.of(settings, app)
    cursor = _cursor(appdir)
    try:
        marks = end_offsets(kafka_config(settings, spec), spec.dlq_topic)
    except TopicNotFoundError:
        return None
    records = sum(max(0, hi - max(lo, cursor.get(p, lo))) for p, (lo, hi) in marks.items())
    if not records:
        return None
    return DlqNews(app, spec.dlq_topic, records, {str(p): hi for p, (_lo, hi) in sorted(marks.items())})


def digest_new(settings: Settings, spec: AppSpec, kafka: KafkaConfig, *, shown: int = 5,
               dry_run: bool = False) -> DlqDigest:
    """Read the app's DLQ from where the last digest stopped to its end, count by reason, and move
    the cursor there (unless ``dry_run``). A first digest starts at each partition's beginning.
    Records of a batch still being written are waited for (they belong before the cursor)."""
    from streamops.app.dir import AppDir
    from streamops.app.topics import H_REASON
    from streamops.kafka.admin import end_offsets
    from streamops.kafka.exceptions import TopicNotFoundError
    from streamops.kafka.read import read_topic

    appdir = AppDir.of(settings, spec.name)
    cursor = _cursor(appdir)
    try:
        marks = end_offsets(kafka, spec.dlq_topic)
    except TopicNotFoundError:  # never deployed: nothing rejected yet
        return DlqDigest(spec.name, spec.dlq_topic, {}, 0, {})
    ends = {p: hi for p, (_lo, hi) in marks.items()}
    begins = {p: max(lo, cursor.get(p, lo), hi - DIGEST_MAX_PER_PARTITION) for p, (lo, hi) in marks.items()}
    skipped = sum(max(0, begins[p] - max(lo, cursor.get(p, lo))) for p, (lo, _hi) in marks.items())
    records: list[DlqRecord] = []
    by_reason: Counter = Counter()
    for m in read_topic(kafka, spec.dlq_topic, from_offsets=begins, end=ends, stall_timeout=30,
                        past_open_transactions=True):
        headers = {k: (v or b"").decode("utf-8", "backslashreplace") for k, v in (m.headers() or [])}
        by_reason[headers.get(H_REASON) or "?"] += 1
        ts_type, ts = m.timestamp()
        value = m.value()
        records.append(DlqRecord(m.partition(), m.offset(), ts if ts_type else None, headers.get(H_REASON),
                                 headers, _text(m.key()), _text(value), len(value or b"")))
        del records[:-shown]
    ranges = {p: (begins[p], ends[p]) for p in sorted(ends) if ends[p] > begins[p]}
    if not dry_run:
        appdir.write(appdir.dlq_cursor, {"offsets": {str(p): o for p, o in sorted(ends.items())}})
    return DlqDigest(spec.name, spec.dlq_topic, ranges, sum(by_reason.values()), dict(by_reason.most_common()),
                     skipped, list(reversed(records)))
