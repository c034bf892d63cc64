"""Where a Kafka client's configuration comes from (its model, checks and renderings are
``kafka.properties``).

- the platform's defaults: the file ``STREAMOPS_KAFKA_CLIENT_PROPERTIES`` names, else, when the
  embedded broker is secured (``platform up --kafka-security sasl_ssl``), the one the platform
  wrote under the state dir (``embedded_client_properties``), else none (PLAINTEXT);
- an app's overrides: the spec's ``kafka:`` map, merged over the defaults (``merge``) for that
  app's clients (``use_app`` / ``app_scope``). In the spec, secrets are allowed only as references.

Clients are made from a bootstrap address deep in the core, so the configuration is found from it:
the platform settings registered for that address (``register``; ``platform up`` and every CLI
command register theirs) or, in a process started by the platform, ``Settings.from_env()``.
A broker's refusal of a client is named here too (``refusal_message``), with where to correct it.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from streamops.exceptions import ConfigError
from streamops.kafka.config import KafkaConfig
from streamops.kafka.properties import (
    JAAS_USERNAME,
    java_properties,
    librdkafka,
    load_properties,
    mask,
    merge,
    resolve,
    spark_options,
    validate,
)
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


def refusal_message(bootstrap: str, reason: str) -> str:
    """What an operator reads when the broker refused a client: the reason, where the client's
    configuration comes from, and what to correct there."""
    settings = settings_for(bootstrap)
    app = _current()
    source = defaults_source(settings) if settings is not None else None
    where = [f"the platform's defaults {source}" if source else "no platform defaults (PLAINTEXT; set "
             f"{ENV_VARS['kafka_client_properties']} to a client properties file)"]
    if app and app[1]:
        where.append(f"apps.{app[0]}.kafka in the spec file")
    if "SSL" in reason and "SASL" not in reason:
        fix = ("ssl.truststore.location must hold the CA that signed the broker's certificate, and the "
               "certificate must name the host of the bootstrap address")
    else:
        fix = "correct the SASL user and password (sasl.jaas.config, or sasl.username and sasl.password)"
    if source is not None and settings is not None and source == embedded_client_properties(settings):
        fix += ("; the embedded broker's own are written by `streamops platform up --kafka-security sasl_ssl`: "
                "do not edit them, and start the broker again from the same state dir")
    return (f"the Kafka broker at {bootstrap} refused this client: {reason}. The client's configuration: "
            f"{' over '.join(reversed(where))}. Remedy: {fix}")


def plaintext_hint(bootstrap: str) -> str:
    """For "no broker answered": a broker may be there but close this client's connections because
    it wants other security (TLS, SASL) than the client's."""
    try:
        props = client_properties(bootstrap)
    except ConfigError:
        return ""
    if not props:
        return (f" (a broker that wants TLS or SASL closes a PLAINTEXT client's connections: give its client "
                f"properties in {ENV_VARS['kafka_client_properties']})")
    settings = settings_for(bootstrap)
    source = defaults_source(settings) if settings is not None else None
    app = _current()
    where = f"apps.{app[0]}.kafka" if app and app[1] else str(source or "the client properties")
    return (f" (a broker that wants other security than this client's security.protocol="
            f"{props.get('security.protocol', 'PLAINTEXT').upper()} closes its connections: check {where})")


# -- where a client's configuration comes from -------------------------------------------------
#: bootstrap address -> the settings of the platform there (``register``)
_PLATFORMS: dict[str, Settings] = {}
#: the app whose clients this block makes (``app_scope``): (name, its spec's ``kafka`` overrides)
_APP: contextvars.ContextVar[tuple[str, Mapping[str, str]] | None] = contextvars.ContextVar(
    "streamops_kafka_app", default=None)
#: the app whose clients this process makes (``use_app``: a driver, a CLI command), every thread
_PROCESS_APP: tuple[str, Mapping[str, str]] | None = None
_FROM_ENV: tuple[tuple, Settings | None] = ((), None)


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


def register(settings: Settings) -> Settings:
    """Clients made for ``settings.kafka_bootstrap`` in this process use these settings' defaults."""
    _PLATFORMS[settings.kafka_bootstrap] = settings
    return settings


def _app_of(spec: Any, settings: Settings | None) -> tuple[str, Mapping[str, str]]:
    overrides = dict(getattr(spec, "kafka", None) or {})
    if overrides and settings is not None:  # checked now: ConfigError naming the property
        resolve(app_properties(settings, spec.name, overrides), f"apps.{spec.name}.kafka")
    return spec.name, overrides


def use_app(spec: Any, settings: Settings | None = None) -> None:
    """Every Kafka client this process makes from now on, in any thread, is ``spec``'s (its
    ``kafka`` overrides): a driver, a CLI command. With ``settings`` the merged configuration is
    checked at once (``ConfigError`` naming the property)."""
    global _PROCESS_APP
    _PROCESS_APP = _app_of(spec, settings)


@contextlib.contextmanager
def app_scope(spec: Any, settings: Settings | None = None) -> Iterator[None]:
    """The clients made in this block (this thread or task) are ``spec``'s: an Airflow task."""
    token = _APP.set(_app_of(spec, settings))
    try:
        yield
    finally:
        _APP.reset(token)


def _current() -> tuple[str, Mapping[str, str]] | None:
    return _APP.get() or _PROCESS_APP


def current_app() -> str | None:
    got = _current()
    return got[0] if got else None


def settings_for(bootstrap: str) -> Settings | None:
    """The platform settings registered for ``bootstrap``, else this process's environment's if
    they name it (a process the platform started), else None."""
    if bootstrap in _PLATFORMS:
        return _PLATFORMS[bootstrap]
    global _FROM_ENV
    key = tuple(os.environ.get(v, "") for v in ENV_VARS.values())
    if _FROM_ENV[0] != key:
        try:
            _FROM_ENV = (key, Settings.from_env())
        except ConfigError:
            _FROM_ENV = (key, None)
    s = _FROM_ENV[1]
    return s if s is not None and s.kafka_bootstrap == bootstrap else None


def client_properties(bootstrap: str) -> dict[str, str]:
    """The resolved Java client properties of a client for ``bootstrap`` in this context."""
    settings = settings_for(bootstrap)
    app = _current()
    if settings is None:
        props = dict(app[1]) if app else {}
        if props:
            validate(props, f"apps.{app[0]}.kafka")
    else:
        props = app_properties(settings, app[0] if app else None, app[1] if app else None)
    source = defaults_source(settings) if settings is not None else None
    where = f"apps.{app[0]}.kafka" if app and app[1] else str(source or "the Kafka client properties")
    return resolve(props, where)


def librdkafka_for(bootstrap: str) -> dict[str, str]:
    """confluent-kafka settings of a client for ``bootstrap`` (security only; empty for PLAINTEXT)."""
    return librdkafka(client_properties(bootstrap))


def spark_options_for(bootstrap: str) -> dict[str, str]:
    """Spark Kafka options of a source or sink for ``bootstrap`` (security only)."""
    return spark_options(client_properties(bootstrap))


@contextlib.contextmanager
def command_config(bootstrap: str, folder: Path | None = None) -> Iterator[Path | None]:
    """A properties file for a Kafka tool's ``--command-config`` (mode 0600, removed afterwards);
    None when the client needs no properties."""
    props = client_properties(bootstrap)
    if not props:
        yield None
        return
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, name = tempfile.mkstemp(prefix="kafka-tool-", suffix=".properties", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="latin-1") as f:
            f.write(java_properties(props))
        yield Path(name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def describe(bootstrap: str, renderings: bool = False) -> dict[str, Any]:
    """What a client for ``bootstrap`` uses in this context, every secret masked (``platform up``,
    ``platform kafka-config``). ``renderings``: also the properties as written (references shown)
    and as librdkafka and Spark get them."""
    settings = settings_for(bootstrap)
    source = defaults_source(settings) if settings is not None else None
    app = _current()
    props = client_properties(bootstrap)
    user = props.get("sasl.username") or next(iter(JAAS_USERNAME.findall(props.get("sasl.jaas.config", ""))), None)
    out: dict[str, Any] = {
        "bootstrap": bootstrap, "security_protocol": props.get("security.protocol", "PLAINTEXT").upper(),
        "sasl_mechanism": props.get("sasl.mechanism"), "sasl_username": user,
        "defaults": None if source is None else str(source),
        "app": app[0] if app else None, "app_overrides": sorted(app[1]) if app and app[1] else []}
    if renderings:
        written = (app_properties(settings, app[0] if app else None, app[1] if app else None) if settings is not None
                   else dict(app[1]) if app else {})
        out.update(properties=mask(written), librdkafka=mask(librdkafka(props)), spark=mask(spark_options(props)))
    return out


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
                       written, embedded=source is not None and source == embedded_client_properties(settings))
