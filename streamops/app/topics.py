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


def partition_mismatches(kafka: KafkaConfig, spec: AppSpec, *, ticks: bool = True) -> list[str]:
    """The app's topics that exist with a partition count the app cannot run on, each as the sentence
    that says what to change: an input topic with other than ``input_partitions`` (the spec's
    parallelism limits and ``check``'s per-partition offsets are computed from it), a commits or
    ticks topic with more than one (a stream-time job reads its ticks from partition 0 only, and the
    task markers are offsets of one partition). Missing topics are not a mismatch:
    they are created as the spec says."""
    from confluent_kafka.admin import AdminClient

    from streamops.kafka.admin import client_config, cluster_metadata

    topics = cluster_metadata(AdminClient(client_config(kafka)), kafka, 15.0).topics
    specs = app_topic_specs(spec, ticks=ticks)
    out = []
    for role, want in specs.items():
        meta = topics.get(want.name)
        if meta is None or meta.error is not None:
            continue
        n = len(meta.partitions)
        if role.startswith("input:") and n != spec.input_partitions:
            out.append(f"input topic {want.name} has {n} partition(s) where {spec.name}'s spec says "
                       f"input_partitions: {spec.input_partitions}; set input_partitions: {n} for {spec.name} "
                       f"in the spec file" + ("" if n > spec.input_partitions else
                                             f" (or add partitions: `streamops platform kafka-tool topics --alter "
                                             f"--topic {want.name} --partitions {spec.input_partitions}`)"))
        elif role in ("commits", "ticks") and n != 1:
            out.append(f"{role} topic {want.name} has {n} partitions where the platform makes it with 1 (the app "
                       f"reads it back as one partition); it is the platform's own topic, made by something else "
                       f"(a broker's auto-create?): delete it before {spec.name}'s first deploy (`streamops "
                       f"platform kafka-tool topics --delete --topic {want.name}`), and the deploy creates it")
    return out


def check_partitions(kafka: KafkaConfig, spec: AppSpec) -> None:
    """``partition_mismatches`` as one ``ConfigError`` (exit 2), before a deploy changes anything."""
    from streamops.exceptions import ConfigError

    if found := partition_mismatches(kafka, spec):
        raise ConfigError(f"{spec.name} cannot be deployed: " + "; ".join(found))
