"""The Airflow connection ``streamops_kafka`` the platform gives Airflow (the DLQ assets' watchers):
this platform's broker, read_committed, and its client security rendered for librdkafka, as the
Kafka provider's consumer hook reads a connection's extra."""

from __future__ import annotations

import json

import pytest

from streamops.platform.components import ASSET_WATCHERS_GROUP, airflow_env, kafka_connection
from streamops.settings import Settings

pytestmark = pytest.mark.unit


def test_a_plaintext_platform(tmp_path) -> None:
    s = Settings(home=tmp_path, bootstrap_servers="broker-1:9092,broker-2:9092")
    conn = json.loads(airflow_env(s)["AIRFLOW_CONN_STREAMOPS_KAFKA"])
    assert conn == {"conn_type": "kafka", "extra": {
        "bootstrap.servers": "broker-1:9092,broker-2:9092", "group.id": ASSET_WATCHERS_GROUP,
        "group.protocol": "consumer", "auto.offset.reset": "earliest", "enable.auto.commit": "false", "isolation.level": "read_committed"}}


def test_a_secured_platform_gives_its_client_security(tmp_path, monkeypatch) -> None:
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                     'username="ops" password="${env:KAFKA_PW}";\n'
                     "ssl.truststore.type=PEM\nssl.truststore.location=/etc/kafka/ca.pem\n")
    monkeypatch.setenv("KAFKA_PW", "s3cret")
    s = Settings(home=tmp_path, bootstrap_servers="b:9093", kafka_client_properties=props)
    extra = json.loads(kafka_connection(s)["AIRFLOW_CONN_STREAMOPS_KAFKA"])["extra"]
    assert {k: extra[k] for k in ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password",
                                  "ssl.ca.location")} == {
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "ops",
        "sasl.password": "s3cret", "ssl.ca.location": "/etc/kafka/ca.pem"}


def test_a_secured_embedded_broker_not_started_yet_gives_no_connection(tmp_path) -> None:
    """Its client properties come with its first start: no watcher until then, and no error."""
    s = Settings(home=tmp_path, kafka_security="sasl_ssl")
    assert kafka_connection(s) == {}
