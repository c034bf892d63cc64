"""The replication the platform gives the topics it creates, and the topics that differ from it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streamops.exceptions import ConfigError
from streamops.kafka.replication import Replication, ReplicationDrift, drift, wanted


@pytest.mark.parametrize(("brokers", "expected"), [(1, Replication(1, 1)), (2, Replication(1, 1)),
                                                   (3, Replication(3, 2)), (5, Replication(3, 2))])
def test_by_default_three_copies_two_in_sync_from_three_brokers(brokers: int, expected: Replication) -> None:
    assert wanted(None, None, brokers, "b:9092") == expected


def test_a_set_factor_gets_its_own_in_sync_minimum_unless_that_is_set_too() -> None:
    assert wanted(2, None, 3, "b:9092") == Replication(2, 1)
    assert wanted(5, None, 5, "b:9092") == Replication(5, 2)
    assert wanted(3, 3, 3, "b:9092") == Replication(3, 3)
    assert wanted(3, 2, 3, "b:9092").topic_config() == {"min.insync.replicas": "2"}


def test_more_copies_than_brokers_or_a_minimum_above_the_factor_is_an_error_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"b:9092 has 1 broker\(s\), fewer than the replication factor 3 .*"
                                          r"STREAMOPS_TOPIC_REPLICATION.*lower it to 1"):
        wanted(3, None, 1, "b:9092")
    with pytest.raises(ConfigError, match="STREAMOPS_TOPIC_MIN_INSYNC=3 is more than the replication factor 2"):
        wanted(2, 3, 3, "b:9092")


def _meta(**topics: list[int]) -> SimpleNamespace:
    """Cluster metadata shaped as confluent-kafka's: per topic, the replica count of each partition."""
    return SimpleNamespace(topics={
        name: SimpleNamespace(error=None, partitions={i: SimpleNamespace(replicas=list(range(n)))
                                                      for i, n in enumerate(counts)})
        for name, counts in topics.items()})


def test_a_topic_whose_partitions_do_not_all_have_the_factor_is_reported() -> None:
    meta = _meta(good=[3, 3], single=[1, 1, 1], uneven=[3, 2])
    found = drift(meta, ["good", "single", "uneven", "missing"], Replication(3, 2))
    assert found == [ReplicationDrift("single", 1, 3), ReplicationDrift("uneven", 2, 3)]
    assert "topic single has 1 replica(s) per partition where the platform creates 3" in found[0].note()
    assert drift(meta, ["single"], Replication(1, 1)) == []


def test_a_broker_down_does_not_shrink_the_cluster() -> None:
    from types import SimpleNamespace as NS

    from streamops.kafka.replication import cluster_size, wanted

    part = lambda n: NS(replicas=list(range(n)))
    md = NS(brokers={1: None, 2: None},  # one of three down: its partitions still list it
            topics={"__consumer_offsets": NS(error=None, partitions={0: part(3), 1: part(3)}),
                    "t": NS(error=None, partitions={0: part(2)})})
    assert cluster_size(md) == 3 and wanted(None, None, cluster_size(md), "b:9092").factor == 3
    assert cluster_size(NS(brokers={1: None}, topics={})) == 1
