"""The Streams view in the Airflow UI (issue 25), in a real browser: Debian's Chromium driven by
Playwright (its Python package; no browser download), against the platform's Airflow with auth on.

Log in through Airflow's own login page, open Browse > Streams, see the deployed app with the lag
and executors the platform knows; open the app's page and its charts; open the resize DAG's
trigger form from the page (the app filled in) and resize the app through it; see the resize
drawn on the charts. Also: the plugin's routes refuse a request without Airflow's login, and a
DAG's "Stream app" tab leads to its app's page; after the resize the platform's Prometheus
endpoint gives the same executors, parallelism and operation counts as ``status --json``. Screenshots go to ``STREAMOPS_SCREENSHOTS`` (a
folder; default: the test's temporary folder): docs/img/ holds the ones the README shows.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path

from streamops.app.dir import AppDir
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.observe.status import stream_row
from streamops.platform import manager
from streamops.spec import default_spec_path, get_app, load_specs
from tests.fixtures.apps import AppHarness
from tests.fixtures.apps import until as _until
from tests.fixtures.browser import assert_the_table_scrolls_in_its_frame, table_layout
from tests.integration.airflow.test_airflow_api import _request, _token
from tests.integration.airflow.test_airflow_operations import _run

APP = "orders"


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {(x.name, tuple(sorted(x.labels.items()))): x.value
            for fam in text_string_to_metric_families(text) for x in fam.samples}


def _get(url: str, headers: dict | None = None) -> tuple[int, str, str]:
    """(status, final URL, body) without following a redirect's login."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.url, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, url, err.read().decode(errors="replace")


def test_the_streams_view_shows_the_apps_and_resizes_one_from_its_page(
        platform, kafka, spark_cluster, airflow_platform, chromium, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    s = platform.ensure("supervisor")
    token = _token(s)
    shots = Path(os.environ.get("STREAMOPS_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    spec = get_app(load_specs(default_spec_path(s.repo)), APP)
    app = AppHarness(s, s.spark_master_url, app=APP)
    ledger = Ledger.open(s.ledger_db_url)
    try:
        # only Airflow's login opens the plugin's routes
        assert _get(f"{s.airflow_url}/streamops/api/streams")[0] in (401, 403)
        status, _url, body = _get(f"{s.airflow_url}/streamops/api/streams", {"Authorization": f"Bearer {token}"})
        assert status == 200 and APP in [r["app"] for r in json.loads(body)["streams"]]
        plugins = _request(s, "GET", "/api/v2/plugins", token)[1]["plugins"]
        views = {v["url_route"]: v for p in plugins if p["name"] == "streamops" for v in p["external_views"]}
        assert views["streams"]["destination"] == "nav" and views["stream-app"]["destination"] == "dag"
        status, url, _ = _get(f"{s.airflow_url}/streamops/dag/streamops_verify__{APP}", {"Authorization": f"Bearer {token}"})
        assert status == 200 and url.endswith(f"/streamops/apps/{APP}")  # the DAG's tab: its app's page

        r = app.cli("produce", APP, "--events", "20000", "--seed", "1")
        assert r.returncode == 0, r.stderr[-2000:]
        _run(s, token, "streamops_deploy", {"app": APP, "parallelism": 1}, app=APP)
        _until("a batch in the progress file", lambda: stream_row(s, spec, ledger).last_batch_id is not None, 240)
        r = app.cli("produce", APP, "--events", "5000", "--seed", "2")  # more input while it runs
        assert r.returncode == 0, r.stderr[-2000:]

        page = chromium.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(f"{s.airflow_url}/plugin/streams")
        # Airflow's own login page (auth on), then back to the Streams view
        page.locator("input[name=username]").fill("admin")
        page.locator("input[name=password]").fill(json.loads(manager.password_file(s).read_text())["admin"])
        page.locator("button[type=submit]").click()
        page.wait_for_url(re.compile(r".*/plugin/streams.*"), timeout=60_000)
        frame = page.frame_locator("iframe")
        row = frame.locator(f'tr[data-app="{APP}"]')
        expect(row).to_be_visible(timeout=60_000)
        expect(row.locator("[data-field=health] [data-health]")).to_have_text("healthy", timeout=60_000)
        # what the row shows is what the platform knows (the same numbers as `status`)
        want = _until("the driver reported its executors",
                      lambda: (r := stream_row(s, spec, ledger)).executors is not None and r, 120)
        expect(row.locator("[data-field=executors]")).to_have_text(f"{want.executors:,}", timeout=30_000)
        shown_batch = int(row.locator("[data-field=batch]").inner_text().replace(",", ""))
        assert 0 <= shown_batch <= (stream_row(s, spec, ledger).last_batch_id or 0)
        lag_text = row.locator("[data-field=lag]").inner_text()
        assert lag_text.replace(",", "").isdigit()
        page.screenshot(path=str(shots / "streams.png"))
        # 1400 px wide (issue 40: the table ran off the right edge, its columns after "State" cut):
        # neither Airflow's page nor the view in its iframe is wider than the window, and the table
        # scrolls in its own frame, its last column reachable there
        page.set_viewport_size({"width": 1400, "height": 1000})
        page.wait_for_timeout(1_000)  # Airflow's layout and the iframe's follow the new width
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 1400
        view = page.locator("iframe").element_handle().content_frame()
        assert_the_table_scrolls_in_its_frame(table_layout(view, "#streams"))
        page.set_viewport_size({"width": 1500, "height": 1000})  # the screenshots' width

        # the app's page: charts over the last hour, then the resize DAG's form with the app filled in
        row.locator("a.app-link").click()
        expect(frame.locator("#title")).to_have_text(APP, timeout=30_000)
        expect(frame.locator("[data-chart]")).to_have_count(6, timeout=30_000)
        assert frame.locator("[data-chart] polyline").count() >= 4
        frame.locator('button[data-dag="streamops_resize"]').click()
        form = frame.locator('form.trigger-form[data-dag="streamops_resize"]')
        expect(form).to_be_visible(timeout=30_000)
        expect(form.locator("[name=app]")).to_have_value(APP)
        form.locator("[name=parallelism]").fill("2")
        form.locator("[name=strategy]").select_option("live")
        form.locator("button[type=submit]").click()
        status_line = form.locator(".trigger-status[data-run-id]")
        expect(status_line).to_be_visible(timeout=30_000)
        run_id = status_line.get_attribute("data-run-id")

        def resized() -> bool:
            run = _request(s, "GET", f"/api/v2/dags/streamops_resize/dagRuns/{run_id}", token)[1]
            assert run["state"] != "failed", run
            return run["state"] == "success"

        _until("the resize run the page triggered succeeds", resized, 420, 2)
        resize = ledger.operations(APP, limit=1, kind="resize")[0]
        assert resize["outcome"] == "succeeded" and resize["requested_by"].startswith(
            f"airflow:streamops_resize/{run_id}/")
        assert ledger.desired(APP)["parallelism"] == 2
        frame.locator("dialog button", has_text="Cancel").click()
        # the resize is drawn on the charts (the page refreshes every 5 s)
        expect(frame.locator('[data-chart] line.marker[data-kind="resize"]').first).to_be_attached(timeout=30_000)
        _until("two executors in the row", lambda: stream_row(s, spec, ledger).executors == 2, 240)
        page.wait_for_timeout(6_000)  # a refresh with the new executors drawn
        page.screenshot(path=str(shots / "streams-app.png"), full_page=True)

        # the platform's Prometheus endpoint (its URL in `platform status --json`) says what status says
        r = app.cli("platform", "status", "--json")
        assert json.loads(r.stdout)["metrics"] == s.metrics_url, r.stdout[-2000:]
        with urllib.request.urlopen(s.metrics_url, timeout=30) as resp:
            scraped = _samples(resp.read().decode())
        st = json.loads(app.cli("status", APP, "--json", "--no-lag").stdout)
        me = (("app", APP),)
        assert scraped[("streamops_app_executors", me)] == st["observed"]["executors"] == 2
        assert scraped[("streamops_app_parallelism_desired", me)] == st["desired"]["parallelism"] == 2
        assert scraped[("streamops_app_up", me)] == 1.0
        assert scraped[("streamops_app_last_batch_id", me)] >= st["last_batch"]["batch_id"] - 1
        resizes = [o for o in ledger.operations(APP, limit=100) if o["kind"] == "resize"]
        assert scraped[("streamops_operations_total", (("app", APP), ("kind", "resize"), ("outcome", "succeeded")))] \
            == sum(o["outcome"] == "succeeded" for o in resizes) >= 1

        # Spark's own per-query gauges, served by the running driver under names that carry the app
        hb = json.loads(AppDir.of(s, APP).heartbeat.read_text())
        root = f"metrics_streamops_{APP}_driver_spark_streaming_{APP}_"

        def spark_gauges_match_progress() -> dict | None:
            """Spark's gauges of its last progress, once the driver's progress file has that batch
            (the driver writes a batch's line after its commit, so a scrape can be ahead of it)."""
            with urllib.request.urlopen(hb["prometheus_url"], timeout=30) as resp:
                text = resp.read().decode()
            gauges = {line.split("{")[0].split(" ")[0][len(root):]: float(line.rsplit(" ", 1)[1])
                      for line in text.splitlines() if line.startswith(root)}
            assert {"inputRate_total_Value", "processingRate_total_Value", "latency_Value",
                    "states_rowsTotal_Value", "states_usedBytes_Value"} <= set(gauges), text[:3000]
            lines = [json.loads(x) for x in AppDir.of(s, APP).progress.read_text().splitlines()[-5:]]
            # state rows and bytes: those of a batch the driver wrote (an idle trigger's progress,
            # every 10 s without input, carries the last batch's state and no line is written for it)
            if (gauges["states_rowsTotal_Value"], gauges["states_usedBytes_Value"]) not in {
                    (ln["state_rows"], ln["state_bytes"]) for ln in lines}:
                return None
            # latency: that batch's trigger execution, or an idle trigger's (no input, no rate)
            idle = gauges["inputRate_total_Value"] == 0 == gauges["processingRate_total_Value"]
            ran = {ln["duration_ms"].get("triggerExecution") for ln in lines}
            return gauges if idle or gauges["latency_Value"] in ran else None

        _until("Spark's per-query gauges equal a batch in the progress file", spark_gauges_match_progress, 60, 2)
    finally:
        # stopped as an operator stops it: with the desired state stopped, or the supervisor
        # would launch it again and hold the shared cluster's cores for the tests after this one
        app.cli("stop", APP, "--now", timeout=180)
        driver.stop(s, APP, now=True)
        ledger.close()
