"""The shape of a declared job as its checkpoint records it (``checkpoints.compat``): what the
state depends on, known from the declaration alone, before any query is built."""

from __future__ import annotations

from streamops.checkpoints import compat
from streamops.job import Job


def input_scans(job_cls: type[Job]) -> int:
    """Scans of the input in the job's query plan (Spark keeps one offsets entry per scan): an
    aggregate job's plan reads it for the aggregation and for its rejected records' lane."""
    return 2 if job_cls.is_aggregate() else 1


def job_shape(job_cls: type[Job]) -> compat.JobShape:
    """The shape of the declared job, as its checkpoint records it."""
    return compat.shape_of(job_cls, sources=input_scans(job_cls))
