"""``observe.metrics``: one scrape gives every app's row (health, executors, lag per partition,
rates, state, batch) and the ledger's operations by kind and outcome, under Prometheus' names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streamops.app.dir import AppDir
from streamops.ledger import Ledger
from streamops.observe.metrics import registry
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


def test_latency_state_partitions_resize_pause_and_give_ups(tmp_path, monkeypatch) -> None:
    """The last batch's end-to-end latency and records per state partition, the last resize's
    pause (bench/resize.py's: the longest gap between batch commits from 5 s before its request to
    20 s after it converged) and the supervisor's give-ups, from fixture lines and ledger rows."""
    from streamops.ledger import store

    settings = Settings(home=tmp_path)
    t0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)  # the resize's window has closed
    monkeypatch.setattr(store, "utcnow", lambda: t0)
    ledger = Ledger.open(settings.ledger_db_url)
    ledger.set_desired("a1", status="running", parallelism=2, who="t")
    ledger.record("a1", "resize", {"parallelism": 2, "strategy": "live"}, who="t")  # request = converged = t0
    ledger.record("a1", "resize", {"parallelism": 3, "strategy": "restart"}, who="t", outcome="failed")
    for _ in range(2):
        ledger.record("a1", "give-up", who="supervisor", outcome="failed", error="crash loop")
    ledger.close()
    t = int(t0.timestamp() * 1000)
    # (batch, trigger start, duration): batches end at t-7 s (before the window), t-2 s, t+10 s, t+13 s,
    # t+31 s (after it): commits in [t-5 s, t+20 s] at t-2, t+10, t+13 -> longest gap 12 s
    for batch, at, dur in ((1, t - 8000, 1000), (2, t - 3000, 1000), (3, t + 9000, 1000), (4, t + 12000, 1000),
                           (5, t + 30000, 1000)):
        AppDir.of(settings, "a1").append_progress({
            "batch_id": batch, "timestamp": at, "input_rows": 11, "duration_ms": {"triggerExecution": dur},
            "end_offsets": [], "start_offsets": [], "latest_offsets": [],
            "input_newest_ms": t + 30500, "input_oldest_ms": t + 28000, "committed_ms": t + 31000,
            "state_partition_records": [3, 0, 7, 1], "hot_keys": [["u7", 6], ["u2", 3]]})
    reads: list[str] = []
    last_progress = AppDir.last_progress
    monkeypatch.setattr(AppDir, "last_progress", lambda self: reads.append(self.app) or last_progress(self))
    got = samples(generate_latest(registry(settings, lambda: SPECS)).decode())
    a1 = (("app", "a1"),)
    assert got[("streamops_app_end_to_end_latency_seconds", a1)] == 0.5  # newest record t+30.5 s, commit t+31 s
    assert got[("streamops_app_end_to_end_latency_max_seconds", a1)] == 3.0  # oldest record t+28 s
    assert {p: got[("streamops_app_batch_state_partition_records", (("app", "a1"), ("partition", p)))]
            for p in "0123"} == {"0": 3.0, "1": 0.0, "2": 7.0, "3": 1.0}
    assert {k: got[("streamops_app_hot_key_records", (("app", "a1"), ("key", k)))] for k in ("u7", "u2")} == \
        {"u7": 6.0, "u2": 3.0}
    assert got[("streamops_app_last_resize_pause_seconds", (("app", "a1"), ("strategy", "live")))] == 12.0
    assert got[("streamops_app_crash_loop_give_ups_total", a1)] == 2.0
    assert got[("streamops_app_crash_loop_give_ups_total", (("app", "a2"),))] == 0.0
    assert not any(name.startswith("streamops_app_last_resize") and dict(labels)["app"] == "a2"
                   for name, labels in got)  # never resized: left out
    assert sorted(reads) == ["a1", "a2"]  # the last progress line: read once per app and scrape


def test_a_replayed_batch_has_no_latency_and_an_idle_resize_pauses_the_whole_window() -> None:
    from streamops.observe import streams as so

    replayed = so.BatchPoint(4, 1000, 0, None, None, 500, None, None, None, newest_ms=900)
    assert replayed.latency_s(replayed.newest_ms) is None  # committed by an earlier driver
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    op = {"id": 7, "started_at": t0, "ended_at": t0 + timedelta(seconds=3), "params": {"strategy": "restart"}}
    t = int(t0.timestamp() * 1000)
    idle = so.resize_pause(op, [], now_ms=t + 60_000)
    assert (idle.seconds, idle.strategy, idle.final) == (28.0, "restart", True)  # 5 s + 3 s + 20 s
    open_ = so.resize_pause(op, [so.BatchPoint(1, t + 1000, 5, None, None, 1000, None, None, None)], now_ms=t + 10_000)
    assert (open_.seconds, open_.final) == (8.0, False)  # t-5 s .. t+10 s (now), one commit at t+2 s


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


def test_the_watermark_its_lag_its_holder_and_the_idle_partitions(tmp_path) -> None:
    """Issue 40: a stream-time app's watermark, how far it lags the newest stream time, the input
    partition that holds it since when and the idle ones (``observe.watermark``); an app without
    stream time has none of them."""
    from streamops.app.checkpoint import checkpoint_dir
    from tests.unit.observe.test_watermark import O0, O1, P0, P1, T0_MS, write_batch

    settings = Settings(home=tmp_path)
    Ledger.open(settings.ledger_db_url).close()
    for b in range(4):  # product-prices[1] quiet at 2000 from batch 1; [0] idle since T0 - 1 h
        write_batch(checkpoint_dir(settings, SPECS["a1"]), b,
                    {O0: 9000 + b, O1: 8000 + b, P0: 100, P1: 2000 if b else 9500}, {P0: T0_MS - 3_600_000})
    text = generate_latest(registry(settings, lambda: SPECS)).decode()
    got = samples(text)
    a1 = (("app", "a1"),)
    assert got[("streamops_app_watermark_seconds", a1)] == 2.0
    assert got[("streamops_app_watermark_lag_seconds", a1)] == 7.003  # 9003 - 2000 ms
    held = {labels: v for (name, labels), v in got.items() if name == "streamops_app_watermark_holder_since_seconds"}
    assert held == {(("app", "a1"), ("partition", "1"), ("topic", "product-prices")): (T0_MS + 1000) / 1000}
    idle = {labels: v for (name, labels), v in got.items() if name == "streamops_app_watermark_idle_since_seconds"}
    assert idle == {(("app", "a1"), ("partition", "0"), ("topic", "product-prices")): T0_MS / 1000 - 3600}
    assert not any(name.startswith("streamops_app_watermark") and dict(labels)["app"] == "a2"
                   for name, labels in got)  # no stream time: left out
    assert "# TYPE streamops_app_watermark_holder_since_seconds gauge" in text
