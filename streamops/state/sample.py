"""The sample ``streamops app lint`` checks a job on, and how much of it the sample's order makes late.

The sample is the job's ``generate`` (``sample_records``) or JSON-lines files (``file_records``,
``app lint --from-file [TOPIC=]F.jsonl``), placed in partitions as a producer places them
(``place``): a record that names its partition keeps it; a keyed one goes where Kafka's default
partitioner puts its key (``streamops.kafka.produce.default_partition``, murmur2), a keyless one
round-robin per topic. Offsets count per (topic, partition) in input order: each partition's
records are read in the order the input gives them, and that order is what stream time follows.

A file's lines come in two forms, mixed freely (blank lines are skipped; line numbers count them):

- a **plain line** is the record's value, as ``streamops produce --from-file`` sends it: its topic
  is the file's (``TOPIC=F.jsonl``) or the app's only input topic, its key what the job's ``key()``
  gives for it (none for a line the job rejects), placed by that key, with no timestamp;
- a **record line** is a JSON object with a ``value`` member and no member other than ``topic``,
  ``partition``, ``key``, ``timestamp`` and ``value`` (``RECORD_MEMBERS``). ``value``: a string is
  the value's text (UTF-8), ``null`` no value, anything else is written as its JSON; ``topic``: one
  of the app's input topics (absent: as for a plain line); ``partition``: a partition of that
  topic, kept as given (absent: placed by the key); ``key``: a string, or ``null`` for none
  (absent: the job's ``key()``, as for a plain line); ``timestamp``: the record's Kafka timestamp,
  epoch ms (a job without ``timestamp()`` takes it as the event time).

Every other line, a JSON object of other members among them, is a plain line. A value that is
itself an object of only those members (``{"key": "a", "value": 1}``) is given as a record line:
``{"value": {"key": "a", "value": 1}}``. A record line with a member of the wrong type or out of
range is refused (``UsageError``, exit 2) naming the file, the line number and what is wrong.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from streamops.exceptions import UsageError
from streamops.job import Generated, Job, Record, Reject, key_or_reject, topic_records
from streamops.state.oracle import Expected, fold_input, timed_items
from streamops.stream_time import LATE, MAX_TS, is_late

#: the members a record line may have (``value`` is required)
RECORD_MEMBERS = frozenset({"topic", "partition", "key", "timestamp", "value"})
#: how many bad lines a refusal names (it counts the rest)
SHOWN_LINES = 5
#: ``app lint`` warns when its sample makes more than this share of its records late (DLQ reason
#: ``late``). The demo apps' generators make 1-3% of their samples late on purpose; input read in
#: the wrong order (exported partition by partition, then placed again by key) makes far more.
LATE_SHARE = 0.05

#: what ``place`` takes: (topic, partition or None, key, value, Kafka timestamp ms or None)
Placeable = tuple[str, int | None, bytes | None, bytes | None, int | None]


def place(items: Iterable[Placeable], partitions: int) -> list[Record]:
    """The items as records, each in its own partition if it names one, else where a producer puts
    it (a key by murmur2, keyless round-robin per topic); offsets count per partition in input order."""
    from streamops.kafka.produce import default_partition

    nxt: dict[tuple[str, int], int] = {}
    keyless: Counter[str] = Counter()
    out = []
    for topic, partition, key, value, ts in items:
        if partition is not None:
            p = partition
        elif key is None:
            p = keyless[topic] % partitions
            keyless[topic] += 1
        else:
            p = default_partition(key, partitions)
        offset = nxt.get((topic, p), 0)
        out.append(Record(topic, p, offset, key, value, ts))
        nxt[(topic, p)] = offset + 1
    return out


def sample_records(job_cls: type[Job], topics: str | Sequence[str], partitions: int, values: Iterable[Generated],
                   *, unread: Callable[[str], str] | None = None) -> list[Record]:
    """Sample records (``generate``'s shapes: ``(key, value)`` for the first of ``topics``, or
    ``(topic, key, value)``) as input records, placed as ``streamops produce`` places them.
    ``unread(topic)``: how a refusal of a record for another topic goes on (``topic_records``)."""
    names = [topics] if isinstance(topics, str) else list(topics)
    source = f"{getattr(job_cls, '__name__', 'the job')}.generate()"
    return place(((t, None, k, v, None) for t, k, v in topic_records(values, names, source=source, unread=unread)),
                 partitions)


# -- files ------------------------------------------------------------------------------------------
def file_records(job_cls: type[Job], app: str, topics: Sequence[str], partitions: int, given: Sequence[str]
                 ) -> list[Record]:
    """``--from-file [TOPIC=]F.jsonl`` (repeatable, read in the order given) as placed records of
    ``app`` (its input ``topics``, each with ``partitions``); a bad line is a ``UsageError``."""
    job = job_cls()
    items: list[Placeable] = []
    bad: list[str] = []
    for text in given:
        topic, sep, path = text.partition("=")
        if not (sep and topic in topics):
            topic, path = None, text
        for no, line in _lines(path):
            try:
                items.append(_item(job, app, topics, partitions, topic, line))
            except _BadLine as exc:
                bad.append(f"{path} line {no}: {exc}")
    if bad:
        shown = f", the first {SHOWN_LINES}" if len(bad) > SHOWN_LINES else ""
        raise UsageError(f"--from-file: {len(bad)} bad line{'s' if len(bad) > 1 else ''}{shown}:\n  "
                         + "\n  ".join(bad[:SHOWN_LINES]))
    return place(items, partitions)


def _lines(path: str) -> list[tuple[int, bytes]]:
    try:
        with open(path, "rb") as f:
            return [(no, ln.rstrip(b"\r\n")) for no, ln in enumerate(f, start=1) if ln.strip()]
    except OSError as exc:
        raise UsageError(f"--from-file {path}: {exc.strerror or exc}") from None


def record_line(line: bytes) -> dict[str, Any] | None:
    """The line's members if it is a record line (module docstring), else None (a plain line)."""
    if not line.lstrip().startswith(b"{"):
        return None
    try:
        obj = json.loads(line)
    except ValueError:  # not JSON, or not UTF-8: a plain value (the job may reject it)
        return None
    return obj if isinstance(obj, dict) and "value" in obj and obj.keys() <= RECORD_MEMBERS else None


_JOB_KEY = object()  # a line without a key member: keyed by the job's key()


class _BadLine(ValueError):
    """What is wrong with a line (the job's own exceptions are not caught as one)."""


def _item(job: Job, app: str, topics: Sequence[str], partitions: int, file_topic: str | None,
          line: bytes) -> Placeable:
    """One line as (topic, partition, key, value, timestamp); ``_BadLine`` says what is wrong."""
    rec = record_line(line)
    fields: dict[str, Any] = {} if rec is None else rec
    topic = _topic(app, topics, file_topic, fields.get("topic"), rec is None)
    if rec is None:
        value, key, partition, ts = line, _JOB_KEY, None, None
    else:
        value, partition, ts = _value(rec["value"]), _partition(rec, partitions, topic), _timestamp(rec)
        key = rec.get("key", _JOB_KEY)
        if not (key is None or key is _JOB_KEY or isinstance(key, str)):
            raise _BadLine(f"key must be a string or null (no key), got {json.dumps(key)}")
        key = key.encode() if isinstance(key, str) else key
    if key is _JOB_KEY:
        key = _job_key(job, topic, value, ts)
    return topic, partition, key, value, ts


def _topic(app: str, topics: Sequence[str], file_topic: str | None, named: Any, plain: bool) -> str:
    if named is not None:
        if not isinstance(named, str) or named not in topics:
            raise _BadLine(f"topic {json.dumps(named)} is not an input topic of {app} (it reads "
                             f"{', '.join(topics)})")
        if file_topic is not None and named != file_topic:
            raise _BadLine(f"topic {named!r}, but the file was given as {file_topic}=: drop one of them")
        return named
    if file_topic is not None:
        return file_topic
    if len(topics) == 1:
        return topics[0]
    what = "a plain line (the value alone)" if plain else "a record line without \"topic\""
    raise _BadLine(f"{what} for {app}, which reads several topics ({', '.join(topics)}): give --from-file "
                     f"TOPIC=F.jsonl for each topic to feed, or give the line its \"topic\"")


def _partition(rec: dict[str, Any], partitions: int, topic: str) -> int | None:
    p = rec.get("partition")
    if p is None:
        return None
    if not _whole(p) or not 0 <= p < partitions:
        raise _BadLine(f"partition {json.dumps(p)} is not a partition of {topic}: the app's input_partitions is "
                         f"{partitions} (0 to {partitions - 1})")
    return p


def _timestamp(rec: dict[str, Any]) -> int | None:
    ts = rec.get("timestamp")
    if ts is None:
        return None
    if not _whole(ts) or not 0 <= ts <= MAX_TS:
        raise _BadLine(f"timestamp {json.dumps(ts)} is not epoch milliseconds (a whole number from 0 to {MAX_TS})")
    return ts


def _value(value: Any) -> bytes | None:
    if value is None or isinstance(value, str):
        return None if value is None else value.encode()
    return json.dumps(value, separators=(",", ":")).encode()


def _whole(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool)


def _job_key(job: Job, topic: str, value: bytes | None, ts: int | None) -> bytes | None:
    """What ``produce --from-file`` keys a value by: the job's key for it (None: the job rejects it)."""
    parsed = job.parse(Record(topic, -1, -1, None, value, ts))
    key = parsed if isinstance(parsed, Reject) else key_or_reject(job, parsed)
    return None if isinstance(key, Reject) else key.encode()


# -- lateness ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Lateness:
    """How many of the sample's records the job sends to the DLQ as ``late``."""

    late: int
    records: int
    grace_ms: int | None  # the job's (None: no stream time; its screen() calls them late)
    behind_ms: int | None  # the most a late record is behind its partition's stream time (stream time only)

    @property
    def share(self) -> float:
        return self.late / self.records if self.records else 0.0

    def warns(self) -> bool:
        return self.share > LATE_SHARE

    def detail(self) -> str:
        head = (f"{self.late:,} of {self.records:,} records ({self.share:.1%}) are late (DLQ reason 'late'), "
                f"more than the {LATE_SHARE:.0%} lint expects of a sample")
        if self.grace_ms is None:
            return (f"{head}: the job's screen() calls them late. Is the input in the order it will be read in, "
                    f"each partition's records in time order?")
        return (f"{head}: each partition's records are read in input order, and a record more than grace_ms = "
                f"{self.grace_ms:,} ms behind its partition's stream time is late; these are up to "
                f"{self.behind_ms or 0:,} ms behind. Lines in partition order rather than time order do that when "
                f"lint places them by key (a line without \"partition\"): give each line its \"partition\" (and "
                f"\"topic\") as read from Kafka, or sort the lines by time. If the input is really that late, "
                f"grace_ms is too short for it")


def lateness(job_cls: type[Job], records: Sequence[Record]) -> Lateness:
    """The late records of the sample, as ``check``'s fold (and the app) would reject them."""
    late = {where for where, reason in fold_input(job_cls, records).rejected.items() if reason == LATE}
    behind = None
    if late and job_cls.has_time():
        items, _wm = timed_items(job_cls(), records, Expected(), None)
        behind = max((i.stream_time - i.ts for evs in items.values() for i in evs
                      if i.where in late and i.stream_time is not None and is_late(i, job_cls.grace_ms or 0)),
                     default=None)
    return Lateness(len(late), len(records), job_cls.grace_ms, behind)
