"""Helpers for a job's own unit tests, without Kafka or Spark (``streamops new-app`` scaffolds a test
that uses them).

A job's tests should depend on the job API and this module only: the lint checks and the
plain-Python fold live in internal modules (``streamops.state``) that may change shape between
releases, so this module is the stable front for them. ``assert_job_sound`` runs the checks of
``streamops app lint --no-spark``; ``fold`` gives what ``streamops check`` expects the app to hold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from streamops.job import Job, Record
from streamops.spec import AppSpec
from streamops.state import lint as _lint
from streamops.state import oracle as _oracle
from streamops.state import sample as _sample
from streamops.state import sample_watermark as _sample_watermark

#: what a job must hold after some input: ``states`` (per key, after ``expire``), ``output``
#: (latest value per output key, as JSON reads it), ``rejected`` ({(topic, partition, offset):
#: DLQ reason}) and ``records`` (how many were read)
Folded = _oracle.Expected
#: the checks' outcome: ``ok``, and ``checks`` (each with ``name``, ``ok`` and ``detail``)
LintReport = _lint.LintReport

__all__ = ["Folded", "LintReport", "SampleWatermark", "assert_job_sound", "fold", "sample_records", "watermark"]


def sample_records(job_cls: type[Job], *, topic: str = "input", topics: Sequence[str] | None = None,
                   app: str | AppSpec | None = None, partitions: int | None = None, events: int = 2000,
                   seed: int = 0) -> list[Record]:
    """The job's ``generate(events, seed)`` as input records, each on its topic, keyed and spread
    over ``partitions`` as ``streamops produce`` spreads them (the sample ``streamops app lint`` uses).

    The topics: ``topics`` (a job reading several, e.g. ``topics=("orders", "prices")``; a
    ``(key, value)`` pair goes to the first), else the input topics of ``app`` (a name in the
    checkout's ``include/streams.yaml``, or its ``AppSpec``; ``partitions`` defaults to its
    ``input_partitions``), else ``topic`` alone. ``partitions`` defaults to 4. A record for a topic
    not among them raises ``JobDeclarationError`` naming the topics it was given."""
    if sum((topic != "input", topics is not None, app is not None)) > 1:
        raise TypeError("sample_records: give one of topic, topics and app")
    spec = _app_spec(app) if app is not None else None
    if spec is not None:
        names: Sequence[str] = spec.input_topics
        unread = _not_read_by(spec)
    elif topics is not None:
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            raise ValueError("sample_records: topics must name at least one topic")
        unread = _not_given(job_cls, names, "topics=")
    else:
        names = [topic]
        unread = _not_given(job_cls, names, "topic=")
    n = partitions if partitions is not None else spec.input_partitions if spec is not None else 4
    return _sample.sample_records(job_cls, names, n, job_cls().generate(events, seed), unread=unread)


def _app_spec(app: str | AppSpec) -> AppSpec:
    from streamops.settings import Settings
    from streamops.spec import default_spec_path, get_app, load_specs

    return app if isinstance(app, AppSpec) else get_app(load_specs(default_spec_path(Settings.from_env().repo)), app)


def _not_read_by(spec: AppSpec) -> Callable[[str], str]:
    return lambda _topic: f"which app {spec.name} does not read (its input topics: {', '.join(spec.input_topics)})"


def _not_given(job_cls: type[Job], names: Sequence[str], how: str) -> Callable[[str], str]:
    """How the refusal of a record for a topic that is not in ``names`` goes on: the topics given, and
    the topics of the apps that run this job (``include/streams.yaml``), when the checkout has one."""
    def unread(_topic: str) -> str:
        given = f"{how}{names[0]!r}" if how == "topic=" else f"{how}{tuple(names)!r}"
        return (f"which is not among the topics sample_records was given ({given}){_readers(job_cls)}: pass "
                f"topics=(...) naming every topic the job reads, or app=NAME for its app's input topics")

    return unread


def _readers(job_cls: type[Job]) -> str:
    """``"; app X reads a, b"`` for each app of the checkout that runs ``job_cls``'s module ("" when none)."""
    from streamops.settings import Settings
    from streamops.spec import default_spec_path, load_specs

    try:
        specs = load_specs(default_spec_path(Settings.from_env().repo))
    except Exception:  # noqa: BLE001 - only a hint: a checkout without a readable spec has none
        return ""
    apps = [s for s in specs.values() if s.job == job_cls.__module__]
    return "".join(f"; app {s.name} reads {', '.join(s.input_topics)}" for s in apps)


def assert_job_sound(job_cls: type[Job], records: Sequence[Record] | None = None) -> LintReport:
    """Run the lint checks that need no Spark (declaration, parse, serde round trip, batch split)
    on ``records`` (default: ``sample_records(job_cls)``); raise ``AssertionError`` naming each
    failed check, else return the report."""
    report = _lint.lint(job_cls, list(sample_records(job_cls) if records is None else records))
    if not report.ok:
        raise AssertionError(_lint.render(report))
    return report


def fold(job_cls: type[Job], records: Iterable[Record]) -> Folded:
    """The plain-Python fold of ``records`` in input order: the states, output and DLQ reasons the
    app must hold after reading them (what ``streamops check`` compares the running app with)."""
    return _oracle.fold_input(job_cls, records)


#: a sample's watermark: ``describe()`` says which partition holds it and what ``idle_timeouts`` change
SampleWatermark = _sample_watermark.SampleWatermark


def watermark(job_cls: type[Job], records: Sequence[Record], *, partitions: int,
              topics: Sequence[str] | None = None, idle_timeouts: dict[str, str] | None = None) -> SampleWatermark:
    """A job with stream time: the watermark ``records`` give over ``partitions`` partitions of each
    of ``topics`` (default: the records' topics), which partition holds it, and with the spec's
    ``idle_timeouts`` what releasing that partition would change (what ``app lint`` reports)."""
    names = sorted({r.topic for r in records}) if topics is None else list(topics)
    return _sample_watermark.sample_watermark(job_cls, records, [(t, p) for t in names for p in range(partitions)],
                                              idle_timeouts)
