"""Kafka client security (streamops.kafka.security, kafka.config, platform.kafka_auth): the model,
its three renderings, merging, references, masking and validation, the configuration as a value
(``kafka_config`` builds a ``KafkaConfig``), and the secured embedded broker's configuration. No
broker runs here (tests/integration/kafka/test_kafka_security.py runs one)."""

from __future__ import annotations

import logging
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from streamops.exceptions import ConfigError
from streamops.kafka import properties, security
from streamops.kafka.admin import client_config
from streamops.kafka.config import KafkaConfig
from streamops.settings import Settings
from streamops.spec import AppSpec, parse_specs

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SECRET = "s3cr3t-Pa55word"
MASK_JAAS = f'password="{properties.MASK}"'


def _settings(tmp_path: Path, **kw) -> Settings:
    return Settings(home=tmp_path / "home", kafka_port=19092, kafka_controller_port=19093, **kw)


def _sasl_ssl(**extra: str) -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{SCRAM} required username="app" password="{SECRET}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/kafka/ca.pem", **extra}


# -- Java properties files ---------------------------------------------------------------------------
def test_a_java_properties_file_is_read_as_java_reads_it() -> None:
    text = ("# comment\n! also a comment\n\nsecurity.protocol = SASL_SSL\nsasl.mechanism:SCRAM-SHA-256\n"
            "ssl.endpoint.identification.algorithm=\n"
            f'sasl.jaas.config={SCRAM} required \\\n    username="a" \\\n    password="b";\n'
            "key\\ with\\ space value with spaces\ntab=a\\tb\nuni=\\u00e9\n")
    props = properties.parse_properties(text)
    assert props == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "ssl.endpoint.identification.algorithm": "",
        "sasl.jaas.config": f'{SCRAM} required username="a" password="b";',
        "key with space": "value with spaces", "tab": "a\tb", "uni": "\u00e9",
    }


def test_the_java_rendering_reads_back_to_the_same_properties() -> None:
    props = _sasl_ssl(**{"ssl.endpoint.identification.algorithm": ""})
    text = properties.java_properties(props)
    assert properties.parse_properties(text) == props


# -- validation --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("props", "needle"), [
    ({"client.id": "x"}, "unsupported Kafka client properties ['client.id']"),
    ({"bootstrap.servers": "h:1"}, "set STREAMOPS_BOOTSTRAP_SERVERS instead"),
    ({"security.protocol": "TLS"}, "security.protocol='TLS' is not one of"),
    ({"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": SECRET}, "needs sasl.mechanism"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": SECRET},
     "sasl.mechanism='GSSAPI' is not supported"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "needs credentials"),
    ({**_sasl_ssl(), "sasl.mechanism": "PLAIN"}, f"must use {PLAIN}"),
    ({**_sasl_ssl(), "sasl.username": "u"}, "give the credentials once"),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": SECRET}, "need security.protocol SASL_SSL"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u",
      "sasl.password": SECRET, "ssl.truststore.location": "/ca.pem"}, "need security.protocol SSL or SASL_SSL"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/ts.jks"}, "ssl.truststore.type=JKS"),
    ({"security.protocol": "SSL", "ssl.keystore.location": "/ks.jks", "ssl.keystore.type": "JKS"},
     "ssl.keystore.type=JKS"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none"}, "must be 'https' or empty"),
])
def test_bad_properties_are_a_config_error_naming_the_property_never_the_secret(props, needle) -> None:
    with pytest.raises(ConfigError, match="^where: .*" + __import__("re").escape(needle)) as err:
        properties.validate(props, "where")
    assert err.value.exit_code == 2
    assert SECRET not in str(err.value)


@pytest.mark.parametrize("props", [
    {},
    {"security.protocol": "PLAINTEXT"},
    _sasl_ssl(),
    {"security.protocol": "sasl_plaintext", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"},
    {"security.protocol": "SSL", "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "x",
     "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----"},
    {"security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem",
     "config.providers": "file", "config.providers.file.class": "x"},
])
def test_supported_configurations_pass(props) -> None:
    properties.validate(props, "where")


# -- merging -----------------------------------------------------------------------------------------
def test_an_app_override_replaces_the_credentials_whole_and_keeps_the_rest() -> None:
    base = _sasl_ssl()
    merged = properties.merge(base, {"sasl.username": "orders", "sasl.password": "${file:/run/orders.pw}"})
    assert "sasl.jaas.config" not in merged
    assert merged["sasl.username"] == "orders" and merged["ssl.truststore.location"] == "/etc/kafka/ca.pem"
    properties.validate(merged, "merged")
    merged = properties.merge(base, {"ssl.truststore.location": "/other/ca.pem"})
    assert "ssl.truststore.type" not in merged  # the truststore group is the override's alone
    assert merged["sasl.jaas.config"] == base["sasl.jaas.config"]


def test_an_override_of_the_protocol_drops_what_it_does_not_use() -> None:
    merged = properties.merge(_sasl_ssl(), {"security.protocol": "SSL"})
    assert not [k for k in merged if k.startswith("sasl.")]
    assert merged["ssl.truststore.location"] == "/etc/kafka/ca.pem"
    assert properties.merge(_sasl_ssl(), {"security.protocol": "PLAINTEXT"}) == {"security.protocol": "PLAINTEXT"}


# -- references --------------------------------------------------------------------------------------
def test_references_resolve_from_files_properties_and_the_environment(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text(f"{SECRET}\n")
    (tmp_path / "creds.properties").write_text("ks=ks-pass\n")
    props = {"sasl.jaas.config": f'{SCRAM} required username="a" password="${{file:{tmp_path}/pw}}";',
             "ssl.keystore.password": f"${{file:{tmp_path}/creds.properties:ks}}",
             "ssl.key.password": "${env:KEY_PW}", "config.providers": "file"}
    got = properties.resolve(props, "where", {"KEY_PW": 'q"uote'})
    assert got == {"sasl.jaas.config": f'{SCRAM} required username="a" password="{SECRET}";',
                   "ssl.keystore.password": "ks-pass", "ssl.key.password": 'q"uote'}
    jaas = properties.resolve({"sasl.jaas.config": 'x password="${env:P}";'}, "w", {"P": 'a"b\\c'})
    assert jaas["sasl.jaas.config"] == 'x password="a\\"b\\\\c";'  # escaped inside the quotes


@pytest.mark.parametrize(("value", "needle"), [
    ("${env:NOPE}", "environment variable NOPE is not set"),
    ("${file:relative/pw}", "the path must be absolute"),
    ("${file:/no/such/file}", "cannot be read"),
    ("${file:/no/such/file.properties:key}", "does not exist"),
])
def test_a_reference_that_does_not_resolve_is_a_config_error(value, needle) -> None:
    with pytest.raises(ConfigError, match=needle):
        properties.resolve({"sasl.password": value}, "where", {})


# -- renderings --------------------------------------------------------------------------------------
def test_the_librdkafka_rendering() -> None:
    conf = properties.librdkafka(_sasl_ssl())
    assert conf == {"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "app",
                    "sasl.password": SECRET, "ssl.ca.location": "/etc/kafka/ca.pem"}
    pem = properties.librdkafka({"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                               "ssl.keystore.location": "/k.pem", "ssl.key.password": "x",
                               "ssl.endpoint.identification.algorithm": ""})
    assert pem == {"security.protocol": "ssl", "ssl.key.location": "/k.pem", "ssl.certificate.location": "/k.pem",
                   "ssl.key.password": "x", "ssl.endpoint.identification.algorithm": "none"}
    p12 = properties.librdkafka({"security.protocol": "SSL", "ssl.keystore.location": "/k.p12",
                               "ssl.keystore.password": "x", "ssl.keystore.type": "PKCS12"})
    assert p12 == {"security.protocol": "ssl", "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "x"}
    assert properties.librdkafka({}) == {}


def test_the_spark_and_java_renderings_speak_jaas() -> None:
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u",
             "sasl.password": 'p"w', "config.providers": "env"}
    opts = properties.spark_options(props)
    assert opts == {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
                    "kafka.sasl.jaas.config": f'{PLAIN} required username="u" password="p\\"w";'}
    assert properties.parse_properties(properties.java_properties(props)) == {k[6:]: v for k, v in opts.items()}
    # the librdkafka rendering of the Spark options gives the same user and password back
    assert properties.librdkafka({k[6:]: v for k, v in opts.items()})["sasl.password"] == 'p"w'


# -- masking -----------------------------------------------------------------------------------------
def test_masking_hides_every_secret_and_shows_references() -> None:
    props = {**_sasl_ssl(), "ssl.keystore.password": SECRET, "ssl.key.password": "${env:KEY_PW}"}
    for rendering in (props, properties.librdkafka(props), properties.spark_options(props)):
        masked = properties.mask(rendering)
        assert SECRET not in repr(masked)
        assert masked.keys() == rendering.keys()
    masked = properties.mask(props)
    assert masked["sasl.jaas.config"] == f'{SCRAM} required username="app" password="******";'
    assert masked["ssl.key.password"] == "${env:KEY_PW}"
    assert properties.mask({"sasl.jaas.config": 'x password="${file:/p}";'})["sasl.jaas.config"] == \
        'x password="${file:/p}";'


# -- the spec: secrets only by reference -------------------------------------------------------------
def _spec(kafka: dict) -> dict:
    return {"name": "app1", "job": "jobs.x", "input_topics": ["in"], "output_topic": "out", "kafka": kafka}


def test_a_spec_may_name_secrets_only_by_reference() -> None:
    ok = AppSpec.model_validate(_spec({"sasl.username": "app1", "sasl.password": "${file:/run/secrets/app1}",
                                       "sasl.jaas.config": 'x username="a" password="${env:PW}";'}))
    assert ok.kafka["sasl.password"] == "${file:/run/secrets/app1}"
    for kafka in ({"sasl.password": SECRET}, {"sasl.jaas.config": f'x username="a" password="{SECRET}";'},
                  {"ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"}, {"ssl.key.password": "x${env:A}"}):
        with pytest.raises(ValueError, match="must be a reference") as err:
            AppSpec.model_validate(_spec(kafka))
        assert SECRET not in err.value.errors()[0]["msg"]  # what parse_specs reports


def test_a_spec_file_with_a_literal_secret_is_refused_naming_the_field(tmp_path: Path) -> None:
    text = ("apps:\n  app1:\n    job: jobs.x\n    input_topics: [in]\n    output_topic: out\n"
            "    kafka:\n      sasl.password: hunter2\n")
    with pytest.raises(ConfigError, match=r"apps\.app1\.kafka.*sasl\.password: a secret in the spec file must be "
                                          r"a reference"):
        parse_specs(text, tmp_path / "streams.yaml")


# -- settings ----------------------------------------------------------------------------------------
def test_the_settings_and_their_variables(tmp_path: Path) -> None:
    s = Settings.from_env({"STREAMOPS_KAFKA_SECURITY": "SASL_SSL",
                           "STREAMOPS_KAFKA_CLIENT_PROPERTIES": str(tmp_path / "c.properties")}, home=tmp_path)
    assert (s.kafka_security, s.kafka_client_properties) == ("sasl_ssl", tmp_path / "c.properties")
    assert s.env()["STREAMOPS_KAFKA_SECURITY"] == "sasl_ssl"
    assert Settings.from_env(s.env()) == s
    with pytest.raises(ConfigError, match="STREAMOPS_KAFKA_SECURITY: Input should be 'plaintext' or 'sasl_ssl'"):
        Settings.from_env({"STREAMOPS_KAFKA_SECURITY": "tls"})
    with pytest.raises(ConfigError, match="secures the embedded broker; for STREAMOPS_BOOTSTRAP_SERVERS give"):
        Settings.from_env({"STREAMOPS_KAFKA_SECURITY": "sasl_ssl", "STREAMOPS_BOOTSTRAP_SERVERS": "k:9092"})


# -- where a client's configuration comes from -------------------------------------------------------
def test_a_client_uses_the_platform_defaults_and_the_apps_overrides(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "pw").write_text(SECRET)
    (tmp_path / "orders.pw").write_text("orders-pw")
    defaults = tmp_path / "client.properties"
    defaults.write_text(properties.java_properties({**_sasl_ssl(), "sasl.jaas.config":
                                                  f'{SCRAM} required username="streamops" password="${{file:{tmp_path}/pw}}";'}))
    s = _settings(tmp_path, kafka_client_properties=defaults)
    platform = security.kafka_config(s)
    assert platform.bootstrap == s.kafka_bootstrap and platform.app is None
    assert platform.librdkafka()["sasl.username"] == "streamops"
    assert platform.librdkafka()["sasl.password"] == SECRET
    assert KafkaConfig.plaintext("elsewhere:9092").librdkafka() == {}  # no platform there: PLAINTEXT
    assert client_config("elsewhere:9092") == client_config(KafkaConfig.plaintext("elsewhere:9092"))
    spec = AppSpec.model_validate(_spec({"sasl.jaas.config":
                                         f'{SCRAM} required username="orders" password="${{file:{tmp_path}/orders.pw}}";'}))
    app = security.kafka_config(s, spec)
    assert app.librdkafka()["sasl.username"] == "orders"
    assert app.spark_options()["kafka.sasl.jaas.config"].endswith('password="orders-pw";')
    assert app.describe()["app_overrides"] == ["sasl.jaas.config"]
    assert platform.librdkafka()["sasl.username"] == "streamops"  # the platform's is its own value
    import threading

    seen = []  # a client made in another thread with the app's configuration is the app's
    worker = threading.Thread(target=lambda: seen.append(client_config(app)["sasl.username"]))
    worker.start()
    worker.join()
    assert seen == ["orders"]
    bad = AppSpec.model_validate(_spec({"sasl.mechanism": "GSSAPI"}))
    with pytest.raises(ConfigError, match=r"apps\.app1\.kafka \(merged over the platform's defaults\): "
                                          r"sasl\.mechanism='GSSAPI'"):
        security.kafka_config(s, bad)


def _two_apps(tmp_path: Path) -> tuple[Settings, AppSpec, AppSpec]:
    """A platform (user streamops) and two apps, each logging in as a SCRAM user of its own."""
    defaults = tmp_path / "client.properties"
    defaults.write_text(properties.java_properties(_sasl_ssl()))
    specs = []
    for name in ("orders", "payments"):
        (tmp_path / f"{name}.pw").write_text(f"{name}-{SECRET}")
        specs.append(AppSpec.model_validate({**_spec({"sasl.jaas.config": f'{SCRAM} required username="{name}" '
                                                      f'password="${{file:{tmp_path}/{name}.pw}}";'}), "name": name}))
    return _settings(tmp_path, kafka_client_properties=defaults), specs[0], specs[1]


def test_two_apps_in_one_process_each_give_their_clients_their_own_properties(tmp_path: Path) -> None:
    """What the ContextVar used to guarantee for two Airflow tasks in one worker: a client is
    made with the configuration it is handed, whatever else this process made, in any thread."""
    import threading

    from streamops.kafka.admin import CLIENT_LOG

    s, orders, payments = _two_apps(tmp_path)
    a, b = security.kafka_config(s, orders), security.kafka_config(s, payments)
    assert (a.app, a.overrides, b.app, b.overrides) == ("orders", ("sasl.jaas.config",),
                                                        "payments", ("sasl.jaas.config",))
    seen: dict[str, list[tuple[str, str]]] = {"orders": [], "payments": []}

    def make_clients(kafka: KafkaConfig) -> None:
        for _ in range(200):  # interleaved with the other app's, in another thread
            conf = client_config(kafka, {"group.id": "g"})
            seen[kafka.app].append((conf["sasl.username"], conf["sasl.password"]))

    threads = [threading.Thread(target=make_clients, args=(k,)) for k in (a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(seen["orders"]) == {("orders", f"orders-{SECRET}")} and len(seen["orders"]) == 400
    assert set(seen["payments"]) == {("payments", f"payments-{SECRET}")} and len(seen["payments"]) == 400
    conf = client_config(a)
    assert conf["bootstrap.servers"] == s.kafka_bootstrap and conf["logger"] is CLIENT_LOG
    assert conf["ssl.ca.location"] == "/etc/kafka/ca.pem"  # the platform's defaults under the override
    assert 'username="payments" password="payments-' in b.spark_options()["kafka.sasl.jaas.config"]
    assert security.kafka_config(s).librdkafka()["sasl.username"] == "app"  # the platform's: untouched
    msg = b.refusal_message("SASL authentication error: Authentication failed")
    assert f"apps.payments.kafka in the spec file over the platform's defaults {s.kafka_client_properties}" in msg


def test_a_configuration_prints_no_secret(tmp_path: Path) -> None:
    s, orders, _ = _two_apps(tmp_path)
    kafka = security.kafka_config(s, orders)
    assert kafka.properties["sasl.jaas.config"].endswith(f'password="orders-{SECRET}";')  # resolved inside
    for shown in (repr(kafka), str(kafka), f"{kafka}", repr([kafka]), repr({"k": kafka}),
                  repr(security.kafka_config(s)), str(kafka.describe(renderings=True))):
        assert SECRET not in shown, shown
    assert 'password="******"' in repr(kafka) and "orders" in repr(kafka) and s.kafka_bootstrap in repr(kafka)
    # secrets written in the platform's file (not references) are masked too
    assert f'password="{SECRET}"' in (tmp_path / "client.properties").read_text()
    assert SECRET not in repr(security.kafka_config(s)) and MASK_JAAS in repr(security.kafka_config(s))


def test_a_process_the_platform_started_finds_its_settings_in_the_environment(tmp_path: Path, monkeypatch) -> None:
    defaults = tmp_path / "client.properties"
    defaults.write_text("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/ca.pem\n")
    s = _settings(tmp_path, kafka_client_properties=defaults)
    for var, value in s.env().items():
        monkeypatch.setenv(var, value)
    kafka = security.kafka_config(Settings.from_env())  # what a driver, a task or a trigger builds
    assert kafka.bootstrap == s.kafka_bootstrap
    assert kafka.librdkafka() == {"security.protocol": "ssl", "ssl.ca.location": "/ca.pem"}


def test_a_secured_embedded_broker_is_remembered_by_its_client_properties(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    assert security.embedded_security(s) == "plaintext" and security.defaults_source(s) is None
    secured = _settings(tmp_path, kafka_security="sasl_ssl")
    with pytest.raises(ConfigError, match="do not exist yet: start it with `streamops platform up "
                                          "--kafka-security sasl_ssl`"):
        security.kafka_config(secured)
    security.embedded_client_properties(s).parent.mkdir(parents=True)
    security.embedded_client_properties(s).write_text("security.protocol=PLAINTEXT\n")
    assert security.embedded_security(s) == "sasl_ssl"  # the setting unset: as the broker last ran
    assert security.defaults_source(s) == security.embedded_client_properties(s)
    assert security.defaults_source(s.model_copy(update={"bootstrap_servers": "k:9092"})) is None


def test_a_tools_command_config_is_private_and_removed_after(tmp_path: Path) -> None:
    defaults = tmp_path / "client.properties"
    defaults.write_text(properties.java_properties(_sasl_ssl()))
    s = _settings(tmp_path, kafka_client_properties=defaults)
    with security.kafka_config(s).command_config(tmp_path / "tmp") as path:
        assert path is not None and stat.S_IMODE(path.stat().st_mode) == 0o600
        assert properties.parse_properties(path.read_text()) == _sasl_ssl()
    assert not path.exists()
    with KafkaConfig.plaintext("elsewhere:1").command_config() as none:
        assert none is None


# -- a broker's refusal ------------------------------------------------------------------------------
def test_a_refusal_is_named_with_the_configuration_to_correct(tmp_path: Path) -> None:
    defaults = tmp_path / "client.properties"
    defaults.write_text(properties.java_properties(_sasl_ssl()))
    s = _settings(tmp_path, kafka_client_properties=defaults)

    class Client:
        def poll(self, _t):
            logging.getLogger("streamops.kafka.client").error(
                "FAIL [rdkafka#producer-1] [thrd:sasl_ssl://h:1/bootstrap]: sasl_ssl://h:1/bootstrap: SASL "
                "authentication error: Authentication failed during authentication due to invalid credentials "
                "with SASL mechanism SCRAM-SHA-512 (after 312ms in state AUTH_REQ)")

    import time

    import streamops.kafka.admin  # noqa: F401 - attaches the handler to the client logger

    reason = security.refusal(Client(), time.monotonic())
    assert reason == ("SASL authentication error: Authentication failed during authentication due to invalid "
                      "credentials with SASL mechanism SCRAM-SHA-512")
    msg = security.kafka_config(s).refusal_message(reason)
    assert f"refused this client: {reason}. The client's configuration: the platform's defaults {defaults}" in msg
    assert "Remedy: correct the SASL user and password" in msg and SECRET not in msg
    assert security.refusal(type("Quiet", (), {"poll": lambda self, t: None})(), time.monotonic()) is None


def test_a_broker_that_closes_the_connection_gets_a_hint_about_security(tmp_path: Path) -> None:
    assert "give its client properties in STREAMOPS_KAFKA_CLIENT_PROPERTIES" in \
        KafkaConfig.plaintext("h:1").plaintext_hint()
    defaults = tmp_path / "client.properties"
    defaults.write_text("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/ca.pem\n")
    s = _settings(tmp_path, kafka_client_properties=defaults)
    assert security.kafka_config(s).plaintext_hint() == (
        f" (a broker that wants other security than this client's security.protocol=SSL closes its "
        f"connections: check {defaults})")


# -- the secured embedded broker ---------------------------------------------------------------------
def test_a_secured_broker_has_no_plaintext_client_listener(tmp_path: Path) -> None:
    from streamops.platform import kafka_auth, kafka_broker

    s = _settings(tmp_path, kafka_security="sasl_ssl")
    kafka_auth.password(s, kafka_auth.BROKER_USER)  # (the CA and certificate are made by prepare)
    props = kafka_broker.server_properties(s)
    assert props["listeners"] == "SASL_SSL://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["advertised.listeners"] == "SASL_SSL://127.0.0.1:19092"
    assert props["inter.broker.listener.name"] == "SASL_SSL"
    assert props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert (props["ssl.keystore.type"], props["ssl.truststore.type"]) == ("PEM", "PEM")
    assert "PLAINTEXT://" not in props["listeners"]
    path = kafka_broker.write_config(s)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the broker's own password is in it
    pw = kafka_auth.password_file(s, kafka_auth.BROKER_USER)
    assert stat.S_IMODE(pw.stat().st_mode) == 0o600 and len(pw.read_text().strip()) >= 24
    args = kafka_auth.scram_arguments(s)
    assert args[0] == "--add-scram" and args[1].startswith("SCRAM-SHA-512=[name=broker,password=")
    assert kafka_auth.password(s, "broker") not in kafka_auth.redact(f"bad {args[1]}", s)
    # plaintext: the broker's listeners as before
    assert kafka_broker.server_properties(_settings(tmp_path / "p"))["listeners"].startswith("PLAINTEXT://")


@pytest.mark.skipif(subprocess.run(["which", "openssl"], capture_output=True, check=False).returncode != 0,
                    reason="no openssl")
def test_prepare_makes_a_ca_a_broker_certificate_and_client_properties(tmp_path: Path) -> None:
    from streamops.platform import kafka_auth

    s = _settings(tmp_path, kafka_security="sasl_ssl")
    assert kafka_auth.prepare(s) == "sasl_ssl"
    folder = security.embedded_security_dir(s)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("ca.key", "broker.key", "broker-keystore.pem", "streamops.password", "broker.password"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600, name
    text = subprocess.run(["openssl", "x509", "-in", str(folder / "broker.pem"), "-noout", "-text"],
                          capture_output=True, text=True, check=True).stdout
    assert "IP Address:127.0.0.1" in text
    subprocess.run(["openssl", "verify", "-CAfile", str(folder / "ca.pem"), str(folder / "broker.pem")], check=True,
                   capture_output=True)
    client = security.embedded_client_properties(s).read_text()
    pw = kafka_auth.password(s, kafka_auth.CLIENT_USER)
    assert pw not in client and f"${{file:{kafka_auth.password_file(s, 'streamops')}}}" in client
    assert security.kafka_config(s).librdkafka()["sasl.password"] == pw
    before = (folder / "ca.pem").read_text()
    kafka_auth.prepare(s)  # again: nothing is regenerated
    assert (folder / "ca.pem").read_text() == before and kafka_auth.password(s, "streamops") == pw
    # switched to plaintext: the marker goes, the material stays for the next secured start
    assert kafka_auth.prepare(s.model_copy(update={"kafka_security": "plaintext"})) == "plaintext"
    assert not security.embedded_client_properties(s).exists() and (folder / "ca.pem").exists()


def test_a_secured_start_on_a_storage_formatted_without_users_is_refused(tmp_path: Path) -> None:
    from streamops.platform import kafka_broker
    from streamops.platform.exceptions import KafkaStorageError

    s = _settings(tmp_path, kafka_security="sasl_ssl")
    data = kafka_broker.data_dir(s)
    data.mkdir(parents=True)
    (data / "meta.properties").write_text("node.id=1\ncluster.id=abc\nversion=1\n")
    with pytest.raises(KafkaStorageError, match="formatted without SCRAM users.*--kafka-security "
                                                 "plaintext.*move .* aside"):
        kafka_broker.prepare_storage(s, {})
    assert kafka_broker.prepare_storage(_settings(tmp_path), {}) == "storage checked"


def test_switching_a_running_broker_is_refused(tmp_path: Path) -> None:
    from streamops.platform import kafka_auth

    s = _settings(tmp_path)
    assert kafka_auth.running_mode_conflict(s) is None
    assert "runs plaintext; it cannot switch to sasl_ssl while it runs: stop it" in \
        kafka_auth.running_mode_conflict(_settings(tmp_path, kafka_security="sasl_ssl"))


def test_the_cli_refuses_a_bad_security_setting_with_exit_2(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "STREAMOPS_HOME": str(tmp_path), "STREAMOPS_KAFKA_SECURITY": "tls"}
    r = subprocess.run([sys.executable, "-m", "streamops.cli", "platform", "status", "--json"], env=env,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 2 and "STREAMOPS_KAFKA_SECURITY" in r.stderr
    r = subprocess.run([sys.executable, "-m", "streamops.cli", "platform", "up", "--kafka-security", "tls"],
                       env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 2 and "--kafka-security: invalid choice" in r.stderr


def test_kafka_config_prints_the_configuration_with_every_secret_masked(tmp_path: Path) -> None:
    import json
    import os

    (tmp_path / "pw").write_text("from-a-file")
    defaults = tmp_path / "client.properties"
    defaults.write_text(properties.java_properties({**_sasl_ssl(), "ssl.keystore.type": "PEM",
                                                  "ssl.keystore.location": "/k.pem",
                                                  "ssl.key.password": f"${{file:{tmp_path}/pw}}"}))
    env = {**os.environ, "STREAMOPS_HOME": str(tmp_path / "home"), "STREAMOPS_KAFKA_CLIENT_PROPERTIES": str(defaults)}
    r = subprocess.run([sys.executable, "-m", "streamops.cli", "platform", "kafka-config", "--json"], env=env,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout + r.stderr and "from-a-file" not in r.stdout + r.stderr
    info = json.loads(r.stdout)
    assert (info["security_protocol"], info["sasl_username"], info["defaults"]) == ("SASL_SSL", "app", str(defaults))
    assert info["properties"]["ssl.key.password"] == f"${{file:{tmp_path}/pw}}"  # a reference is shown
    assert info["librdkafka"]["sasl.password"] == properties.MASK
    assert info["librdkafka"]["ssl.key.password"] == properties.MASK
    assert 'password="******"' in info["spark"]["kafka.sasl.jaas.config"]
    r = subprocess.run([sys.executable, "-m", "streamops.cli", "platform", "kafka-config"], env=env,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0 and "SASL_SSL, SCRAM-SHA-512 user app" in r.stdout and SECRET not in r.stdout


def test_a_client_refuses_what_is_neither_a_config_nor_an_address(tmp_path: Path) -> None:
    """A plain address stands for a PLAINTEXT client (tests, benches); anything else, such as the
    platform's Settings passed where its KafkaConfig was meant, is refused at once instead of being
    taken as an address that no broker answers (a test did that after the signatures changed)."""
    from streamops.kafka.config import as_config

    assert as_config("127.0.0.1:9092") == KafkaConfig.plaintext("127.0.0.1:9092")
    with pytest.raises(TypeError, match="needs a KafkaConfig or a bootstrap address, not Settings"):
        client_config(Settings(home=tmp_path))
