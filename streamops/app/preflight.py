"""What every driver start and every deploy checks before anything starts: the job still fits the
app's checkpoint (``checkpoints.compat``) and the checkpoint, its last batch marker and the input
still belong together (``checkpoints.lineage``). Facts of the app and its declaration only: a
deploy request runs these checks without the Spark runtime."""

from __future__ import annotations

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.marker import last_marker
from streamops.app.shape import job_shape
from streamops.checkpoints import compat, layout, lineage
from streamops.job import Job
from streamops.kafka.admin import end_offsets
from streamops.kafka.config import KafkaConfig
from streamops.kafka.exceptions import TopicNotFoundError
from streamops.settings import Settings
from streamops.spec import AppSpec


def preflight(settings: Settings, spec: AppSpec, job_cls: type[Job], kafka: KafkaConfig) -> None:
    """Before any Spark session (every driver start) and before deploy changes anything: the job
    must fit its checkpoint (``checkpoints.compat``), and ``check_lineage``."""
    compat.gate(spec.name, checkpoint_dir(settings, spec), job_shape(job_cls))
    check_lineage(settings, spec, kafka)


def check_lineage(settings: Settings, spec: AppSpec, kafka: KafkaConfig) -> None:
    """The last committed batch marker must be about the checkpoint, and the input must still
    hold what the checkpoint read (``checkpoints.lineage``): at every driver start, and at every
    restart of its query (a broker that lost a committed batch while the driver ran)."""
    ckpt = checkpoint_dir(settings, spec)
    lineage.check(spec.name, ckpt, lambda: last_marker(kafka, spec.commits_topic, spec.name))
    if layout.last_committed_batch(ckpt) is not None:  # the input must still hold what the checkpoint read
        highs: dict[str, dict[int, int]] = {}
        for t in spec.input_topics:
            try:
                highs[t] = {p: hi for p, (_lo, hi) in end_offsets(kafka, t).items()}
            except TopicNotFoundError:
                highs[t] = {}
        lineage.check_input(spec.name, ckpt, highs)
