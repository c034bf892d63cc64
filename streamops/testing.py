"""Helpers for a job's own unit tests, without Kafka or Spark (``streamops new-app`` scaffolds a test
that uses them).

A job's tests should depend on the job API and this module only: the lint checks and the
plain-Python fold live in internal modules (``streamops.state``) that may change shape between
releases, so this module is the stable front for them. ``assert_job_sound`` runs the checks of
``streamops app lint --no-spark``; ``fold`` gives what ``streamops check`` expects the app to hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from streamops.job import Job, Record
from streamops.state import lint as _lint
from streamops.state import oracle as _oracle
from streamops.state import sample_watermark as _sample_watermark

#: what a job must hold after some input: ``states`` (per key, after ``expire``), ``output``
#: (latest value per output key, as JSON reads it), ``rejected`` ({(topic, partition, offset):
#: DLQ reason}) and ``records`` (how many were read)
Folded = _oracle.Expected
#: the checks' outcome: ``ok``, and ``checks`` (each with ``name``, ``ok`` and ``detail``)
LintReport = _lint.LintReport

__all__ = ["Folded", "LintReport", "SampleWatermark", "assert_job_sound", "fold", "sample_records", "watermark"]


def sample_records(job_cls: type[Job], *, topic: str = "input", partitions: int = 4, events: int = 2000,
                   seed: int = 0) -> list[Record]:
    """The job's ``generate(events, seed)`` as input records, spread over partitions by key as a
    producer would (the sample ``streamops app lint`` uses)."""
    return _lint.sample_records(job_cls, topic, partitions, job_cls().generate(events, seed))


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
