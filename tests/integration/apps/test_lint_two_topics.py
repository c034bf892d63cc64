"""``app lint`` of a job with two input topics, its Spark checks included: the sample feeds both
topics and the Spark query over both equals the plain-Python fold (a local Spark, no broker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.job_repo import TWO_TOPICS, write_repo


def test_app_lint_of_a_two_topic_job_with_spark(tmp_path: Path) -> None:
    root, _ = write_repo(tmp_path / "repo", {"two": TWO_TOPICS.format(A="clicks", B="views")},
                         {"two_topics": ("two", ["clicks", "views"], 4)})
    r = subprocess.run([sys.executable, "-m", "streamops.cli", "app", "lint", "two_topics", "--events", "300",
                        "--json"], cwd=tmp_path, env={**os.environ, "STREAMOPS_REPO": str(root)},
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    report = json.loads(r.stdout)
    assert report["ok"] and report["topics"] == {"clicks": 200, "views": 100}
    spark = report["checks"][-1]
    assert spark["name"] == "spark equals the python fold" and spark["ok"], spark
    assert "20 states" in spark["detail"] and "seeded checkpoint reads back equal" in spark["detail"]
