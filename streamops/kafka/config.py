"""One Kafka client configuration as a value: the bootstrap address and the resolved client
properties an app's (or the platform's) clients use, with its renderings.

A front end builds it once (``kafka.security.kafka_config``: the platform's defaults, an app's
overrides) and hands it to every function that makes a client, so two apps in one process (two
Airflow tasks in one worker) never share a client's credentials by accident, and nothing is looked
up by address in hidden state. Its ``repr`` masks every secret (``properties.mask``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamops.kafka.properties import JAAS_USERNAME, java_properties, librdkafka, mask, spark_options
from streamops.settings import ENV_VARS


@dataclass(frozen=True, repr=False)
class KafkaConfig:
    """What every client made with it uses. ``properties``: the Java client properties, resolved
    (secrets inside); ``written``: the same as written, references unresolved (to print);
    ``overrides``: the names the app's spec sets over the platform's ``defaults`` file;
    ``embedded``: ``defaults`` is the secured embedded broker's own file; ``replication``,
    ``min_insync``: what the topics it creates get, None by the cluster's size (``kafka.replication``);
    ``external``: a cluster the platform does not start (what an unanswered client suggests)."""

    bootstrap: str
    properties: Mapping[str, str] = field(default_factory=dict, hash=False)
    app: str | None = None
    overrides: tuple[str, ...] = ()
    defaults: Path | None = None
    written: Mapping[str, str] = field(default_factory=dict, hash=False)
    embedded: bool = False
    replication: int | None = None
    min_insync: int | None = None
    external: bool = False

    @classmethod
    def plaintext(cls, bootstrap: str) -> KafkaConfig:
        """A client of ``bootstrap`` with no client properties (PLAINTEXT)."""
        return cls(bootstrap)

    def __repr__(self) -> str:
        return (f"KafkaConfig(bootstrap={self.bootstrap!r}, app={self.app!r}, overrides={list(self.overrides)!r}, "
                f"defaults={None if self.defaults is None else str(self.defaults)!r}, "
                f"properties={mask(self.properties)!r})")

    __str__ = __repr__

    # -- renderings -------------------------------------------------------------------------------
    def librdkafka(self) -> dict[str, str]:
        """confluent-kafka settings (security only; empty for PLAINTEXT)."""
        return librdkafka(self.properties)

    def spark_options(self) -> dict[str, str]:
        """Spark Kafka options of a source or sink (security only)."""
        return spark_options(self.properties)

    @contextlib.contextmanager
    def command_config(self, folder: Path | None = None) -> Iterator[Path | None]:
        """A properties file for a Kafka tool's ``--command-config`` (mode 0600, removed afterwards);
        None when the client needs no properties."""
        if not self.properties:
            yield None
            return
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, name = tempfile.mkstemp(prefix="kafka-tool-", suffix=".properties", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="latin-1") as f:
                f.write(java_properties(self.properties))
            yield Path(name)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)

    def describe(self, renderings: bool = False) -> dict[str, Any]:
        """What a client uses, every secret masked (``platform up``, ``platform kafka-config``).
        ``renderings``: also the properties as written (references shown) and as librdkafka and
        Spark get them."""
        props = self.properties
        user = props.get("sasl.username") or next(iter(JAAS_USERNAME.findall(props.get("sasl.jaas.config", ""))), None)
        out: dict[str, Any] = {
            "bootstrap": self.bootstrap, "security_protocol": props.get("security.protocol", "PLAINTEXT").upper(),
            "sasl_mechanism": props.get("sasl.mechanism"), "sasl_username": user,
            "defaults": None if self.defaults is None else str(self.defaults),
            "app": self.app, "app_overrides": sorted(self.overrides)}
        if renderings:
            out.update(properties=mask(self.written), librdkafka=mask(self.librdkafka()),
                       spark=mask(self.spark_options()))
        return out

    # -- what an operator reads when the broker does not take the client --------------------------
    def refusal_message(self, reason: str) -> str:
        """The broker refused a client: the reason, where the client's configuration comes from,
        and what to correct there."""
        where = [f"the platform's defaults {self.defaults}" if self.defaults else "no platform defaults (PLAINTEXT; "
                 f"set {ENV_VARS['kafka_client_properties']} to a client properties file)"]
        if self.overrides:
            where.append(f"apps.{self.app}.kafka in the spec file")
        if "SSL" in reason and "SASL" not in reason:
            fix = ("ssl.truststore.location must hold the CA that signed the broker's certificate, and the "
                   "certificate must name the host of the bootstrap address")
        else:
            fix = "correct the SASL user and password (sasl.jaas.config, or sasl.username and sasl.password)"
        if self.embedded:
            fix += ("; the embedded broker's own are written by `streamops platform up --kafka-security sasl_ssl`: "
                    "do not edit them, and start the broker again from the same state dir")
        return (f"the Kafka broker at {self.bootstrap} refused this client: {reason}. The client's configuration: "
                f"{' over '.join(reversed(where))}. Remedy: {fix}")

    def plaintext_hint(self) -> str:
        """For "no broker answered": a broker may be there but close this client's connections
        because it wants other security (TLS, SASL) than the client's."""
        if not self.properties:
            return (f" (a broker that wants TLS or SASL closes a PLAINTEXT client's connections: give its client "
                    f"properties in {ENV_VARS['kafka_client_properties']})")
        where = f"apps.{self.app}.kafka" if self.overrides else str(self.defaults or "the client properties")
        return (f" (a broker that wants other security than this client's security.protocol="
                f"{self.properties.get('security.protocol', 'PLAINTEXT').upper()} closes its connections: check "
                f"{where})")


def as_config(kafka: KafkaConfig | str) -> KafkaConfig:
    """``kafka``, or a plain address as a PLAINTEXT client of it (tests and benches pass addresses;
    the product always passes a ``KafkaConfig``)."""
    if isinstance(kafka, KafkaConfig):
        return kafka
    if not isinstance(kafka, str):  # e.g. the platform's Settings where its KafkaConfig was meant
        raise TypeError(f"a Kafka client needs a KafkaConfig or a bootstrap address, not {type(kafka).__name__}")
    return KafkaConfig.plaintext(kafka)
