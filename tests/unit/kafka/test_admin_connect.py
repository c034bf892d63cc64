"""``cluster_metadata``: a connection that fails at once (a broker restarting) is tried again
until the timeout, instead of failing a whole operation in a tenth of a second."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from streamops.kafka.admin import cluster_metadata
from streamops.kafka.exceptions import BrokerUnavailableError


class FlakyClient:
    """Fails ``failures`` times with ``code``, then answers."""

    def __init__(self, failures: int, code: int = KafkaError._TRANSPORT) -> None:
        self.failures, self.code, self.calls = failures, code, 0

    def list_topics(self, timeout: float):
        self.calls += 1
        if self.calls <= self.failures:
            raise KafkaException(KafkaError(self.code, "Failed to get metadata: Local: Broker transport failure"))
        return "metadata"


def test_a_transport_failure_is_tried_again_until_the_broker_answers() -> None:
    client = FlakyClient(failures=3)
    assert cluster_metadata(client, "127.0.0.1:1", timeout=5) == "metadata"
    assert client.calls == 4


def test_a_broker_that_never_answers_fails_after_the_timeout_not_before() -> None:
    client = FlakyClient(failures=10**6)
    start = time.monotonic()
    with pytest.raises(BrokerUnavailableError, match=r"within 1s \(Failed to get metadata"):
        cluster_metadata(client, "127.0.0.1:1", timeout=1)
    assert 0.7 <= time.monotonic() - start <= 1.5
    assert client.calls > 1


def test_a_timeout_is_not_tried_again() -> None:
    client = FlakyClient(failures=1, code=KafkaError._TIMED_OUT)
    with pytest.raises(BrokerUnavailableError):
        cluster_metadata(client, "127.0.0.1:1", timeout=5)
    assert client.calls == 1


class LeaderlessConsumer:
    """A topic just created: its partition's leader unknown ``failures`` times, then watermarks."""

    def __init__(self, failures: int, code: int = KafkaError.NOT_LEADER_FOR_PARTITION) -> None:
        self.failures, self.code, self.calls = failures, code, 0

    def get_watermark_offsets(self, tp, timeout: float):
        self.calls += 1
        if self.calls <= self.failures:
            raise KafkaException(KafkaError(self.code, "Failed to get watermark offsets: Broker: Not leader"))
        return (0, 42)


def test_watermarks_of_a_partition_without_a_leader_yet_are_asked_again() -> None:
    from confluent_kafka import TopicPartition

    from streamops.kafka.admin import watermark_offsets

    consumer = LeaderlessConsumer(failures=2)
    assert watermark_offsets(consumer, TopicPartition("t", 0), timeout=5) == (0, 42)
    assert consumer.calls == 3


def test_watermarks_give_up_at_the_timeout_and_on_other_errors() -> None:
    from confluent_kafka import TopicPartition

    from streamops.kafka.admin import watermark_offsets

    with pytest.raises(KafkaException):
        watermark_offsets(LeaderlessConsumer(failures=10**6), TopicPartition("t", 0), timeout=0.6)
    other = LeaderlessConsumer(failures=1, code=KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        watermark_offsets(other, TopicPartition("t", 0), timeout=5)
    assert other.calls == 1


class EpochLaggingAdmin:
    """A broker just restarted: ListOffsets answers "leader epoch is newer than broker epoch" for
    one partition ``failures`` times (as a reset after a broker kill saw), then offsets."""

    def __init__(self, failures: int, code: int = KafkaError.UNKNOWN_LEADER_EPOCH) -> None:
        self.failures, self.code, self.calls = failures, code, 0

    def list_offsets(self, request: dict, request_timeout: float) -> dict:
        from concurrent.futures import Future

        self.calls += 1
        out = {}
        for tp in request:
            fut: Future = Future()
            if tp.partition == 1 and self.calls <= self.failures:
                fut.set_exception(KafkaException(KafkaError(self.code, "Broker: Leader epoch is newer than broker epoch")))
            else:
                fut.set_result(type("Info", (), {"offset": 10 * tp.partition})())
            out[tp] = fut
        return out


def test_list_offsets_after_a_broker_restart_is_asked_again() -> None:
    from confluent_kafka.admin import OffsetSpec

    from streamops.kafka.admin import _list_offsets

    admin = EpochLaggingAdmin(failures=2)
    assert _list_offsets(admin, "t", [0, 1, 2], OffsetSpec.latest(), timeout=5) == {0: 0, 1: 10, 2: 20}
    assert admin.calls == 3


def test_list_offsets_names_the_partition_on_a_lasting_error() -> None:
    from confluent_kafka.admin import OffsetSpec

    from streamops.kafka.admin import _list_offsets, _OffsetsError

    admin = EpochLaggingAdmin(failures=10**6, code=KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(_OffsetsError) as err:
        _list_offsets(admin, "t", [0, 1, 2], OffsetSpec.latest(), timeout=5)
    assert err.value.partition == 1 and admin.calls == 1


def test_an_unanswered_client_of_an_external_cluster_is_not_told_to_start_the_embedded_broker() -> None:
    from streamops.kafka.config import KafkaConfig
    from streamops.settings import Settings

    embedded = Settings(kafka_port=19092)
    external = Settings(kafka_port=19092, bootstrap_servers="10.0.0.1:9092,10.0.0.2:9092")
    assert not embedded.kafka_external and external.kafka_external
    assert not Settings(kafka_port=19092, bootstrap_servers="127.0.0.1:19092").kafka_external  # its own address

    with pytest.raises(BrokerUnavailableError) as own:
        cluster_metadata(FlakyClient(failures=10**6), KafkaConfig("127.0.0.1:19092"), timeout=0.2)
    assert "start one with 'streamops platform up --only kafka'" in str(own.value)
    with pytest.raises(BrokerUnavailableError) as theirs:
        cluster_metadata(FlakyClient(failures=10**6), KafkaConfig("10.0.0.1:9092", external=True), timeout=0.2)
    assert "platform up --only kafka" not in str(theirs.value)
    assert "check that the cluster runs and that STREAMOPS_BOOTSTRAP_SERVERS" in str(theirs.value)
    assert "`platform up --external kafka=embedded`" in str(theirs.value)
