"""Spark's Kafka options (``kafka.``-prefixed Java client properties) as librdkafka properties, so one
client configuration serves Spark's connector (the JVM) and the platform's own Python clients."""

from __future__ import annotations

import re
from collections.abc import Mapping

from streamops.exceptions import ConfigError

_REFUSED_CLIENT = {
    "auto.offset.reset": "set the source option startingOffsets to 'earliest' or 'latest' instead; "
    "offsets are tracked in the Spark checkpoint, not by the consumer",
    "enable.auto.commit": "the source commits nothing to consumer groups",
    "key.deserializer": "keys are returned as bytes; deserialize them with DataFrame operations",
    "value.deserializer": "values are returned as bytes; deserialize them with DataFrame operations",
    "interceptor.classes": "interceptors could change records",
    "enable.partition.eof": "the source uses partition EOF events to find the end of a range",
    "enable.auto.offset.store": "the source stores no offsets",
}

_JAAS_PAIR = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """``kafka.*`` options with the prefix stripped, as librdkafka properties.

    Java-client spellings that librdkafka lacks are translated so the same options work with
    Spark's own connector: ``sasl.jaas.config`` (PLAIN / SCRAM username + password) ->
    ``sasl.username`` / ``sasl.password``; a PEM ``ssl.truststore.location`` -> ``ssl.ca.location``;
    ``ssl.truststore.certificates`` -> ``ssl.ca.pem``; ``ssl.endpoint.identification.algorithm=""``
    -> ``none``. JKS stores can't be read by librdkafka and are refused with a message.
    """
    conf = {k[len("kafka.") :]: str(v) for k, v in options.items() if k.lower().startswith("kafka.")}
    for key, why in _REFUSED_CLIENT.items():
        if key in conf:
            raise ConfigError(f"Kafka option 'kafka.{key}' is not supported: {why}")
    jaas = conf.pop("sasl.jaas.config", None)
    if jaas is not None:
        module = jaas.split()[0] if jaas.split() else ""
        if not module.endswith(("PlainLoginModule", "ScramLoginModule")):
            raise ConfigError(
                f"kafka.sasl.jaas.config with {module or 'no login module'} can't be used by librdkafka: "
                "for PLAIN/SCRAM set kafka.sasl.username and kafka.sasl.password, for OAUTHBEARER the "
                "librdkafka kafka.sasl.oauthbearer.* options"
            )
        pairs = dict(_JAAS_PAIR.findall(jaas))
        for java, native in (("username", "sasl.username"), ("password", "sasl.password")):
            if java in pairs:
                conf.setdefault(native, pairs[java].replace('\\"', '"'))
    store_type = conf.pop("ssl.truststore.type", "").upper()
    if "ssl.truststore.location" in conf:
        if store_type != "PEM":
            raise ConfigError(
                f"kafka.ssl.truststore.location is a {store_type or 'JKS'} store, which librdkafka can't "
                "read: convert it to PEM and set kafka.ssl.ca.location (or kafka.ssl.truststore.type=PEM)"
            )
        conf.setdefault("ssl.ca.location", conf.pop("ssl.truststore.location"))
        conf.pop("ssl.truststore.password", None)
    if "ssl.truststore.certificates" in conf:
        conf.setdefault("ssl.ca.pem", conf.pop("ssl.truststore.certificates"))
    if conf.get("ssl.keystore.type", "PKCS12").upper() == "JKS":
        raise ConfigError("kafka.ssl.keystore.type=JKS can't be read by librdkafka: use a PKCS12 keystore")
    conf.pop("ssl.keystore.type", None)
    if conf.get("ssl.endpoint.identification.algorithm", None) == "":
        conf["ssl.endpoint.identification.algorithm"] = "none"
    return conf
