"""The secured embedded broker (``platform up --kafka-security sasl_ssl``): an app deployed on it,
fed, resized live and checked exact, every client of the platform using the generated SCRAM user
and CA (the app's own clients a SCRAM user of its own, from its spec's ``kafka:`` overrides); a
client without credentials is refused, with a clear error naming the remedy; and no password is in
the state dir's logs, the ledger or ``status --json``."""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from streamops.kafka import security
from streamops.lifecycle import driver
from streamops.platform import kafka_auth, manager
from streamops.settings import Settings
from tests.fixtures.apps import AppHarness
from tests.fixtures.platform import on_cluster, overlay_repo

APP = "user_activity"
APP_USER = "ua-app"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _with_app_override(repo: Path, password_file: Path) -> None:
    """user_activity's clients log in as a SCRAM user of its own, its password only referenced."""
    spec = repo / "include" / "streams.yaml"
    text = spec.read_text()
    override = (f"  {APP}:\n    kafka:\n      sasl.jaas.config: '{SCRAM} required username=\"{APP_USER}\" "
                f"password=\"${{file:{password_file}}}\";'\n")
    assert f"  {APP}:\n" in text
    spec.write_text(text.replace(f"  {APP}:\n", override, 1))


def _grep(folder: Path, needles: list[str]) -> list[str]:
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            found += [f"{path} holds password #{i}" for i, n in enumerate(needles) if n.encode() in data]
    return found


def _airflow_task(settings: Settings, monkeypatch, capfd) -> tuple[dict, str]:
    """The reset DAG's task (a dry run), run in this process as a worker runs it: its XCom and log."""
    import sys
    from types import SimpleNamespace

    sys.path.insert(0, str(settings.repo / "plugins"))
    from streamops_airflow.operators import ResetOperator

    op = ResetOperator(task_id="reset", app=APP, target="earliest", dry_run=True)
    capfd.readouterr()
    with monkeypatch.context() as m:
        for var, value in settings.env().items():
            m.setenv(var, value)
        out = op.execute({"ti": SimpleNamespace(dag_id="streamops_reset", run_id="manual", task_id="reset")})
    log = capfd.readouterr()
    return out, log.out + log.err


def test_an_app_on_a_sasl_ssl_broker_runs_exact_and_no_secret_leaks(platform_factory, spark_cluster: Settings,
                                                                       tmp_path: Path, monkeypatch, capfd) -> None:
    base = platform_factory("kafka-sasl")
    repo = overlay_repo(Path(os.environ["STREAMOPS_REPO"]), tmp_path / "repo")
    s = on_cluster(base, spark_cluster).model_copy(update={"repo": repo, "kafka_security": "sasl_ssl"})
    manager.up(s, only=["kafka"])
    app = AppHarness(s, spark_cluster.spark_master_url, APP)
    b = s.kafka_bootstrap
    props = security.embedded_client_properties(s)
    assert props.is_file() and "SASL_SSL" in props.read_text()
    passwords = kafka_auth.secrets_of(s)
    assert len(passwords) == 2 and not any(pw in props.read_text() for pw in passwords)

    # the one client listener is SASL_SSL: a client without credentials gets nothing
    t0 = time.monotonic()
    md = None
    try:
        md = AdminClient({"bootstrap.servers": b, "log_level": 0}).list_topics(timeout=5)
    except Exception as exc:  # noqa: BLE001 - refused: no metadata
        assert "transport failure" in str(exc).lower() or "timed out" in str(exc).lower(), exc
    assert md is None, "a client without credentials was answered"
    assert time.monotonic() - t0 < 30
    app.produce(3_000, seed=11)  # in this process, with the platform's defaults (user streamops)
    # a user of the app's own, created with Kafka's tool through the platform's credentials
    app_pw = secrets.token_urlsafe(18)
    pw_file = tmp_path / "ua-app.password"
    pw_file.write_text("wrong-" + app_pw)
    pw_file.chmod(0o600)
    passwords.append(app_pw)
    r = app.cli("platform", "kafka-tool", "configs", "--alter", "--entity-type", "users", "--entity-name", APP_USER,
                "--add-config", f"SCRAM-SHA-512=[iterations=4096,password={app_pw}]", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    _with_app_override(repo, pw_file)

    # a wrong password of the app's user: a clear refusal (exit 1) naming where to correct it
    r = app.cli("reset", APP, "--to-earliest", "--dry-run", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"the Kafka broker at {b} refused this client: SASL authentication error" in r.stderr
    assert f"apps.{APP}.kafka in the spec file over the platform's defaults {props}" in r.stderr
    assert "Remedy: correct the SASL user and password" in r.stderr
    assert app_pw not in r.stderr + r.stdout
    # a literal secret in the spec file is refused at once (exit 2), naming the field, not the value
    spec_file = repo / "include" / "streams.yaml"
    good = spec_file.read_text()
    spec_file.write_text(good.replace(f"${{file:{pw_file}}}", "hunter2-literal"))
    r = app.cli("reset", APP, "--to-earliest", "--dry-run")
    assert r.returncode == 2 and "a secret in the spec file must be a reference" in r.stderr, r.stderr
    assert "hunter2-literal" not in r.stderr
    spec_file.write_text(good)
    pw_file.write_text(app_pw + "\n")
    r = app.cli("reset", APP, "--to-earliest", "--dry-run", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    # the Airflow side: a DAG task calls the same core, with the same configuration (the app's user)
    xcom, task_log = _airflow_task(s, monkeypatch, capfd)
    assert xcom["dry_run"] and xcom["records_to_process"] == 3_000, xcom
    assert "user-events[0]" in task_log, task_log[-2000:]
    assert not [pw for pw in passwords if pw in task_log + json.dumps(xcom, default=str)]

    # deploy through the supervisor, feed, resize live, check exact: every client on SASL_SSL
    manager.up(s, only=["supervisor"])
    try:
        r = app.cli("deploy", APP, "--parallelism", "1", "--json", timeout=420)
        assert r.returncode == 0, r.stderr[-3000:] + driver.log_tail(s, APP, 60)
        app.produce(2_000, seed=12)
        app.caught_up(5_000)  # a batch at x1 after the first one (whose executors the start trimmed)
        r = app.cli("resize", APP, "--parallelism", "2", "--strategy", "live", "--json", timeout=420)
        assert r.returncode == 0, r.stderr[-3000:] + driver.log_tail(s, APP, 60)
        out = json.loads(r.stdout)
        assert (out["parallelism"], out["strategy"]) == (2, "live")
        app.produce(2_000, seed=13)
        app.caught_up(7_000)
        r = app.cli("check", APP, "--json", timeout=600)
        report = json.loads(r.stdout)
        assert r.returncode == 0 and report["ok"] and report["input_records"] == 7_000, r.stdout[-3000:] + r.stderr
        # Kafka's own tool, through the platform's --command-config: the app's group and its lag
        r = app.cli("platform", "kafka-tool", "consumer-groups", "--describe", "--group", APP, timeout=120)
        assert r.returncode == 0 and "user-events" in r.stdout, r.stdout + r.stderr
        status = app.cli("status", APP, "--json")
        assert status.returncode == 0, status.stderr
        platform_status = app.cli("platform", "status", "--only", "kafka,supervisor", "--json")
        assert platform_status.returncode == 0, platform_status.stdout + platform_status.stderr

        # a platform client without credentials (TLS only): the broker closes its connections, and
        # the CLI says which configuration to check (exit 1)
        anonymous = tmp_path / "anonymous.properties"
        anonymous.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\n"
                             f"ssl.truststore.location={kafka_auth.ca_file(s)}\n")
        r = app.cli("produce", "user-events", "--events", "10",
                    env={"STREAMOPS_KAFKA_CLIENT_PROPERTIES": str(anonymous)})
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"no Kafka broker answered at {b}" in r.stderr, r.stderr
        assert f"wants other security than this client's security.protocol=SSL closes its connections: check " \
               f"{anonymous}" in r.stderr, r.stderr
        r = app.cli("stop", APP, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
    finally:
        manager.down(s, only=["supervisor"])

    # no password anywhere it could leak to: logs (the platform's, the driver's, the executors'),
    # the ledger, status output
    # (the whole state dir: logs/, apps/APP/driver.log, ledger.db*, the spec kept as last good and
    # pinned; the executors' logs are the shared cluster's), except where the secrets belong
    assert (s.state_dir / "ledger.db").is_file() and (s.state_dir / "logs" / "kafka.log").is_file()
    leaks = _grep(s.state_dir, passwords) + _grep(spark_cluster.state_dir / "spark", passwords)
    allowed = (str(security.embedded_security_dir(s)), str(s.state_dir / "kafka" / "server.properties"))
    leaks = [x for x in leaks if not x.startswith(allowed)]
    assert not leaks, leaks
    for output in (status.stdout + status.stderr, platform_status.stdout):
        assert not [pw for pw in passwords if pw in output]
