"""The output topic's keys for ``streamops verify``: what the state store emits (``emitted``), and
which output keys it explains (*compared*), which it no longer does (*expired*, checked for form
against the ``OutputShape`` learned from ``emit``) and which fail that check (*malformed*):
``split_output``, and ``split_job_output`` for a declared job."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamops.state.verify.topics import TopicRead


def emitted(job_cls: Any, states: dict[str, Any]) -> dict[str, Any]:
    """The output a job's states emit, per output key, as the output topic's JSON reads back."""
    from streamops.job import JsonSerde

    job, js = job_cls(), JsonSerde()
    return {okey: js.loads(js.dumps(v)) for k, s in states.items() for okey, v in job.emit(k, s).items()}


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

