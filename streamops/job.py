"""The job API: what a streaming job declares, and nothing the platform can derive.

A job is a subclass of ``Job`` in a file under ``jobs/`` named by its spec entry
(``include/streams.yaml``: ``job: jobs.page_stats``). It states what only its author knows:

- how an input record is parsed and validated: ``parse(record) -> event | Reject(reason)``;
- the key of an event: ``key(event) -> str`` (the state is kept per key);
- the state: ``initial(key)``, a pure ``update(key, state, events) -> state`` and the
  ``state_serde`` that writes it to the changelog (default: canonical JSON);
- what goes to the output: ``emit(key, state) -> {output key: JSON value}`` (default: the state
  itself under its key), which need not equal the state.

Optional: ``screen(key, state, event)`` rejects an event given the state before it (``late``
records of an event-time window), ``expire(key, state)`` drops what the state no longer needs
(closed windows; None deletes the key), ``generate(events, seed)`` makes sample input for
``streamops produce`` and for ``streamops app lint``: ``(key, value)`` pairs for the app's first
input topic or ``(topic, key, value)`` triples for any of them; keyword-only options it declares
(``users``, ``bad_ratio``, ``skew``) are what ``produce --users/--bad-ratio/--skew`` set.

Instead of ``initial``/``update`` a job may declare a Spark-native grouped aggregation:
``aggregate = {"field": Sum() | Max() | Min(), ...}`` with ``contribute(event) -> {field: value}``.
The platform then runs ``groupBy(key).agg(...)`` in Spark and folds the same fields in Python for
``check``; the state is the dict of fields. ``parse_arrow`` may add a vectorized parser for such a
job (it must give the rows ``parse`` + ``contribute`` would; ``streamops app lint`` compares them).

From this declaration the platform derives the Kafka source and sink, the DLQ (reason and source
coordinates in headers), the changelog (the serialized state, a tombstone when ``expire`` deletes
a key), the exactly-once commit, ``check``'s oracle (``update`` folded in plain Python),
``verify``, seeding for rebuild-state and compaction, warm-ups, reset and reprocess.
``docs/writing-a-job.md`` walks through a job from nothing.

Time (docs/writing-a-job.md, "Time"): a job that sets ``grace_ms`` has stream time
(``streamops.stream_time``). An event's time is ``timestamp(event)`` (default: the Kafka record's
timestamp); each input partition's stream time is the largest event time it has shown so far; an
event more than ``grace_ms`` behind its partition's stream time goes to the DLQ as ``late``. Such
a job may keep event-time timers in its state: ``timers(key, state)`` lists them and
``on_timer(key, state, ts)`` fires one, once stream time reaches it, also for a key that gets no
more events. The result depends on the input alone, never on how it is cut into batches.

Named state (``streamops.named_state``, docs/writing-a-job.md "Named state"): a job that declares
``state_values = {"pages": MapOf(ttl_ms=...), "visits": Value()}`` sees its state as a dict of those
parts as before, but each part is stored and written to the changelog on its own (a map entry by
entry), so a batch writes what it changed, not the whole state.

Order: per key, Spark hands ``update`` (and ``screen``) a micro-batch's events sorted by
(topic, partition, offset), batch after batch; ``check`` folds all of a key's events sorted the
same way. The two agree when one key's events come from one partition of one topic. Jobs whose
result depends on order (``screen``) need their input keyed by the job's key so that it does
(Kafka's default partitioner keeps one key in one partition).
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

from streamops.exceptions import StreamopsError

E = TypeVar("E")
S = TypeVar("S")
T = TypeVar("T")


class JobDeclarationError(StreamopsError):
    """A job class is incomplete or inconsistent.

    Operator action: add or fix the piece the message names (docs/writing-a-job.md lists them).
    """


@dataclass(frozen=True, slots=True)
class Record:
    """One input record as ``parse`` sees it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Reject:
    """``parse`` (or ``screen``) refuses a record: it goes to the DLQ with this reason."""

    reason: str


class Serde(Protocol[T]):
    """How a state is written to the changelog and read back; ``loads(dumps(s)) == s``."""

    def dumps(self, value: T) -> bytes: ...

    def loads(self, data: bytes) -> T: ...


class JsonSerde:
    """Canonical JSON: sorted keys, no spaces, ASCII. Tuples read back as lists and sets are not
    JSON; keep such state in lists (``streamops app lint`` catches a state that does not round-trip)."""

    # one encoder for every call: ``json.dumps`` with options builds a new one each time, which
    # costs as much as encoding a small state
    _encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False).encode

    def dumps(self, value: Any) -> bytes:
        return self._encode(value).encode("ascii")

    def loads(self, data: bytes) -> Any:
        return json.loads(data)


# -- parsing helpers ---------------------------------------------------------------------------------
def json_object(value: bytes | None) -> dict[str, Any] | Reject:
    """A record value that must be one JSON object: the object, or ``Reject("invalid_json")`` /
    ``Reject("not_an_object")`` (what most ``parse`` methods check first)."""
    try:
        obj = json.loads(value or b"")
    except (UnicodeDecodeError, ValueError, RecursionError):
        return Reject("invalid_json")
    return obj if isinstance(obj, dict) else Reject("not_an_object")


def is_int(value: Any, low: int, high: int) -> bool:
    """An integer (not a bool, not a float) within [low, high]."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def is_text(value: Any) -> bool:
    """A non-empty string."""
    return isinstance(value, str) and value != ""


# -- native grouped aggregation ------------------------------------------------------------------
SparkType = Literal["long", "double"]


@dataclass(frozen=True, slots=True)
class AggField:
    """One field of a native aggregation: Spark's ``F.<kind>`` and the same fold in Python.
    None (SQL NULL) contributes nothing; a field nothing contributed to is None for max/min, 0 for sum."""

    kind: Literal["sum", "max", "min"]
    type: SparkType = "long"

    def merge(self, acc: Any, value: Any) -> Any:
        if value is None:
            return acc
        if acc is None:
            return value
        if self.kind == "sum":
            return acc + value
        return max(acc, value) if self.kind == "max" else min(acc, value)

    def identity(self) -> Any:
        return (0 if self.type == "long" else 0.0) if self.kind == "sum" else None


def Sum(type: SparkType = "long") -> AggField:
    return AggField("sum", type)


def Max(type: SparkType = "long") -> AggField:
    return AggField("max", type)


def Min(type: SparkType = "long") -> AggField:
    return AggField("min", type)


# -- the job ---------------------------------------------------------------------------------------
class Job(Generic[E, S]):
    """Subclass and declare (see the module docstring). Instances are stateless and cheap: the
    platform makes one per process (driver, executors, CLI) with ``Job()``."""

    #: the key's column name in state tables and reports (e.g. ``user_id``)
    key_name: ClassVar[str] = "key"
    #: how the state is written to the changelog (default canonical JSON)
    state_serde: ClassVar[Serde[Any]] = JsonSerde()
    #: raise it when the serialized state changes shape: a checkpoint written with another version
    #: is refused at deploy (``checkpoints.compat``) instead of being read by the wrong serde
    state_version: ClassVar[int] = 1
    #: a native grouped aggregation instead of ``initial``/``update`` (see module docstring)
    aggregate: ClassVar[Mapping[str, AggField] | None] = None
    #: how far (ms) an event may be behind its input partition's stream time before it is ``late``;
    #: None: the job has no stream time (no lateness, no timers)
    grace_ms: ClassVar[int | None] = None
    #: "stream_time": a key's timers fire by its partition's stream time at its events, and by the
    #: watermark; "watermark": only by the watermark, and ``update`` gets ``stream_time.Timed``
    #: items (event, time, source coordinates) to order itself: what jobs over several inputs in
    #: event-time order build on (``streamops.joins``)
    fire_timers_by: ClassVar[Literal["stream_time", "watermark"]] = "stream_time"
    #: named state (``streamops.named_state``): the state is a dict of these names, each stored and
    #: written to the changelog on its own (a map entry by entry); None: one state, ``state_serde``
    state_values: ClassVar[Mapping[str, Any] | None] = None

    # required ----------------------------------------------------------------------------------
    def parse(self, record: Record) -> E | Reject:
        raise NotImplementedError

    def key(self, event: E) -> str:
        raise NotImplementedError

    def initial(self, key: str) -> S:
        """The state of a key before its first event (named state: every name empty)."""
        if self.state_values is not None:
            from streamops import named_state

            return named_state.initial(self.state_values)  # type: ignore[return-value]
        raise NotImplementedError

    def update(self, key: str, state: S, events: Sequence[E]) -> S:
        """The key's new state. (The platform never uses a state again once it handed it to
        ``update`` or ``on_timer``: they may change it in place and return it.)"""
        raise NotImplementedError

    # with defaults -------------------------------------------------------------------------------
    def emit(self, key: str, state: S) -> Mapping[str, Any]:
        """Output records for a key's state: {output key: JSON-able value}. Default: the state."""
        return {key: state}

    # optional ----------------------------------------------------------------------------------
    def screen(self, key: str, state: S, event: E) -> str | None:
        """A reason to reject ``event`` given the key's state before it (e.g. ``"late"``)."""
        return None

    def expire(self, key: str, state: S) -> S | None:
        """The state without what it no longer needs, after its output is emitted; None deletes it."""
        return state

    def timestamp(self, event: E) -> int:
        """The event's time, epoch ms (jobs with ``grace_ms``). Default: the Kafka record's timestamp."""
        raise NotImplementedError

    def timers(self, key: str, state: S) -> Iterable[int]:
        """The event-time timers (epoch ms) the state has pending; each fires once stream time
        reaches it. Timers live in the state, so every operation on the state carries them."""
        return ()

    def on_timer(self, key: str, state: S, ts: int) -> S:
        """The state after its timers at ``ts`` fired; ``timers`` of it must hold none at or before ``ts``."""
        raise NotImplementedError

    def contribute(self, event: E) -> Mapping[str, Any]:
        """For ``aggregate`` jobs: the event's value for each field (None: no contribution)."""
        raise NotImplementedError

    def generate(self, events: int, seed: int) -> Iterator[Generated]:
        """``events`` sample input records, deterministic for a seed: ``(key, value)`` for the
        app's first input topic or ``(topic, key, value)``. It may take keyword-only options
        (what ``streamops produce`` passes when given): ``users`` an int >= 1, ``bad_ratio`` a float
        in [0, 1], ``skew`` the string as typed (``"zipf:1.2"``), which ``generate`` parses itself."""
        raise NotImplementedError

    #: optional vectorized parser for ``aggregate`` jobs: pyarrow RecordBatch of the Kafka columns
    #: (key, value, topic, partition, offset, timestamp) -> batches of the rows
    #: ``streamops.arrow.parsed_arrow_schema(job_cls)`` states; records it cannot parse it hands to
    #: ``parse`` by returning them in ``leftover``.
    parse_arrow: ClassVar[Any] = None

    # what the platform asks ----------------------------------------------------------------------
    @classmethod
    def overrides(cls, name: str, base: type | None = None) -> bool:
        """Whether this job class defines ``name`` itself (not only the default of ``base``, ``Job``)."""
        return getattr(cls, name) is not getattr(base or Job, name)

    @classmethod
    def is_aggregate(cls) -> bool:
        return cls.aggregate is not None

    @classmethod
    def has_screen(cls) -> bool:
        return cls.overrides("screen")

    @classmethod
    def has_expire(cls) -> bool:
        return cls.overrides("expire")

    @classmethod
    def check_declaration(cls) -> None:
        """What a base class built on ``Job`` (``streamops.windows``) requires of its subclasses."""

    @classmethod
    def has_time(cls) -> bool:
        return cls.grace_ms is not None

    @classmethod
    def has_timers(cls) -> bool:
        return cls.overrides("on_timer") or bool(cls.ttl_maps())

    @classmethod
    def has_named_state(cls) -> bool:
        return cls.state_values is not None

    @classmethod
    def ttl_maps(cls) -> list:
        """The named state's maps with a TTL (their expiry is a timer, ``stream_time.fire``)."""
        from streamops import named_state

        return named_state.ttl_maps(cls.state_values) if cls.state_values else []

    @classmethod
    def can_generate(cls) -> bool:
        return cls.overrides("generate")

    @classmethod
    def generate_options(cls) -> tuple[str, ...]:
        """The keyword options ``generate`` takes besides ``events`` and ``seed`` (``("*",)``: any)."""
        params = list(inspect.signature(cls.generate).parameters.values())[3:]  # self, events, seed
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return ("*",)
        return tuple(p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


#: what ``generate`` yields: ``(key, value)`` for the first input topic, or ``(topic, key, value)``
Generated = tuple[bytes | None, bytes] | tuple[str, bytes | None, bytes]


#: the platform's reason for an event whose ``key`` UTF-8 cannot encode (a lone surrogate, from a
#: JSON escape such as ``"\ud800"``): Kafka keys, Arrow's strings and the state store hold UTF-8
BAD_KEY = "bad_key"


def key_or_reject(job: Job, event: Any) -> str | Reject:
    """``job.key(event)``, or ``Reject(BAD_KEY)`` for a key that is not UTF-8 text: such a key used
    to fail its micro-batch, and so the app, for ever. Every place that keys parsed events (the
    executors' parse, ``check``'s fold, ``app lint``, ``produce``) goes through here."""
    key = job.key(event)
    if isinstance(key, str):
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            return Reject(BAD_KEY)
    return key


def topic_records(items: Iterable[Generated], topics: Sequence[str], *, source: str = "generate()",
                  unread: Callable[[str], str] | None = None) -> Iterator[tuple[str, bytes | None, bytes]]:
    """``generate``'s records as ``(topic, key, value)``: a pair goes to ``topics[0]``; a triple
    must name one of ``topics`` (else ``JobDeclarationError``, naming the record and, by default,
    ``topics`` as the app's input topics; ``unread(topic)`` words the rest of it when ``topics`` are
    not an app's, e.g. the ones a test gave ``streamops.testing.sample_records``)."""
    default, known = topics[0], set(topics)
    for i, item in enumerate(items):
        if isinstance(item, tuple) and len(item) == 2:
            yield default, item[0], item[1]
        elif isinstance(item, tuple) and len(item) == 3 and item[0] in known:
            yield item
        elif isinstance(item, tuple) and len(item) == 3:
            rest = (unread(item[0]) if unread is not None else
                    f"which the app does not read (its input topics: {', '.join(topics)})")
            raise JobDeclarationError(f"{source} record {i} is for topic {item[0]!r}, {rest}")
        else:
            raise JobDeclarationError(f"{source} record {i} must be (key, value) or (topic, key, value), "
                                      f"got {type(item).__name__}{f' of {len(item)}' if isinstance(item, tuple) else ''}")


def validate_job(cls: type) -> type[Job]:
    """The declaration is complete and consistent, or ``JobDeclarationError`` naming what is not."""
    if not (isinstance(cls, type) and issubclass(cls, Job)) or cls is Job:
        raise JobDeclarationError(f"{cls!r} is not a subclass of streamops.job.Job")
    name = cls.__name__
    missing = [m for m in ("parse", "key") if not cls.overrides(m)]
    if cls.aggregate is not None:
        if not isinstance(cls.aggregate, Mapping) or not cls.aggregate:
            raise JobDeclarationError(f"{name}.aggregate must be a non-empty mapping of field -> Sum()/Max()/Min()")
        bad = [f for f, a in cls.aggregate.items() if not isinstance(a, AggField) or not f.isidentifier()]
        if bad:
            raise JobDeclarationError(f"{name}.aggregate: {bad} must be identifiers mapped to Sum()/Max()/Min()")
        if cls.key_name in cls.aggregate:
            raise JobDeclarationError(f"{name}.aggregate has a field named like the key ({cls.key_name!r})")
        missing += [m for m in ("contribute",) if not cls.overrides(m)]
        both = [m for m in ("initial", "update", "screen", "expire", "timers", "on_timer") if cls.overrides(m)]
        if cls.grace_ms is not None:
            both.append("grace_ms")
        if both:
            raise JobDeclarationError(f"{name} declares aggregate and also {', '.join(both)}: a native aggregation "
                                      f"folds its fields itself; drop one or the other")
    else:
        missing += [m for m in ("initial", "update") if not cls.overrides(m)
                    and not (m == "initial" and cls.state_values is not None)]
        if cls.parse_arrow is not None:
            raise JobDeclarationError(f"{name}.parse_arrow is for aggregate jobs only")
    if missing:
        raise JobDeclarationError(f"{name} does not define {', '.join(missing)} "
                                  f"(required: parse, key, and initial + update or aggregate + contribute)")
    if cls.grace_ms is not None and not (isinstance(cls.grace_ms, int) and not isinstance(cls.grace_ms, bool)
                                         and cls.grace_ms >= 0):
        raise JobDeclarationError(f"{name}.grace_ms must be a whole number of milliseconds >= 0 (or None: no "
                                  f"stream time), got {cls.grace_ms!r}")
    if cls.overrides("timers") != cls.overrides("on_timer"):
        raise JobDeclarationError(f"{name} declares {'timers' if cls.overrides('timers') else 'on_timer'} without "
                                  f"{'on_timer' if cls.overrides('timers') else 'timers'}: timers(key, state) lists a "
                                  f"state's timers and on_timer(key, state, ts) fires one; declare both")
    if cls.overrides("on_timer") and cls.grace_ms is None:
        raise JobDeclarationError(f"{name} has timers but no stream time: set grace_ms (0 for none) so timers "
                                  f"fire as stream time passes them")
    if cls.fire_timers_by not in ("stream_time", "watermark"):
        raise JobDeclarationError(f"{name}.fire_timers_by must be 'stream_time' or 'watermark', got "
                                  f"{cls.fire_timers_by!r}")
    if cls.fire_timers_by == "watermark" and (not cls.overrides("on_timer") or cls.overrides("screen")):
        raise JobDeclarationError(f"{name}: fire_timers_by = 'watermark' is for jobs that order their events "
                                  f"themselves with timers (declare timers and on_timer, not screen)")
    if cls.overrides("timestamp") and cls.grace_ms is None:
        raise JobDeclarationError(f"{name}.timestamp has no effect without grace_ms (0 for no grace)")
    if cls.state_values is not None:
        _check_state_values(cls)
    serde = cls.state_serde
    if not (callable(getattr(serde, "dumps", None)) and callable(getattr(serde, "loads", None))):
        raise JobDeclarationError(f"{name}.state_serde must have dumps(state) -> bytes and loads(bytes) -> state")
    if not isinstance(cls.key_name, str) or not cls.key_name.isidentifier():
        raise JobDeclarationError(f"{name}.key_name must be an identifier, got {cls.key_name!r}")
    cls.check_declaration()
    return cls


def _check_state_values(cls: type[Job]) -> None:
    from streamops import named_state as ns

    name, values = cls.__name__, cls.state_values
    if cls.aggregate is not None:
        raise JobDeclarationError(f"{name} declares aggregate and state_values: a native aggregation has its own state")
    if not isinstance(values, Mapping) or not values:
        raise JobDeclarationError(f"{name}.state_values must be a non-empty mapping of name -> Value()/ListOf()/MapOf()")
    bad = [n for n, k in values.items() if not (isinstance(n, str) and n.isidentifier())
           or not isinstance(k, (ns.Value, ns.ListOf, ns.MapOf))]
    if bad:
        raise JobDeclarationError(f"{name}.state_values: {bad} must be identifiers mapped to Value()/ListOf()/MapOf()")
    if type(cls.state_serde) is not JsonSerde:
        raise JobDeclarationError(f"{name}: named state is stored as JSON part by part; drop state_serde")
    for n, k in values.items():
        if isinstance(k, ns.MapOf) and k.ttl_ms is not None:
            if not (isinstance(k.ttl_ms, int) and k.ttl_ms >= 0 and callable(k.time)):
                raise JobDeclarationError(f"{name}.state_values[{n!r}]: a TTL needs ttl_ms >= 0 and time(entry, "
                                          f"value) -> epoch ms, the entry's event time")
            if cls.grace_ms is None:
                raise JobDeclarationError(f"{name}.state_values[{n!r}] has a TTL but the job has no stream time: "
                                          f"set grace_ms (TTL counts stream time)")
        elif isinstance(k, ns.MapOf) and k.time is not None:
            raise JobDeclarationError(f"{name}.state_values[{n!r}]: time without ttl_ms has no effect")


def find_job(module: Any) -> type[Job]:
    """The one ``Job`` subclass a job module defines (imported ones do not count)."""
    found = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Job) and v is not Job
             and v.__module__ == module.__name__]
    if len(found) != 1:
        names = ", ".join(sorted(c.__name__ for c in found)) or "none"
        raise JobDeclarationError(f"{module.__name__} must define exactly one subclass of streamops.job.Job "
                                  f"(found {names})")
    return validate_job(found[0])


# -- the state as fields (aggregate jobs) ------------------------------------------------------
def fold_fields(fields: Mapping[str, AggField], state: Mapping[str, Any] | None,
                contributions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Python's fold of a native aggregation: what Spark's ``agg`` gives for these rows."""
    acc = {f: a.identity() for f, a in fields.items()} if state is None else dict(state)
    seen = state is not None
    for c in contributions:
        seen = True
        for f, a in fields.items():
            acc[f] = a.merge(acc[f], c.get(f))
    if not seen:
        return acc
    for f, a in fields.items():  # Spark's sum of only NULLs is NULL: we keep the identity
        if a.kind == "sum" and acc[f] is None:
            acc[f] = a.identity()
    return acc


def finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)
