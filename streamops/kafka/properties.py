"""The Kafka client configuration model: Java client properties (``security.protocol``, ``sasl.*``,
``ssl.*``) as a ``client.properties`` file holds them, checked, merged, resolved and rendered.

Secrets may be references, resolved only when a configuration is built (``security.kafka_config``):
``${file:/abs/path}`` (the file's content, stripped), ``${file:/abs/path:key}`` (a key of a
properties file, as Kafka's ``FileConfigProvider``) and ``${env:NAME}`` (as Kafka's
``EnvVarConfigProvider``). Three renderings of one resolved configuration: ``librdkafka``
(confluent-kafka clients), ``spark_options`` (``kafka.``-prefixed options of Spark's connector) and
``java_properties`` (a file for Kafka's tools' ``--command-config``). ``mask`` hides secrets for
printing; no error message here ever carries a secret value. Where a client's configuration comes
from is ``kafka.security``'s; the value clients are made with, ``kafka.config.KafkaConfig``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamops.exceptions import ConfigError
from streamops.kafka.client_config import client_config
from streamops.settings import ENV_VARS
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
JAAS_USERNAME = re.compile(r'username\s*=\s*"((?:[^"\\]|\\.)*)"')


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
            if not JAAS_USERNAME.search(jaas) or not _JAAS_PASSWORD.search(jaas):
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
