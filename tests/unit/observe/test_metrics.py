"""``observe.metrics``: one scrape gives every app's row (health, executors, lag per partition,
rates, state, batch) and the ledger's operations by kind and outcome, under Prometheus' names."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamops.ledger import Ledger
from streamops.observe.metrics import registry
from streamops.platform.appdir import AppDir
from streamops.settings import Settings
from streamops.spec import AppSpec

pytestmark = pytest.mark.unit

SPECS = {n: AppSpec(name=n, job="jobs.orders", input_topics=["in"], output_topic=f"{n}-out") for n in ("a1", "a2")}


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_a_scrape(tmp_path) -> None:
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    ledger.set_desired("a1", status="running", parallelism=2, who="t")
    ledger.report_observed("a1", status="running", parallelism=2, executors=2)
    for outcome in ("succeeded", "succeeded", "failed"):
        ledger.record("a1", "resize", {}, who="t", outcome=outcome)
    ledger.close()
    AppDir.of(settings, "a1").append_progress({
        "batch_id": 9, "timestamp": datetime.now(UTC).isoformat(), "input_rows": 30, "input_rows_per_s": 12.5,
        "processed_rows_per_s": 50.0, "duration_ms": {"triggerExecution": 1500},
        "end_offsets": ['{"in":{"0":10,"1":20}}'], "start_offsets": ['{"in":{"0":0,"1":0}}'],
        "latest_offsets": ['{"in":{"0":35,"1":20}}'], "state_rows": 4, "state_bytes": 2048, "executors": 2})
    got = samples(generate_latest(registry(settings, lambda: SPECS)).decode())
    a1 = (("app", "a1"),)
    assert got[("streamops_app_up", a1)] == 1.0 and got[("streamops_app_up", (("app", "a2"),))] == 0.0
    assert got[("streamops_app_health", (("app", "a2"), ("health", "not deployed")))] == 1.0
    assert got[("streamops_app_executors", a1)] == 2.0 and got[("streamops_app_parallelism_desired", a1)] == 2.0
    assert got[("streamops_app_lag_records", (("app", "a1"), ("partition", "0"), ("topic", "in")))] == 25.0
    assert got[("streamops_app_lag_records", (("app", "a1"), ("partition", "1"), ("topic", "in")))] == 0.0
    assert got[("streamops_app_lag_seconds", a1)] == 0.5  # 25 records at 50/s
    assert got[("streamops_app_batch_input_records", (("app", "a1"), ("partition", "1"), ("topic", "in")))] == 20.0
    assert got[("streamops_app_batch_duration_seconds", a1)] == 1.5
    assert (got[("streamops_app_state_rows", a1)], got[("streamops_app_state_bytes", a1)]) == (4.0, 2048.0)
    assert got[("streamops_app_last_batch_id", a1)] == 9.0
    assert got[("streamops_operations_total", (("app", "a1"), ("kind", "resize"), ("outcome", "succeeded")))] == 2.0
    assert got[("streamops_operations_total", (("app", "a1"), ("kind", "resize"), ("outcome", "failed")))] == 1.0
    assert ("streamops_app_executors", (("app", "a2"),)) not in got  # unknown: left out, not 0


def test_the_grafana_dashboard_uses_only_metrics_the_platform_exports(tmp_path) -> None:
    import json
    import re
    from pathlib import Path

    settings = Settings(home=tmp_path)
    Ledger.open(settings.ledger_db_url).close()
    exported = {fam.name for fam in registry(settings, lambda: SPECS).collect()}
    exported |= {f"{n}_total" for n in exported}  # a counter's samples
    dash = json.loads((Path(__file__).parents[3] / "include" / "grafana" / "streamops.json").read_text())
    used = {m for p in dash["panels"] for t in p["targets"] for m in re.findall(r"streamops_[a-z_]+", t["expr"])}
    assert used and used <= exported, sorted(used - exported)
