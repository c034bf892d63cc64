"""Where a Kafka client's configuration comes from (its model, checks and renderings are
``kafka.properties``; the value every client is made with is ``kafka.config.KafkaConfig``).

- the platform's defaults: the file ``STREAMOPS_KAFKA_CLIENT_PROPERTIES`` names, else, when the
  embedded broker is secured (``platform up --kafka-security sasl_ssl``), the one the platform
  wrote under the state dir (``embedded_client_properties``), else none (PLAINTEXT);
- an app's overrides: the spec's ``kafka:`` map, merged over the defaults (``merge``) for that
  app's clients. In the spec, secrets are allowed only as references.

``kafka_config(settings, spec)`` builds the value once, at a front end, and it is handed down: no
configuration is found from a bootstrap address, so none can be the wrong app's. A broker's refusal
of a client is recognised here (``refusal``); the message naming where to correct it is the
config's (``KafkaConfig.refusal_message``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamops.exceptions import ConfigError
from streamops.kafka.config import KafkaConfig
from streamops.kafka.properties import load_properties, merge, resolve, validate
from streamops.settings import ENV_VARS, Settings


# -- a broker's refusal, named --------------------------------------------------------------------
class _Refusals(logging.Handler):
    """Keeps librdkafka's last lines that say the broker refused the client (the client logger's)."""

    MARKS = ("SASL authentication error", "Authentication failed", "SSL handshake failed",
             "SASL handshake failed", "Unsupported SASL mechanism")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if any(m in msg for m in self.MARKS):
            self.seen = [*self.seen[-9:], (time.monotonic(), msg)]


REFUSALS = _Refusals()


def refusal(client: Any, since: float) -> str | None:
    """The broker's refusal of a client made with ``admin.client_config`` (its logger) since
    ``since`` (``time.monotonic()``), or None. Serves the client's queued log lines first."""
    with contextlib.suppress(Exception):
        client.poll(0)
    for at, msg in reversed(REFUSALS.seen):
        if at >= since:
            mark = min(msg.find(m) for m in _Refusals.MARKS if m in msg)
            return re.sub(r"\s*\(after \d+ms in state \w+.*\)\s*$", "", msg[mark:])
    return None


# -- where a client's configuration comes from -------------------------------------------------
def embedded_security_dir(settings: Settings) -> Path:
    """The secured embedded broker's CA, certificates, passwords and client properties."""
    return settings.state_dir / "kafka" / "security"


def embedded_client_properties(settings: Settings) -> Path:
    """Written by ``platform up --kafka-security sasl_ssl``; its presence marks a secured broker."""
    return embedded_security_dir(settings) / "client.properties"


def embedded_security(settings: Settings) -> str:
    """``sasl_ssl`` or ``plaintext``: the setting, else what the embedded broker last ran with."""
    if settings.kafka_security is not None:
        return settings.kafka_security
    return "sasl_ssl" if embedded_client_properties(settings).is_file() else "plaintext"


def defaults_source(settings: Settings) -> Path | None:
    """The platform's default client properties file, or None (PLAINTEXT)."""
    if settings.kafka_client_properties is not None:
        return settings.kafka_client_properties
    if settings.bootstrap_servers is None and embedded_security(settings) == "sasl_ssl":
        return embedded_client_properties(settings)
    return None


def platform_properties(settings: Settings) -> dict[str, str]:
    """The platform's defaults, validated, references unresolved."""
    path = defaults_source(settings)
    if path is None:
        return {}
    if path == embedded_client_properties(settings) and not path.is_file():
        raise ConfigError(f"the embedded broker is secured ({ENV_VARS['kafka_security']}=sasl_ssl) but its client "
                          f"properties {path} do not exist yet: start it with `streamops platform up "
                          f"--kafka-security sasl_ssl`")
    where = f"{path} ({ENV_VARS['kafka_client_properties']})" if settings.kafka_client_properties else str(path)
    props = load_properties(path, where)
    validate(props, where)
    return props


def app_properties(settings: Settings, app: str | None, overrides: Mapping[str, str] | None) -> dict[str, str]:
    """The platform's defaults with an app's overrides merged over them, validated."""
    props = platform_properties(settings)
    if overrides:
        props = merge(props, overrides)
        validate(props, f"apps.{app}.kafka (merged over the platform's defaults)")
    return props


def kafka_config(settings: Settings, spec: Any = None) -> KafkaConfig:
    """The configuration of the platform's clients (``spec`` None) or of ``spec``'s (its ``kafka``
    overrides merged over the platform's defaults), validated and resolved now: a ``ConfigError``
    names the property (never a secret)."""
    app = None if spec is None else spec.name
    overrides = dict(getattr(spec, "kafka", None) or {})
    written = app_properties(settings, app, overrides)
    source = defaults_source(settings)
    where = f"apps.{app}.kafka" if overrides else str(source or "the Kafka client properties")
    return KafkaConfig(settings.kafka_bootstrap, resolve(written, where), app, tuple(sorted(overrides)), source,
                       written, embedded=source is not None and source == embedded_client_properties(settings),
                       replication=settings.topic_replication, min_insync=settings.topic_min_insync,
                       external=settings.kafka_external)
