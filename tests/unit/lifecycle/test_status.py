"""status without services: ledger rows, checkpoint absent, progress log, rendering."""

from __future__ import annotations

import json

from streamops.app.dir import AppDir
from streamops.ledger import Ledger
from streamops.lifecycle.status import app_status, render
from streamops.settings import Settings
from streamops.spec import AppSpec

SPEC = AppSpec(name="app1", job="jobs.x", input_topics=("in",), output_topic="o", changelog_topic="c",
               dlq_topic="d")


def test_status_reads_ledger_and_progress(tmp_path) -> None:
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    ledger.set_desired("app1", status="running", parallelism=2, who="cli:alice")
    ledger.report_observed("app1", status="running", pid=42, parallelism=2, executors=2, last_batch=7)
    op = ledger.begin("app1", "resize", {"parallelism": 3}, who="airflow:resize/run-9")
    progress = tmp_path / "apps" / "app1" / "batches.jsonl"
    progress.parent.mkdir(parents=True)
    progress.write_text("\n".join(json.dumps({"batch_id": i, "input_rows": 10 * i, "input_rows_per_s": 5.0,
                                              "processed_rows_per_s": 9.0, "state_rows": 3, "state_bytes": 99})
                                  for i in range(3)) + "\n{torn")

    st = app_status(SPEC, settings, ledger, with_lag=False)
    assert (st["desired"]["parallelism"], st["observed"]["pid"], st["lease"]["operation_id"]) == (2, 42, op.id)
    assert st["checkpoint"]["last_committed_batch"] is None and st["lag"] is None
    assert st["last_batch"]["batch_id"] == 2  # the torn last line is skipped
    text = render(st)
    assert "app1: desired running x2, observed running x2 (executors 2, pid 42" in text
    assert f"operation resize #{op.id} running since" in text and "asked by airflow:resize/run-9" in text
    assert "batch 2: 20 rows" in text
    ledger.close()


def test_status_of_a_never_deployed_app(tmp_path) -> None:
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    st = app_status(SPEC, settings, ledger, with_lag=False)
    assert (st["desired"], st["observed"], st["operations"]) == (None, None, [])
    assert render(st).startswith("app1: desired - x-, observed never seen")
    assert AppDir(tmp_path / "nothing").last_progress() is None
    ledger.close()
