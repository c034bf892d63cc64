"""The names an app is known by on the broker: its topics (as created when missing), its consumer
group, its transactional id, and every header name its records carry. One place for each, so the
driver that writes them and the tools that read them (check, verify, the DLQ digest, reset --undo)
cannot disagree."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: executors read the header names and load no Kafka admin
    from streamops.kafka.admin import TopicSpec
    from streamops.kafka.config import KafkaConfig
    from streamops.spec import AppSpec

# -- record headers (values are UTF-8 strings) --------------------------------------------------
#: a DLQ record's reason
H_REASON = "streamops.dlq.reason"
#: a DLQ record whose key or value was cut to fit one message: the original sizes (JSON)
H_TRUNCATED = "streamops.dlq.truncated"
#: every record a job writes carries the micro-batch that produced it
H_BATCH_ID = "streamops.batch_id"
#: records tied to one input record carry its position (the committer relies on it after a rewind)
H_SOURCE_TOPIC = "streamops.source.topic"
H_SOURCE_PARTITION = "streamops.source.partition"
H_SOURCE_OFFSET = "streamops.source.offset"

#: how the committer spreads keys over the output, changelog and DLQ partitions; anything that
#: writes records the app's readers treat as "latest per key" (reset --undo) must use the same
SINK_PARTITIONER = "consistent_random"


def consumer_group(app: str) -> str:
    """The consumer group that carries ``app``'s committed input offsets (``kafka-consumer-groups
    --describe --group APP``). Reserved for the app: a consumer that joins it would make the
    batch's offset commit, and so the batch, fail."""
    return app


def transactional_id(app: str) -> str:
    """The one transactional id every writer of ``app``'s batches uses (drivers, rewinds)."""
    return f"streamops-{app}"


def task_transactional_id(app: str, partition: int) -> str:
    """With ``commit_on: executors``: the transactional id of the writer of partition ``partition``
    of ``app``'s batches (``spark.kafka_writer``: the prefix ``transactional_id(app)``, then ``-pN``)."""
    return f"{transactional_id(app)}-p{partition}"


def task_group_prefix(app: str) -> str:
    """The name of ``app``'s task marker groups without their ``-pN`` (``spark.kafka_writer``)."""
    return f"_streamops-{app}-task"


def task_group(app: str, partition: int) -> str:
    """The consumer group whose offset on the commits topic is partition ``partition``'s task marker:
    the last batch that partition's writer committed (``commit.BatchCommitter.task_marker``)."""
    return f"{task_group_prefix(app)}-p{partition}"


def app_topic_specs(spec: AppSpec, *, ticks: bool = False) -> dict[str, TopicSpec]:
    """The topics an app reads and writes, as they are created when missing, by role (``ticks``:
    a job with stream time's, which its driver writes and reads back)."""
    from streamops.kafka.admin import TopicSpec

    compact = {"cleanup.policy": "compact"}
    specs = {
        **{f"input:{t}": TopicSpec(name=t, partitions=spec.input_partitions) for t in spec.input_topics},
        "output": TopicSpec(name=spec.live_output_topic, partitions=spec.input_partitions),
        "changelog": TopicSpec(name=spec.changelog_topic, partitions=spec.input_partitions, config=compact),
        "dlq": TopicSpec(name=spec.dlq_topic, partitions=spec.input_partitions),
        "commits": TopicSpec(name=spec.commits_topic, partitions=1, config=compact),
    }
    if ticks:
        specs["ticks"] = TopicSpec(name=spec.ticks_topic, partitions=1, config={"retention.ms": str(24 * 3600 * 1000)})
    return specs


def ensure_app_topics(kafka: KafkaConfig, spec: AppSpec, *, ticks: bool = False) -> None:
    from streamops.kafka.admin import ensure_topics

    ensure_topics(kafka, list(app_topic_specs(spec, ticks=ticks).values()))
