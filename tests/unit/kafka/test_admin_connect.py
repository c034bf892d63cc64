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
