"""How many copies of its topics the platform keeps: the replication factor and
``min.insync.replicas`` of every topic it creates, from the settings or the cluster's size.

On a cluster of three or more brokers a topic gets 3 replicas and needs 2 in sync to take a write
(``acks=all``: one broker may be lost, or restarted, with no write lost or refused); on fewer (the
embedded broker) 1 and 1. A topic that exists with another factor is used as it is, but never
silently: a driver logs it at start and ``streamops status`` shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamops.exceptions import ConfigError
from streamops.settings import ENV_VARS

#: brokers from which a cluster gets 3 copies of each topic by default
CLUSTER = 3
MIN_INSYNC = "min.insync.replicas"


@dataclass(frozen=True)
class Replication:
    factor: int
    min_insync: int

    def topic_config(self) -> dict[str, str]:
        return {MIN_INSYNC: str(self.min_insync)}


def wanted(factor: int | None, min_insync: int | None, brokers: int, bootstrap: str) -> Replication:
    """What a topic created now on a cluster of ``brokers`` gets (``factor``, ``min_insync``: the
    settings, None for the default). A factor above the brokers is an error that names the setting,
    raised before anything is created."""
    if factor is None:
        factor = 3 if brokers >= CLUSTER else 1
    if min_insync is None:
        min_insync = max(1, min(2, factor - 1))
    if factor > brokers:
        raise ConfigError(f"the Kafka cluster at {bootstrap} has {brokers} broker(s), fewer than the replication "
                          f"factor {factor} of the topics the platform creates ({ENV_VARS['topic_replication']}): "
                          f"lower it to {brokers} or add brokers")
    if min_insync > factor:
        raise ConfigError(f"{ENV_VARS['topic_min_insync']}={min_insync} is more than the replication factor {factor}: "
                          f"no write could ever be acknowledged")
    return Replication(factor, min_insync)


@dataclass(frozen=True)
class ReplicationDrift:
    """A topic that exists with fewer or more replicas than the platform would give it."""

    topic: str
    factor: int
    wanted: int

    def note(self) -> str:
        return (f"topic {self.topic} has {self.factor} replica(s) per partition where the platform creates "
                f"{self.wanted} ({ENV_VARS['topic_replication']}); it is used as it is: reassign its "
                f"partitions (kafka-reassign-partitions) or set the setting to match")


def cluster_size(metadata: Any) -> int:
    """How many brokers the cluster has, not only those up now: the live brokers, or more when a
    partition lists more replicas (its internal topics' span the cluster). A broker down for a
    while must not make the platform create topics with one copy, nor call every topic drifted."""
    replicas = (len(p.replicas) for t in metadata.topics.values() if t.error is None for p in t.partitions.values())
    return max(len(metadata.brokers), max(replicas, default=0))


def drift(metadata: Any, topics: list[str], want: Replication) -> list[ReplicationDrift]:
    """The ``topics`` of ``metadata`` (confluent-kafka's ``ClusterMetadata``) whose partitions do not
    all have ``want.factor`` replicas (missing topics: none; they will be created as wanted)."""
    out = []
    for topic in topics:
        meta = metadata.topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            continue
        factors = {len(p.replicas) for p in meta.partitions.values()}
        if factors != {want.factor}:
            out.append(ReplicationDrift(topic, min(factors), want.factor))
    return out
