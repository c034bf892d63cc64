"""One Kafka client configuration for every client the platform makes.

The model is a set of Java client properties (``security.protocol``, ``sasl.*``, ``ssl.*``), as a
Kafka ``client.properties`` file holds them. Secrets may be references, resolved only when a client
is made: ``${file:/abs/path}`` (the file's content, stripped), ``${file:/abs/path:key}`` (a key of
a properties file, as Kafka's ``FileConfigProvider``) and ``${env:NAME}`` (as Kafka's
``EnvVarConfigProvider``). Where they come from:

- the platform's defaults: the file ``STREAMOPS_KAFKA_CLIENT_PROPERTIES`` names, else, when the
  embedded broker is secured (``platform up --kafka-security sasl_ssl``), the one the platform
  wrote under the state dir (``embedded_client_properties``), else none (PLAINTEXT);
- an app's overrides: the spec's ``kafka:`` map, merged over the defaults (``merge``) for that
  app's clients (``use_app`` / ``app_scope``). In the spec, secrets are allowed only as references.

Three renderings of one resolved configuration: ``librdkafka`` (confluent-kafka: admin, produce,
read, the committer, warm-up, health), ``spark_options`` (``kafka.``-prefixed options of Spark's
connector) and ``java_properties`` (a file for Kafka's tools' ``--command-config``). ``mask`` hides
secrets for printing; no error message here ever carries a secret value.

Clients are made from a bootstrap address deep in the core, so the configuration is found from it:
the platform settings registered for that address (``register``; ``platform up`` and every CLI
command register theirs) or, in a process started by the platform, ``Settings.from_env()``.
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
from streamops.kafka.client_config import client_config
from streamops.settings import ENV_VARS, Settings
from streamops.spec import KAFKA_REFERENCE, kafka_literal_secrets

MASK = "******"

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

#: the supported properties; each group is replaced whole when an override sets one of its keys
SASL_CREDENTIALS = ("sasl.jaas.config", "sasl.username", "sasl.password")
TRUSTSTORE = ("ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
              "ssl.truststore.certificates")
KEYSTORE = ("ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
            "ssl.keystore.key", "ssl.keystore.certificate.chain")
GROUPS = (SASL_CREDENTIALS, TRUSTSTORE, KEYSTORE)
KEYS = ("security.protocol", "sasl.mechanism", *SASL_CREDENTIALS, *TRUSTSTORE, *KEYSTORE,
        "ssl.endpoint.identification.algorithm")
#: properties whose value is a secret (sasl.jaas.config: its password="..." part)
SECRET_KEYS = ("sasl.password", "ssl.truststore.password", "ssl.keystore.password", "ssl.key.password",
               "ssl.keystore.key")
#: Kafka's own config-provider declarations: accepted so one file also serves Kafka's tools, and
#: dropped from every rendering (references are resolved here)
PROVIDER_PREFIX = "config.providers"

_REF = re.compile(r"\$\{(file|env):([^}]*)\}")
_ONLY_REF = KAFKA_REFERENCE
_JAAS_PASSWORD = re.compile(r'(password\s*=\s*")((?:[^"\\]|\\.)*)(")')
_JAAS_USERNAME = re.compile(r'username\s*=\s*"((?:[^"\\]|\\.)*)"')


# -- Java properties files -----------------------------------------------------------------------
def parse_properties(text: str) -> dict[str, str]:
    """A Java ``.properties`` text: ``key=value``, ``key: value`` or ``key value``; ``#``/``!``
    comments; a line ending in an odd number of backslashes continues on the next one."""
    out: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip() if logical else raw
        if not logical and (not line.strip() or line.lstrip()[:1] in ("#", "!")):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_entry(logical.lstrip())
        out[key] = value
        logical = ""
    if logical:
        key, value = _split_entry(logical.lstrip())
        out[key] = value
    return out


def _split_entry(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2:i + 6] or ""):
                out.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _escape(s: str, key: bool) -> str:
    out = []
    for i, c in enumerate(s):
        if c == "\\":
            out.append("\\\\")
        elif c in "\n\r\t\f":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}[c])
        elif c in "=:#!" and key or c == " " and (key or i == 0):
            out.append("\\" + c)
        elif ord(c) > 0x7E or ord(c) < 0x20:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


def load_properties(path: Path | str, what: str = "Kafka client properties") -> dict[str, str]:
    path = Path(path)
    try:
        return parse_properties(path.read_text(encoding="latin-1"))
    except FileNotFoundError:
        raise ConfigError(f"{what}: {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{what}: {path} cannot be read ({exc.strerror})") from None


# -- validation --------------------------------------------------------------------------------
def _is_secret(key: str) -> bool:
    return key in SECRET_KEYS or "password" in key or "secret" in key


#: the keys whose secret is written out instead of referenced (the spec file refuses them)
literal_secrets = kafka_literal_secrets


def validate(props: Mapping[str, str], where: str) -> None:
    """``ConfigError`` (exit 2) naming ``where`` and the property, never a secret value."""
    unknown = sorted(k for k in props if k not in KEYS and not k.startswith(PROVIDER_PREFIX))
    if "bootstrap.servers" in unknown:
        raise ConfigError(f"{where}: bootstrap.servers is not a client security property; set "
                          f"{ENV_VARS['bootstrap_servers']} instead")
    if unknown:
        raise ConfigError(f"{where}: unsupported Kafka client properties {unknown}; supported: "
                          f"{', '.join(KEYS)} (and config.providers*)")
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"{where}: security.protocol={props['security.protocol']!r} is not one of "
                          f"{', '.join(PROTOCOLS)}")
    sasl = {k for k in props if k.startswith("sasl.")}
    ssl = {k for k in props if k.startswith("ssl.")}
    if protocol.startswith("SASL_"):
        mech = props.get("sasl.mechanism")
        if mech is None:
            raise ConfigError(f"{where}: security.protocol={protocol} needs sasl.mechanism "
                              f"({', '.join(MECHANISMS)})")
        if mech.upper() not in MECHANISMS:
            raise ConfigError(f"{where}: sasl.mechanism={mech!r} is not supported; one of {', '.join(MECHANISMS)}")
        jaas = props.get("sasl.jaas.config")
        plain = [k for k in ("sasl.username", "sasl.password") if k in props]
        if jaas is not None and plain:
            raise ConfigError(f"{where}: give the credentials once: sasl.jaas.config or "
                              f"sasl.username + sasl.password, not both")
        if jaas is not None:
            module = jaas.split()[0] if jaas.split() else ""
            if module != LOGIN_MODULES[mech.upper()]:
                raise ConfigError(f"{where}: sasl.jaas.config must use {LOGIN_MODULES[mech.upper()]} for "
                                  f"sasl.mechanism={mech.upper()} (it names {module or 'no login module'})")
            if not _JAAS_USERNAME.search(jaas) or not _JAAS_PASSWORD.search(jaas):
                raise ConfigError(f'{where}: sasl.jaas.config needs username="..." and password="..."')
        elif len(plain) != 2:
            raise ConfigError(f"{where}: security.protocol={protocol} needs credentials: sasl.jaas.config, or "
                              f"sasl.username and sasl.password")
    elif sasl:
        raise ConfigError(f"{where}: {sorted(sasl)} need security.protocol SASL_SSL or SASL_PLAINTEXT "
                          f"(it is {protocol})")
    if ssl and not protocol.endswith("SSL"):
        raise ConfigError(f"{where}: {sorted(ssl)} need security.protocol SSL or SASL_SSL (it is {protocol})")
    ttype = props.get("ssl.truststore.type", "JKS" if "ssl.truststore.location" in props else "PEM").upper()
    if ttype != "PEM":
        raise ConfigError(f"{where}: ssl.truststore.type={ttype}: the platform's Python clients (librdkafka) "
                          f"read only PEM; convert the store (keytool -exportcert -rfc) and set "
                          f"ssl.truststore.type=PEM")
    ktype = props.get("ssl.keystore.type", "PKCS12" if "ssl.keystore.location" in props else "PEM").upper()
    if ktype not in ("PEM", "PKCS12"):
        raise ConfigError(f"{where}: ssl.keystore.type={ktype}: use PKCS12 or PEM (librdkafka cannot read JKS; "
                          f"keytool -importkeystore -deststoretype PKCS12 converts it)")
    algo = props.get("ssl.endpoint.identification.algorithm")
    if algo not in (None, "", "https", "HTTPS"):
        raise ConfigError(f"{where}: ssl.endpoint.identification.algorithm must be 'https' or empty")


# -- references --------------------------------------------------------------------------------
def resolve(props: Mapping[str, str], where: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every ``${file:...}`` / ``${env:...}`` replaced by what it names (inside sasl.jaas.config's
    quotes, escaped for them); provider declarations dropped."""
    env = os.environ if environ is None else environ
    out = {}
    for key, value in props.items():
        if key.startswith(PROVIDER_PREFIX):
            continue

        def sub(m: re.Match, key: str = key) -> str:
            got = _reference(m.group(1), m.group(2), key, where, env)
            return _jaas_quote(got) if key == "sasl.jaas.config" else got

        out[key] = _REF.sub(sub, str(value))
    return out


def _reference(provider: str, arg: str, key: str, where: str, env: Mapping[str, str]) -> str:
    ref = f"${{{provider}:{arg}}}"
    if provider == "env":
        if not env.get(arg):
            raise ConfigError(f"{where}: {key} refers to {ref}, but the environment variable {arg} is not set")
        return env[arg]
    path, prop = arg, ""
    head, sep, tail = arg.rpartition(":")
    if sep and head and "/" not in tail:  # ${file:/path:key}, Kafka's FileConfigProvider form
        path, prop = head, tail
    if not Path(path).is_absolute():
        raise ConfigError(f"{where}: {key} refers to {ref}: the path must be absolute")
    if prop:
        values = load_properties(path, f"{where}: {key} refers to {ref}")
        if prop not in values:
            raise ConfigError(f"{where}: {key} refers to {ref}, but {path} has no key {prop!r}")
        return values[prop]
    try:
        text = Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{where}: {key} refers to {ref}, which cannot be read ({exc.strerror})") from None
    if not text:
        raise ConfigError(f"{where}: {key} refers to {ref}, which is empty")
    return text


# -- merging and renderings --------------------------------------------------------------------
def merge(base: Mapping[str, str], overlay: Mapping[str, str]) -> dict[str, str]:
    """``overlay`` over ``base``, property by property; credentials, truststore and keystore are
    each replaced whole when the overlay sets any of their keys, and a ``security.protocol`` of the
    overlay drops the base's SASL (or SSL) properties it does not use."""
    out = dict(base)
    for group in GROUPS:
        if any(k in overlay for k in group):
            for k in group:
                out.pop(k, None)
    if "security.protocol" in overlay:
        protocol = str(overlay["security.protocol"]).upper()
        for k in [k for k in out if k not in overlay]:
            if (k.startswith("sasl.") and not protocol.startswith("SASL_")) or \
                    (k.startswith("ssl.") and not protocol.endswith("SSL")):
                out.pop(k)
    out.update(overlay)
    return out


def _java(props: Mapping[str, str]) -> dict[str, str]:
    """Resolved properties as the Java client takes them (sasl.username/password -> sasl.jaas.config)."""
    out = {k: v for k, v in props.items() if not k.startswith(PROVIDER_PREFIX)}
    user, password = out.pop("sasl.username", None), out.pop("sasl.password", None)
    if user is not None and password is not None:
        module = LOGIN_MODULES[out.get("sasl.mechanism", "PLAIN").upper()]
        out["sasl.jaas.config"] = f'{module} required username="{_jaas_quote(user)}" password="{_jaas_quote(password)}";'
    return out


def _jaas_quote(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def librdkafka(props: Mapping[str, str]) -> dict[str, str]:
    """Resolved properties as confluent-kafka (librdkafka) configuration."""
    conf = {k: v for k, v in props.items() if not k.startswith(PROVIDER_PREFIX)}
    keystore_type = conf.get("ssl.keystore.type", "PKCS12").upper()
    pem_store = keystore_type == "PEM" and "ssl.keystore.location" in conf
    location = conf.pop("ssl.keystore.location") if pem_store else None
    key, chain = conf.pop("ssl.keystore.key", None), conf.pop("ssl.keystore.certificate.chain", None)
    conf.pop("ssl.keystore.password", None) if keystore_type == "PEM" else None
    out = client_config({f"kafka.{k}": v for k, v in conf.items()})
    if location is not None:  # one PEM file with the key and its chain: OpenSSL reads each part
        out["ssl.key.location"] = out["ssl.certificate.location"] = location
    if key is not None:
        out["ssl.key.pem"] = key
    if chain is not None:
        out["ssl.certificate.pem"] = chain
    if "security.protocol" in out:
        out["security.protocol"] = out["security.protocol"].lower()
    return out


def spark_options(props: Mapping[str, str]) -> dict[str, str]:
    """Resolved properties as options of Spark's Kafka source and sink."""
    return {f"kafka.{k}": v for k, v in _java(props).items()}


def java_properties(props: Mapping[str, str]) -> str:
    """Resolved properties as a Java properties file (Kafka's tools, ``--command-config``)."""
    return "".join(f"{_escape(k, True)}={_escape(v, False)}\n" for k, v in sorted(_java(props).items()))


def mask(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A copy to print: secret values (and sasl.jaas.config's password) hidden; references shown."""
    out: dict[str, Any] = {}
    for k, v in conf.items():
        plain_k = k.removeprefix("kafka.")
        if plain_k == "sasl.jaas.config":
            out[k] = _JAAS_PASSWORD.sub(lambda m: m.group(1) + (m.group(2) if _ONLY_REF.match(m.group(2))
                                                                else MASK) + m.group(3), str(v))
        elif _is_secret(plain_k) or plain_k in ("ssl.key.pem", "ssl_key"):
            out[k] = v if isinstance(v, str) and _ONLY_REF.match(v) else MASK
        else:
            out[k] = v
    return out


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
    user = props.get("sasl.username") or next(iter(_JAAS_USERNAME.findall(props.get("sasl.jaas.config", ""))), None)
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
