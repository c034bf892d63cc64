"""The embedded Spark standalone cluster: a trivial job with the cluster's secret really gets 2
executors; a driver or a worker without it is refused, and nothing takes submissions over REST."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

from streamops.host.process import read_pid
from streamops.platform import components, manager, spark_auth
from streamops.settings import Settings
from streamops.spark.security import embedded_auth_properties
from tests.fixtures.ports import free_ports

APP = Path(__file__).parent / "spark_apps" / "two_executor_sum.py"


def test_trivial_job_runs_on_two_executors(spark_cluster: Settings, platform) -> None:
    s = spark_cluster
    env = platform.env()
    cmd = [
        str(components.bin_dir() / "spark-submit"),
        "--master", s.spark_master_url,
        "--properties-file", str(embedded_auth_properties(s)),  # as every driver of the platform gets it
        "--conf", "spark.executor.cores=1",
        "--conf", "spark.cores.max=2",
        "--conf", "spark.executor.memory=512m",
        "--conf", "spark.driver.memory=512m",
        "--conf", f"spark.pyspark.python={sys.executable}",
        "--conf", "spark.ui.enabled=false",
        str(APP), "100000",
    ]
    r = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    assert result["total"] == 2 * sum(range(100000))
    assert result["executors"] == 2
    assert result["master"] == s.spark_master_url
    # the master saw the application finish with both workers' executors
    with urllib.request.urlopen(f"http://{s.host}:{s.spark_ui_port}/json/", timeout=5) as resp:
        master = json.loads(resp.read())
    done = {a["id"]: a for a in master["completedapps"]}
    assert result["app_id"] in done
    assert len([w for w in master["workers"] if w["state"] == "ALIVE"]) == 2


def _master(s: Settings) -> dict:
    with urllib.request.urlopen(f"http://{s.host}:{s.spark_ui_port}/json/", timeout=10) as resp:
        return json.loads(resp.read())


def _wait_for_line(log: Path, marker: str, proc: subprocess.Popen, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if marker in text:
            return text
        assert proc.poll() is None or marker in log.read_text(errors="replace"), text[-3000:]
        time.sleep(0.5)
    raise AssertionError(f"no {marker!r} in {log} after {timeout:.0f}s:\n{log.read_text(errors='replace')[-3000:]}")


def test_without_the_secret_a_driver_or_worker_is_refused_and_no_rest_server_listens(
        spark_cluster: Settings, platform, tmp_path: Path) -> None:
    s = spark_cluster
    secret = spark_auth.read(s)[spark_auth.SECRET]
    props = components.spark_properties(s)
    for f in (embedded_auth_properties(s), props):  # the daemons' and the drivers' copies of the secret
        assert f.stat().st_mode & 0o777 == 0o600 and secret in f.read_text()
    assert "spark.master.rest.enabled false" in props.read_text()
    # the master listens on its RPC and web UI ports only: no REST submission server (6066)
    master = psutil.Process(read_pid(manager.pid_path(s, "spark-master")).pid)
    listening = {c.laddr.port for p in (master, *master.children(recursive=True))
                 for c in p.net_connections("inet") if c.status == psutil.CONN_LISTEN}
    assert listening == {s.spark_master_port, s.spark_ui_port}

    env = platform.env()
    wrong = tmp_path / "wrong.properties"
    wrong.write_text("spark.authenticate true\nspark.authenticate.secret not-the-cluster-secret\n")
    driver_log, worker_log = tmp_path / "driver.log", tmp_path / "worker.log"
    rogue_ui = free_ports(1)[0]
    driver = subprocess.Popen(  # no authentication at all, as a driver that never read the file
        [str(components.bin_dir() / "spark-submit"), "--master", s.spark_master_url,
         "--name", "streamops-intruder", "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.memory=512m",
         str(APP), "10"],
        env=env, stdout=driver_log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    worker = subprocess.Popen(  # authentication on, with a secret of its own
        [str(components.bin_dir() / "spark-class"), "org.apache.spark.deploy.worker.Worker", s.spark_master_url,
         "--host", s.host, "--cores", "1", "--memory", "512m", "--webui-port", str(rogue_ui),
         "--work-dir", str(tmp_path / "rogue-worker"), "--properties-file", str(wrong)],
        env=env, stdout=worker_log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        text = _wait_for_line(driver_log, "Failed to connect to master", driver)
        assert "maybe your client does not have SASL enabled" in text
        text = _wait_for_line(worker_log, "Failed to connect to master", worker)
        assert "SaslException" in text
        state = _master(s)
        assert not any(a["name"] == "streamops-intruder" for a in state["activeapps"] + state["completedapps"])
        assert not [w for w in state["workers"] if w["webuiaddress"].endswith(f":{rogue_ui}")]
    finally:
        for proc in (driver, worker):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    # the secret is in no log: the platform's, the drivers', the executors' (the worker folders)
    for path in [*s.state_dir.rglob("*.log"), *s.state_dir.rglob("stderr"), *s.state_dir.rglob("stdout"),
                 driver_log, worker_log]:
        assert secret not in path.read_text(errors="replace"), path
