"""Errors of the Kafka helpers (topics, bounded reads, producing)."""

from __future__ import annotations

from streamops.exceptions import StreamopsError


class BrokerError(StreamopsError):
    """Something about talking to the Kafka cluster went wrong."""


class BrokerUnavailableError(BrokerError):
    """No broker answered at the bootstrap address in time.

    Operator action: start the embedded broker (``streamops platform up --only kafka``) or point
    ``--bootstrap`` / ``STREAMOPS_BOOTSTRAP_SERVERS`` at a reachable cluster.
    """


class BrokerAuthError(BrokerUnavailableError):
    """The broker refused this client: its SASL credentials, or the TLS handshake (the broker's
    certificate against the client's truststore).

    Operator action: the message names the broker's reason and where the client's configuration
    comes from (``STREAMOPS_KAFKA_CLIENT_PROPERTIES``, the embedded broker's client properties, an
    app's ``kafka:`` overrides); correct the credentials or the truststore there.
    """


class TopicNotFoundError(BrokerError):
    """The topic does not exist on the cluster.

    Operator action: check the topic name (and the bootstrap address); create it first if needed.
    """


class TopicError(BrokerError):
    """Creating or inspecting a topic failed (e.g. invalid config, not authorized).

    Operator action: read the broker's reason in the message and fix the topic spec or the ACLs.
    """


class ProduceError(BrokerError):
    """Records could not be delivered (broker error, timeout, fatal producer error).

    Operator action: read the reason in the message; the records counted as delivered are in the
    topic, the rest are not: rerun into a fresh topic if you need an exact data set.
    """


class ConsumeError(BrokerError):
    """A bounded read failed or stopped making progress before reaching its end offsets.

    Operator action: check that the broker is healthy and the topic still exists, then rerun.
    """


class OpenTransactionError(ConsumeError):
    """A transaction stayed open below the end of a read that must see everything committed.

    Operator action: if a driver of the app is stopped or crashed, start it (a starting driver
    aborts what its predecessor left open), or wait for its transaction timeout; a hanging
    transaction (KIP-664) is aborted with Kafka's own tool (``streamops platform kafka-tool
    transactions ... find-hanging`` / ``abort``).
    """
