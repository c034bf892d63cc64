"""What ``reprocess`` and ``promote`` return (``streamops.results``): their plans, and the plans
with what a run did. The CLI renders them and ``--json`` prints their documents; an Airflow task
returns the document as its XCom.

A reprocess plan's document is also the run's record: the ``launched`` step journals it, the
run's pending carries it to the waiter (``watch_run`` reads ``start``, ``stop`` and ``checkpoint``
from it there), and the step resumed reads it back (``ReprocessPlan.from_dict``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from streamops.results import Result, absent

#: {topic: {partition: offset}}, partitions as strings (the JSON the ledger and the driver read)
Offsets = dict[str, dict[str, int]]


@dataclass(frozen=True)
class ReprocessPlan(Result):
    """What a reprocess would do: per partition (``offsets`` rows: topic, partition, from, to,
    records) the range it reads, the identity (``run_as``) and versioned topics it runs under,
    whether it ``continues`` the state of the range that ended where it starts, and ``warnings``
    (records the broker deleted may have been in the range). ``frm`` is the document's ``from``."""

    app: str
    run_as: str
    output_version: str
    frm: str
    to: str
    output_topic: str
    changelog_topic: str
    dlq_topic: str
    offsets: list[dict[str, Any]]
    records: int
    start: Offsets
    stop: Offsets
    checkpoint: str
    continues: bool
    live_output_topic: str
    max_offsets_per_trigger: int | None
    warnings: list[str]

    def to_dict(self) -> dict[str, Any]:
        """The document: ``frm`` under its key ``from`` (a keyword in Python), in its place."""
        return {"from" if k == "frm" else k: v for k, v in super().to_dict().items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return super().from_dict({"frm" if k == "from" else k: v for k, v in data.items()})


@dataclass(frozen=True)
class ReprocessDryRun(ReprocessPlan):
    """The plan of ``--dry-run``: nothing ran."""

    dry_run: bool = True


@dataclass(frozen=True)
class ReprocessResult(ReprocessPlan):
    """The plan (the one the run was launched with, when resumed) and what the run did. Its own
    type rather than ``absent()`` fields on the dry run's: a run over an empty range has no rate
    (``records_per_second``) and may have no ``batches``, and its document still holds both, null."""

    dry_run: bool
    operation_id: int
    seconds: float
    records_per_second: float | None
    batches: int | None


@dataclass(frozen=True)
class WaitingRun(Result):
    """A reprocess run handed over to a waiter elsewhere (``waiting_run``): its operation and who
    asked for it (an Airflow task's ``airflow:DAG/RUN/TASK``), to tell whether that waiter is gone."""

    operation_id: int
    requested_by: str | None


@dataclass(frozen=True)
class PromotePlan(Result):
    """What a promote would do: the output version and topic before and after, the records in the
    version promoted, whether the app runs (it is restarted then), and the steps as ``actions``."""

    app: str
    output_version_before: str | None
    output_version_after: str | None
    output_topic_before: str
    output_topic_after: str
    records_in_topic: int
    running: bool
    noop: bool
    actions: list[str]


@dataclass(frozen=True)
class PromoteResult(PromotePlan):
    """The plan (made again once the app stopped, for a run), whether only a dry run, and the
    operation that carried it out (none for a dry run or a promote to the version written now)."""

    dry_run: bool = False
    operation_id: int | None = absent()
