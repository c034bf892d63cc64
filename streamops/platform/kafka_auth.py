"""The embedded broker secured (``platform up --kafka-security sasl_ssl``): a SASL_SSL client listener
with SCRAM-SHA-512 users, and TLS from a CA of its own.

At the first secured start ``prepare`` generates, under ``$STREAMOPS_HOME/kafka/security/`` (mode
0700): a CA and a broker certificate for ``STREAMOPS_HOST`` (openssl; Kafka reads them as PEM
stores), a random password per SCRAM user in a file of mode 0600 (``streamops``: every platform
client; ``broker``: the broker's own inter-broker login), and ``client.properties``, the platform's
default client configuration, which names the password only by reference. The users are added when
the storage is formatted (``StorageTool format --add-scram``). The KRaft controller listener stays
PLAINTEXT on the loopback address; the only client listener is SASL_SSL, and it is also the
inter-broker one.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import subprocess
from pathlib import Path

from streamops.host.files import write_private
from streamops.kafka.security import embedded_client_properties, embedded_security, embedded_security_dir
from streamops.platform.exceptions import KafkaStorageError, PlatformError
from streamops.settings import ENV_VARS, Settings

MECHANISM = "SCRAM-SHA-512"
CLIENT_USER = "streamops"
BROKER_USER = "broker"
LISTENER = "SASL_SSL"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def password_file(settings: Settings, user: str) -> Path:
    return embedded_security_dir(settings) / f"{user}.password"


def ca_file(settings: Settings) -> Path:
    return embedded_security_dir(settings) / "ca.pem"


def keystore_file(settings: Settings) -> Path:
    """The broker's private key and certificate chain, one PEM file (``ssl.keystore.type=PEM``)."""
    return embedded_security_dir(settings) / "broker-keystore.pem"


def users_marker(settings: Settings) -> Path:
    """Holds the cluster id of the storage that was formatted with the SCRAM users."""
    return embedded_security_dir(settings) / "scram-users.cluster-id"


def secured(settings: Settings) -> bool:
    return settings.bootstrap_servers is None and embedded_security(settings) == "sasl_ssl"


def password(settings: Settings, user: str) -> str:
    """The user's password, generated (random, mode 0600) on first use."""
    path = password_file(settings, user)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_private(path, secrets.token_urlsafe(24) + "\n")
    return path.read_text().strip()


def _openssl(args: list[str], cwd: Path) -> None:
    try:
        r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError:
        raise PlatformError("openssl is not installed; the secured embedded broker needs it for its CA and "
                            "certificate (Debian: apt-get install openssl)") from None
    if r.returncode != 0:
        raise PlatformError(f"openssl {args[0]} failed (exit {r.returncode}): {(r.stdout + r.stderr).strip()[-1500:]}")


def _san(host: str) -> str:
    names = {"DNS:localhost", "IP:127.0.0.1"}
    try:
        names.add(f"IP:{ipaddress.ip_address(host)}")
    except ValueError:
        names.add(f"DNS:{host}")
    return ",".join(sorted(names))


def ensure_certificates(settings: Settings) -> None:
    """A CA (once) and a broker certificate for the current host (again when the host changes)."""
    folder = embedded_security_dir(settings)
    ca_key = folder / "ca.key"
    if not ca_key.is_file() or not ca_file(settings).is_file():
        _openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem.tmp",
                  "-days", "3650", "-subj", "/CN=streamops embedded Kafka CA",
                  "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign"], folder)
        os.chmod(ca_key, 0o600)
        (folder / "ca.pem.tmp").replace(ca_file(settings))
        keystore_file(settings).unlink(missing_ok=True)
    host_file = folder / "broker.host"
    if keystore_file(settings).is_file() and host_file.is_file() and host_file.read_text() == settings.host:
        return
    (folder / "broker.ext").write_text(f"subjectAltName={_san(settings.host)}\nbasicConstraints=CA:FALSE\n"
                                       "keyUsage=critical,digitalSignature,keyEncipherment\n"
                                       "extendedKeyUsage=serverAuth,clientAuth\n")
    _openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr",
              "-subj", f"/CN={settings.host}"], folder)
    os.chmod(folder / "broker.key", 0o600)
    _openssl(["x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-out", "broker.pem",
              "-days", "825", "-sha256", "-set_serial", str(secrets.randbits(63)), "-extfile", "broker.ext"], folder)
    write_private(keystore_file(settings), (folder / "broker.key").read_text() + (folder / "broker.pem").read_text()
                   + ca_file(settings).read_text())
    for name in ("broker.csr", "broker.ext"):
        (folder / name).unlink(missing_ok=True)
    host_file.write_text(settings.host)


def client_properties_text(settings: Settings) -> str:
    pw = password_file(settings, CLIENT_USER)
    return ("# the platform's Kafka client defaults, written by `streamops platform up --kafka-security sasl_ssl`;\n"
            f"# edits are overwritten. The password is only referenced; it is in {pw} (mode 0600).\n"
            f"security.protocol={LISTENER}\n"
            f"sasl.mechanism={MECHANISM}\n"
            f'sasl.jaas.config={SCRAM_MODULE} required username="{CLIENT_USER}" password="${{file:{pw}}}";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={ca_file(settings)}\n"
            "ssl.endpoint.identification.algorithm=https\n")


def prepare(settings: Settings) -> str:
    """Before the broker starts: the certificates, passwords and client properties of a secured
    broker (what is missing of them), or, for a plaintext one, its client properties removed (the
    marker of a secured broker; the CA and passwords stay for the next secured start)."""
    if not secured(settings):
        embedded_client_properties(settings).unlink(missing_ok=True)
        return "plaintext"
    folder = embedded_security_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    ensure_certificates(settings)
    for user in (CLIENT_USER, BROKER_USER):
        password(settings, user)
    write_private(embedded_client_properties(settings), client_properties_text(settings))
    return "sasl_ssl"


def server_properties(settings: Settings) -> dict[str, str]:
    """The listener and TLS/SASL properties of a secured broker (over ``kafka_broker``'s plaintext ones)."""
    h, port, cport = settings.host, settings.kafka_port, settings.kafka_controller_port
    return {
        "listeners": f"{LISTENER}://{h}:{port},CONTROLLER://{h}:{cport}",
        "advertised.listeners": f"{LISTENER}://{h}:{port}",
        "inter.broker.listener.name": LISTENER,
        "listener.security.protocol.map": f"{LISTENER}:SASL_SSL,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        f"listener.name.{LISTENER.lower()}.{MECHANISM.lower()}.sasl.jaas.config":
            f'{SCRAM_MODULE} required username="{BROKER_USER}" password="{password(settings, BROKER_USER)}";',
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore_file(settings)),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_file(settings)),
        "ssl.client.auth": "none",
        "ssl.endpoint.identification.algorithm": "https",
    }


def scram_arguments(settings: Settings) -> list[str]:
    """``StorageTool format`` arguments that create the SCRAM users."""
    out = []
    for user in (BROKER_USER, CLIENT_USER):
        out += ["--add-scram", f"{MECHANISM}=[name={user},password={password(settings, user)}]"]
    return out


def secrets_of(settings: Settings) -> list[str]:
    """The passwords, to mask them in any text that could carry them (a tool's output)."""
    return [password_file(settings, u).read_text().strip() for u in (CLIENT_USER, BROKER_USER)
            if password_file(settings, u).is_file()]


def redact(text: str, settings: Settings) -> str:
    for pw in secrets_of(settings):
        text = text.replace(pw, "******")
    return text


def check_formatted_with_users(settings: Settings, cluster_id: str, data: Path) -> None:
    """A secured start on a storage formatted without the SCRAM users: no client could log in."""
    marker = users_marker(settings)
    if secured(settings) and (not marker.is_file() or marker.read_text().strip() != cluster_id):
        raise KafkaStorageError(
            f"the embedded broker's storage {data} was formatted without SCRAM users (it ran PLAINTEXT), so no "
            f"client could log in over SASL_SSL. Either run it PLAINTEXT (`streamops platform up "
            f"--kafka-security plaintext`, or unset {ENV_VARS['kafka_security']}), or move {data} aside (its "
            f"topics are then gone) and run `streamops platform up --kafka-security sasl_ssl` again")


def running_mode_conflict(settings: Settings) -> str | None:
    """The message when ``--kafka-security`` asks for another mode than the running broker's."""
    if settings.kafka_security is None or settings.bootstrap_servers is not None:
        return None
    running_with = "sasl_ssl" if embedded_client_properties(settings).is_file() else "plaintext"
    if running_with == settings.kafka_security:
        return None
    return (f"the embedded broker runs {running_with}; it cannot switch to {settings.kafka_security} while it "
            f"runs: stop it (`streamops platform down --only kafka`), then `streamops platform up "
            f"--kafka-security {settings.kafka_security}`")
