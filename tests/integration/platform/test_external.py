"""``platform up --external``: the platform on services it does not run (the shared broker, a real
PostgreSQL). Each refusal is one error naming the service and its setting, with nothing started; a
good set starts only what is not external and is kept for every later command."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import sqlalchemy

from streamops.settings import SETTINGS_FILE, Settings
from tests.fixtures.platform import processes_of
from tests.fixtures.ports import free_ports
from tests.fixtures.postgres import create_database

CLI = [sys.executable, "-m", "streamops.cli", "platform"]


def _run(s: Settings, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # only the state dir and ports: what is external comes from the flags, then from the saved file
    base = {k: v for k, v in os.environ.items() if not k.startswith("STREAMOPS_") or k == "STREAMOPS_REPO"}
    return subprocess.run([*CLI, *args], check=False, env={**base, **s.env(), **(env or {})}, capture_output=True,
                          text=True, timeout=300)


def _started(s: Settings) -> list[str]:
    pids = s.state_dir / "pids"
    return sorted(p.name for p in pids.iterdir()) if pids.exists() else []


def test_refusals_name_the_service_and_start_nothing(platform_factory, kafka: str, postgres) -> None:
    s = platform_factory("external-refused")
    dead = free_ports(1)[0]

    r = _run(s, "up", "--only", "kafka,supervisor", "--external", f"kafka=127.0.0.1:{dead}")
    assert r.returncode == 1, r.stderr
    assert f"the external Kafka cluster (STREAMOPS_BOOTSTRAP_SERVERS): no Kafka broker answered at 127.0.0.1:{dead}" in r.stderr
    assert "platform up --only kafka" not in r.stderr and "check that the cluster runs" in r.stderr

    # one broker where the settings ask for three copies of every topic
    r = _run(s, "up", "--only", "supervisor", "--external", f"kafka={kafka}", env={"STREAMOPS_TOPIC_REPLICATION": "3"})
    assert r.returncode == 2, r.stderr
    assert f"the Kafka cluster at {kafka} has 1 broker(s), fewer than the replication factor 3" in r.stderr
    assert "STREAMOPS_TOPIC_REPLICATION" in r.stderr

    r = _run(s, "up", "--only", "spark", "--external", f"spark=spark://127.0.0.1:{dead}")
    assert r.returncode == 1, r.stderr
    assert f"the external Spark master spark://127.0.0.1:{dead} (STREAMOPS_SPARK_MASTER) does not answer" in r.stderr

    # PostgreSQL refuses a role it does not know; the URL's password is never printed
    url = f"postgresql+psycopg2://nobody:s3cret-pw@127.0.0.1:{postgres.port}/postgres"
    r = _run(s, "up", "--only", "supervisor", "--external", f"kafka={kafka}", "--external", f"ledger={url}", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    error = json.loads(r.stdout)["error"]
    assert error.startswith(f"the operations ledger at postgresql+psycopg2://nobody:***@127.0.0.1:{postgres.port}/postgres "
                            "(STREAMOPS_LEDGER_URL) refused the platform:"), error
    assert 'role "nobody" does not exist' in error and "s3cret-pw" not in r.stdout + r.stderr

    r = _run(s, "up", "--external", "ledger")
    assert r.returncode == 2 and "expected KIND=VALUE" in r.stderr, r.stderr
    assert _started(s) == [] and not (s.state_dir / SETTINGS_FILE).exists()  # nothing started, nothing kept
    assert processes_of(s.state_dir) == []


def test_up_on_external_kafka_and_postgres_starts_only_the_rest_and_keeps_them(platform_factory, kafka: str,
                                                                               postgres) -> None:
    s = platform_factory("external-up")
    ledger_url = create_database(postgres, "streamops_external")
    r = _run(s, "up", "--only", "kafka,supervisor", "--external", f"kafka={kafka}", "--external", f"ledger={ledger_url}",
             "--json")
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        info = json.loads(r.stdout)
        assert [c["name"] for c in info["components"]] == ["supervisor"]  # the broker is the external one
        assert [(e["kind"], e["at"]) for e in info["external"]] == [("kafka", kafka), ("ledger", ledger_url)]
        assert info["kafka_bootstrap"] == kafka and _started(s) == ["supervisor.pid"]
        saved = s.state_dir / SETTINGS_FILE
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600
        assert f"STREAMOPS_BOOTSTRAP_SERVERS={kafka}" in saved.read_text().splitlines()

        # a later command, with no external setting of its own, is on the same services
        r = _run(s, "status", "--only", "kafka,supervisor", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        status = json.loads(r.stdout)
        assert [(e["kind"], e["healthy"]) for e in status["external"]] == [("kafka", True), ("ledger", True)]
        assert [c["name"] for c in status["components"] if c["running"]] == ["supervisor"]
        # the supervisor it started opened the ledger on PostgreSQL (and so made its tables there)
        engine = sqlalchemy.create_engine(ledger_url)
        try:
            assert {"desired_state", "operations", "leases", "alembic_version"} <= set(sqlalchemy.inspect(engine).get_table_names())
        finally:
            engine.dispose()
    finally:
        down = _run(s, "down", "--json")
    assert down.returncode == 0, down.stderr
    assert [d["name"] for d in json.loads(down.stdout)["stopped"]] == ["supervisor"]
    assert processes_of(s.state_dir) == []

    # back to the platform's own broker: the saved setting removed
    r = _run(s, "up", "--only", "kafka", "--external", "kafka=embedded", "--json")
    try:
        assert r.returncode == 0, r.stderr
        assert [c["name"] for c in json.loads(r.stdout)["components"]] == ["kafka"]
        assert "STREAMOPS_BOOTSTRAP_SERVERS" not in (s.state_dir / SETTINGS_FILE).read_text()
    finally:
        _run(s, "down")
