"""`streamops platform up/status/down` through the real CLI: real processes, no orphans."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil

from streamops.settings import Settings
from tests.fixtures.platform import processes_of

CLI = [sys.executable, "-m", "streamops.cli", "platform"]


def _run(s: Settings, *args: str, env: dict[str, str] | None = None, timeout: float = 400):
    full_env = {**os.environ, **s.env(), **(env or {})}
    return subprocess.run([*CLI, *args], check=False, env=full_env, capture_output=True, text=True, timeout=timeout)


def test_up_status_down_round_trip(platform_factory) -> None:
    s = platform_factory("roundtrip")
    r = _run(s, "up", "--json")
    assert r.returncode == 0, r.stderr[-4000:]
    info = json.loads(r.stdout)
    comps = {c["name"]: c for c in info["components"]}
    assert set(comps) == {"kafka", "spark-master", "spark-worker-1", "spark-worker-2", "airflow-api-server",
                          "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer", "supervisor"}
    # every component started; whether each is healthy is read below with `status` (a reading right
    # after `up` may catch an Airflow heartbeat a moment late on 2 loaded cores: seen in a full run)
    assert all(c["pid"] for c in comps.values()), comps
    assert info["airflow_url"] == s.airflow_url
    assert json.loads((s.airflow_home / "simple_auth_manager_passwords.json.generated").read_text())["admin"]
    pids = {n: c["pid"] for n, c in comps.items()}

    again = _run(s, "up", "--json")  # idempotent: nothing restarted
    assert again.returncode == 0, again.stderr[-4000:]
    assert {c["name"]: c["pid"] for c in json.loads(again.stdout)["components"]} == pids

    # a point-in-time reading: Airflow's components are healthy while their heartbeats are recent,
    # and on 2 loaded cores one can be late for a moment right after `up` (seen once in a full run)
    deadline = time.time() + 30
    while (st := _run(s, "status", "--json")).returncode != 0 and time.time() < deadline:
        time.sleep(2)
    assert st.returncode == 0, st.stdout
    rows = json.loads(st.stdout)["components"]
    assert all(r["healthy"] and r["since"] for r in rows)
    assert {r["name"]: r["pid"] for r in rows} == pids
    text = _run(s, "status")
    assert "airflow-scheduler" in text.stdout and "healthy" in text.stdout

    tree = set()
    for pid in pids.values():
        proc = psutil.Process(pid)
        tree |= {pid} | {c.pid for c in proc.children(recursive=True)}
    assert len(tree) > len(pids)  # airflow forks executors/log servers: they must go too

    down = _run(s, "down", "--json")
    assert down.returncode == 0, down.stderr
    assert {d["name"] for d in json.loads(down.stdout)["stopped"]} == set(pids)
    assert not processes_of(s.state_dir), "orphans after down"
    for pid in tree:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    st = _run(s, "status", "--json")
    assert all(not r["running"] for r in json.loads(st.stdout)["components"])
    assert "nothing was running" in _run(s, "down").stdout


def test_failed_component_stops_what_up_started(platform_factory) -> None:
    s = platform_factory("failing")
    # a database server that does not answer is refused before anything starts (platform.external)
    bad_db = {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql+psycopg2://nobody@127.0.0.1:1/none"}
    r = _run(s, "up", env=bad_db, timeout=600)
    assert r.returncode == 1
    assert r.stderr.startswith("error: Airflow's metadata database at postgresql+psycopg2://nobody@127.0.0.1:1/none "
                               "(AIRFLOW__DATABASE__SQL_ALCHEMY_CONN) refused the platform"), r.stderr
    assert "starting" not in r.stdout and not list((s.state_dir / "pids").glob("*.pid"))
    # a database Airflow cannot make (a SQLite file in a folder that does not exist) fails only at its
    # migration, after the broker and Spark started: they are stopped again
    bad_db = {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{s.state_dir}/no-such-folder/airflow.db"}
    r = _run(s, "up", env=bad_db, timeout=600)
    assert r.returncode == 1
    assert "airflow db migrate failed" in r.stderr
    assert "Last lines of" in r.stderr and "airflow-db-migrate.log" in r.stderr
    assert "stopping what this 'up' started: kafka, spark-master" in r.stdout
    assert not processes_of(s.state_dir), "up left processes behind after a failed start"
    assert not list((s.state_dir / "pids").glob("*.pid"))


def test_a_damaged_kafka_storage_or_jar_is_refused_with_the_remedy_and_nothing_starts(platform_factory, tmp_path) -> None:
    """The embedded broker's storage without its meta.properties (a format cut short, a hand-made
    folder) is not formatted over: `up` names the folder and what to do, exits 1, starts nothing.
    A pinned jar that differs from its checksum stops `up` the same way."""
    import shutil

    from streamops.host import jars
    from streamops.platform import kafka_broker

    s = platform_factory("damaged-kafka")
    r = _run(s, "up", "--only", "kafka")
    assert r.returncode == 0, r.stderr
    assert "kafka: storage formatted" in r.stdout
    assert _run(s, "down", "--only", "kafka").returncode == 0
    meta = kafka_broker.data_dir(s) / "meta.properties"
    saved = meta.read_text()
    meta.unlink()
    r = _run(s, "up", "--only", "kafka")
    assert r.returncode == 1
    assert f"{kafka_broker.data_dir(s)} holds files but no meta.properties" in r.stderr
    assert "move" in r.stderr and "aside" in r.stderr and "streamops platform up" in r.stderr
    assert not processes_of(s.state_dir) and not list((s.state_dir / "pids").glob("*.pid"))
    assert any(kafka_broker.data_dir(s).iterdir())  # untouched

    meta.write_text(saved)
    copy = tmp_path / "jars"
    shutil.copytree(jars.jars_dir() / jars.KAFKA_BROKER, copy / jars.KAFKA_BROKER)
    victim = copy / jars.KAFKA_BROKER / jars.pinned(jars.KAFKA_BROKER)[0][1]
    victim.write_bytes(victim.read_bytes() + b"tampered")
    r = _run(s, "up", "--only", "kafka", env={jars.JARS_DIR_VAR: str(copy)})
    assert r.returncode == 1 and "does not match its checksum" in r.stderr and "scripts/bootstrap.sh" in r.stderr
    assert not processes_of(s.state_dir)

    r = _run(s, "up", "--only", "kafka")  # the storage as it was: the broker starts on it again
    assert r.returncode == 0, r.stderr
    assert "kafka: storage checked" in r.stdout
    assert _run(s, "down", "--only", "kafka").returncode == 0
