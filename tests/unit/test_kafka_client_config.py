"""streamops.kafka.client_config: Spark's ``kafka.``-prefixed (Java client) options as librdkafka
properties, and what librdkafka or the platform's clients cannot honour."""

from __future__ import annotations

import pytest

from streamops.exceptions import ConfigError
from streamops.kafka.client_config import client_config


def test_client_config_strips_the_prefix_and_translates_java_spellings() -> None:
    conf = client_config(
        {
            "kafka.bootstrap.servers": "b:9092",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="svc" password="p\\"w";',
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": "/etc/ca.pem",
            "kafka.ssl.truststore.password": "unused",
            "kafka.ssl.endpoint.identification.algorithm": "",
            "subscribe": "t",  # not a client property
        }
    )
    assert conf == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "svc",
        "sasl.password": 'p"w',
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert client_config({"kafka.ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----",
                          "kafka.ssl.keystore.type": "PKCS12"}) == {"ssl.ca.pem": "-----BEGIN CERTIFICATE-----"}


@pytest.mark.parametrize(
    "options, message",
    [
        ({"kafka.ssl.truststore.location": "/x.jks"}, "is a JKS store, which librdkafka can't read"),
        ({"kafka.ssl.keystore.type": "JKS"}, "kafka.ssl.keystore.type=JKS can't be read by librdkafka"),
        (
            {"kafka.sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"},
            "OAuthBearerLoginModule can't be used by librdkafka",
        ),
        ({"kafka.enable.auto.commit": "true"}, "'kafka.enable.auto.commit' is not supported"),
        ({"kafka.auto.offset.reset": "earliest"}, "set the source option startingOffsets"),
        ({"kafka.value.deserializer": "x"}, "values are returned as bytes"),
    ],
)
def test_client_config_refuses_what_librdkafka_cannot_honour(options, message) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        client_config(options)
    assert info.value.exit_code == 2
