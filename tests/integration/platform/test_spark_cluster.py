"""A trivial job on the embedded Spark standalone cluster really gets 2 executors."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from streamops.platform import components
from streamops.settings import Settings

APP = Path(__file__).parent / "spark_apps" / "two_executor_sum.py"


def test_trivial_job_runs_on_two_executors(spark_cluster: Settings, platform) -> None:
    s = spark_cluster
    env = platform.env()
    cmd = [
        str(components.bin_dir() / "spark-submit"),
        "--master", s.spark_master_url,
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
