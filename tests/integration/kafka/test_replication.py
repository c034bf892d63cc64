"""On the real (single) broker: created topics get the platform's replication and its in-sync
minimum; a factor the cluster cannot hold is refused before anything is created."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from streamops.exceptions import ConfigError
from streamops.kafka.admin import TopicSpec, ensure_topics, replication_drift
from streamops.kafka.config import KafkaConfig


def _topic_state(bootstrap: str, topic: str) -> tuple[set[int], dict[str, tuple[str, bool]]]:
    """The replica counts of its partitions and, per config, (value, whether it is the broker's default)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(timeout=10).topics[topic]
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(timeout=10)
    return {len(p.replicas) for p in meta.partitions.values()}, {k: (v.value, v.is_default) for k, v in configs.items()}


def test_created_topics_take_the_platforms_replication_and_an_impossible_one_creates_nothing(kafka: str) -> None:
    name = f"repl-{uuid.uuid4().hex[:8]}"
    made = ensure_topics(KafkaConfig(kafka), [TopicSpec(name=name, partitions=2, config={"cleanup.policy": "compact"})])
    assert made[name].created and made[name].partitions == 2
    factors, config = _topic_state(kafka, name)
    # set on the topic itself, not the broker's default that happens to be 1 too
    assert factors == {1} and config["min.insync.replicas"] == ("1", False)
    assert config["cleanup.policy"] == ("compact", False)
    assert replication_drift(KafkaConfig(kafka), [name]) == []

    three = KafkaConfig(kafka, replication=3)
    other = f"repl-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ConfigError, match=r"has 1 broker\(s\), fewer than the replication factor 3"):
        ensure_topics(three, [TopicSpec(name=other, partitions=1)])
    assert other not in AdminClient({"bootstrap.servers": kafka}).list_topics(timeout=10).topics
    with pytest.raises(ConfigError, match="STREAMOPS_TOPIC_REPLICATION"):  # what status shows as a note
        replication_drift(three, [name])
