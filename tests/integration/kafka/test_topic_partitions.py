"""On the real broker: an app's topics that exist with a partition count it cannot run on are named
with the change to make, and a deploy is refused before anything is desired or started."""

from __future__ import annotations

import json
import uuid

import pytest

from streamops.app.topics import check_partitions, partition_mismatches
from streamops.exceptions import ConfigError
from streamops.kafka.admin import TopicSpec, ensure_topics
from streamops.kafka.config import KafkaConfig
from streamops.ledger.store import Ledger
from streamops.platform import manager
from streamops.spec import AppSpec


def _spec(name: str, partitions: int = 4) -> AppSpec:
    return AppSpec(name=name, job="jobs.user_activity", input_topics=[f"{name}-in"], input_partitions=partitions,
                   output_topic=f"{name}-out", changelog_topic=f"{name}-changelog", dlq_topic=f"{name}-dlq")


def test_an_input_topic_with_another_count_and_a_commits_topic_of_two_are_named(kafka: str) -> None:
    kc = KafkaConfig(kafka)
    name = f"parts{uuid.uuid4().hex[:8]}"
    spec = _spec(name)
    assert partition_mismatches(kc, spec) == []  # nothing exists yet: created as the spec says

    ensure_topics(kc, [TopicSpec(name=spec.input_topics[0], partitions=2),
                       TopicSpec(name=spec.commits_topic, partitions=2)])
    found = partition_mismatches(kc, spec)
    assert len(found) == 2, found
    assert found[0].startswith(f"input topic {name}-in has 2 partition(s) where {name}'s spec says input_partitions: 4; "
                               f"set input_partitions: 2 for {name}")
    assert f"--topic {name}-in --partitions 4" in found[0]  # fewer: adding partitions is the other way
    assert found[1].startswith(f"commits topic _streamops-{name}-commits has 2 partitions where the platform makes it with 1")
    with pytest.raises(ConfigError, match=f"{name} cannot be deployed: input topic"):
        check_partitions(kc, spec)

    # the spec set to the topic's count: only the commits topic is left
    assert [f.split()[0] for f in partition_mismatches(kc, _spec(name, partitions=2))] == ["commits"]
    more = _spec(name, partitions=1)  # the topic has more than the spec: no --alter can lower a count
    (first,) = [f for f in partition_mismatches(kc, more) if f.startswith("input")]
    assert "set input_partitions: 2" in first and "--alter" not in first


def test_deploy_with_a_wrong_input_topic_is_refused_with_nothing_desired(app_factory) -> None:
    app = app_factory("partsdeploy", master="local[1]")
    ensure_topics(app.kafka, [TopicSpec(name="user-events", partitions=3)])  # the spec says 6
    manager.up(app.settings, only=["supervisor"])
    try:
        r = app.cli("deploy", "user_activity", "--json")
    finally:
        manager.down(app.settings, only=["supervisor"])
    assert r.returncode == 2, r.stdout + r.stderr
    error = json.loads(r.stdout)["error"]
    assert "user_activity cannot be deployed: input topic user-events has 3 partition(s)" in error
    assert "set input_partitions: 3 for user_activity" in error
    ledger = Ledger(app.settings.ledger_db_url)
    assert ledger.desired("user_activity") is None
    assert [o["kind"] for o in ledger.operations("user_activity", limit=10)] == []
    assert not (app.settings.state_dir / "apps" / "user_activity" / "driver.pid").exists()
