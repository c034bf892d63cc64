"""The Airflow plugin's Streams view (``plugins/streamops_plugin.py``), without a running Airflow:
its UI entries pass Airflow's own response model (a plugin that does not is silently left out of
the UI), and its FastAPI app answers from the ledger and the apps' progress files. Its login check
and the pages in a browser are tests/integration/airflow/test_streams_view.py's."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest

from streamops.app.dir import AppDir
from streamops.ledger import Ledger
from streamops.settings import Settings
from tests.dags.test_dag_integrity import REPO

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def plugin():
    sys.path.insert(0, str(REPO / "plugins"))
    import streamops_plugin

    return streamops_plugin.StreamopsPlugin


def test_the_ui_entries_are_what_airflow_accepts(plugin) -> None:
    from airflow.api_fastapi.core_api.datamodels.plugins import ExternalViewResponse

    views = [ExternalViewResponse.model_validate(v) for v in plugin.external_views]
    assert {(v.url_route, v.destination) for v in views} == {("streams", "nav"), ("stream-app", "dag")}
    assert all(not v.href.startswith("/") and "streamops/" in v.href for v in views)  # relative: base URL safe
    assert "{DAG_ID}" in views[1].href  # the only placeholder the UI fills in
    assert [a["url_prefix"] for a in plugin.fastapi_apps] == ["/streamops"]


@pytest.fixture
def client():
    from fastapi.testclient import TestClient
    from streamops_airflow.streams_view import create_app

    return TestClient(create_app(dependencies=[]))


def _progress(settings: Settings, app: str, batch_id: int, *, start: str, end: str, latest: str) -> None:
    """One batch's line in the app's progress file, committed now (offsets as Spark writes them)."""
    AppDir.of(settings, app).append_progress({
        "batch_id": batch_id, "timestamp": datetime.now(UTC).isoformat(), "input_rows": 3, "input_rows_per_s": 1.0,
        "processed_rows_per_s": 10.0, "duration_ms": {"triggerExecution": 120}, "end_offsets": [end],
        "start_offsets": [start], "latest_offsets": [latest], "state_rows": 2, "state_bytes": 100, "executors": 1})


def test_the_view_answers_from_the_ledger_and_the_progress_files(plugin, client) -> None:
    settings = Settings.from_env()
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        ledger.set_desired("orders", status="running", parallelism=1, who="t")
        ledger.report_observed("orders", status="running", parallelism=1, executors=1)
        ledger.record("orders", "resize", {"parallelism": 2}, who="t", outcome="succeeded")
    finally:
        ledger.close()
    _progress(settings, "orders", 4, start='{"orders":{"0":4,"1":5}}', end='{"orders":{"0":5,"1":7}}',
              latest='{"orders":{"0":9,"1":7}}')

    streams = client.get("/api/streams").json()["streams"]
    row = next(r for r in streams if r["app"] == "orders")
    assert (row["health"], row["lag_records"], row["last_batch_id"], row["executors"]) == ("healthy", 4, 4, 1)
    view = client.get("/api/apps/orders", params={"window_s": 600}).json()
    assert [p["batch_id"] for p in view["points"]] == [4] and view["points"][0]["lag"] == {"orders/0": 4, "orders/1": 0}
    assert [o["kind"] for o in view["operations"]] == ["resize"]
    assert client.get("/api/apps/nope").status_code == 404
    assert client.get("/api/apps/orders", params={"window_s": 5}).status_code == 422  # below a minute
    r = client.get("/dag/streamops_verify__orders", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "../apps/orders"
    assert client.get("/dag/streamops_resize", follow_redirects=False).headers["location"] == "../"
    assert "<h1>Streams</h1>" in client.get("/").text and "api/streams" in client.get("/").text
    assert client.get("/apps/orders").text.count("openTriggerForm") == 1
    assert client.get("/ui/streams.js").status_code == 200
    assert client.get("/ui/app.html").status_code == 404 and client.get("/ui/..%2Fstreams_view.py").status_code == 404
    json.dumps(streams)  # the data is JSON all the way down


def test_the_streams_data_gives_a_stream_time_apps_watermark_and_its_holder(plugin, client) -> None:
    """Issue 40: the row of enriched_orders (a temporal join: stream time) carries its watermark, its
    lag, the price partition that holds it since which batch and the idle partition; orders (no
    stream time) none."""
    import shutil

    from streamops.app.checkpoint import checkpoint_dir
    from streamops.spec import default_spec_path, load_specs
    from tests.unit.observe.test_watermark import T0_MS, write_batch

    settings = Settings.from_env()
    ckpt = checkpoint_dir(settings, load_specs(default_spec_path(settings.repo))["enriched_orders"])
    try:
        for b in range(3):  # product-prices[2] quiet from batch 1; [0] idle since T0 - 1 min
            write_batch(ckpt, b, {("orders-placed", 0): 300_000 + b, ("product-prices", 0): 1,
                                  ("product-prices", 2): 48_000 if b else 400_000}, {("product-prices", 0): T0_MS - 60_000})
        rows = {r["app"]: r for r in client.get("/api/streams").json()["streams"]}
    finally:
        shutil.rmtree(ckpt)
    assert rows["enriched_orders"]["watermark"] == {
        "batch_id": 2, "watermark_ms": 48_000, "newest_ms": 300_002, "lag_ms": 252_002,
        "holder": {"topic": "product-prices", "partition": 2, "stream_time_ms": 48_000, "since_batch": 1,
                   "since_ms": T0_MS + 1000, "since_exact": True},
        "idle": [{"topic": "product-prices", "partition": 0, "since_ms": T0_MS - 60_000}]}
    assert rows["orders"]["watermark"] is None


class _Tables(HTMLParser):
    """Each ``<table id>`` of a page with the classes of the element around it."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[tuple[str, str]] = []  # (tag, class) of the elements open now
        self.found: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self.found[a.get("id") or "?"] = self.open[-1][1] if self.open else ""
        self.open.append((tag, a.get("class") or ""))

    def handle_endtag(self, tag: str) -> None:
        while self.open and self.open.pop()[0] != tag:
            pass


def test_every_table_of_the_pages_is_in_a_frame_that_scrolls_sideways(plugin, client) -> None:
    """A table wider than the page scrolls inside its own frame, not the page (issue 40: at 1400 px
    the Streams table ran off the right edge, its columns after "State" cut)."""
    tables: dict[str, str] = {}
    for page in ("/", "/apps/orders"):
        parser = _Tables()
        parser.feed(client.get(page).text)
        tables.update(parser.found)
    assert set(tables) == {"streams", "operations", "savepoints", "dlq"}, tables
    assert all("table-frame" in around.split() for around in tables.values()), tables
    css = client.get("/ui/streams.css").text
    rule = re.search(r"(?m)^\.table-frame\s*\{([^}]*)\}", css)
    assert rule and re.search(r"(^|;)\s*overflow-x:\s*auto\s*(;|$)", rule[1]), css


#: a row of api/streams as the platform gives it (streamops.observe.status), with values as wide
#: as a running app's
STUB_ROW = {"app": "enriched_orders", "description": "orders joined with the product prices in force at their time",
            "health": "healthy", "error": None, "desired_status": "running", "desired_parallelism": 2,
            "observed_status": "running", "observed_parallelism": 2, "executors": 2, "lag_records": 123456,
            "lag_seconds": 12.3, "input_rate": 5012.4, "processing_rate": 6231.9, "last_batch_id": 18342,
            "last_batch_age_s": 3.2, "last_batch_duration_ms": 1873, "state_rows": 1234567,
            "state_bytes": 987654321, "newest_savepoint": {"batch_id": 18200, "created_at": "2026-11-27T10:15:00+00:00"},
            "last_verify": {"outcome": "succeeded"}, "output_topic": "enriched-orders-output-v2",
            "watermark": {"batch_id": 18342, "watermark_ms": 1795896600000, "newest_ms": 1795896852000,
                          "lag_ms": 252_000, "holder": {"topic": "product-prices", "partition": 2,
                                                       "stream_time_ms": 1795896600000, "since_batch": 1820,
                                                       "since_ms": 1795896073000, "since_exact": True},
                          "idle": [{"topic": "product-prices", "partition": 0, "since_ms": 1795892400000}]}}


def test_at_1400_px_the_streams_table_scrolls_in_its_frame_and_the_page_does_not(plugin, client, chromium) -> None:
    """In Chromium, 1400 px wide, the page the plugin serves with two apps' rows: the table is wider
    than the window, so its frame scrolls and shows every column; the page itself does not."""
    from tests.fixtures.browser import assert_the_table_scrolls_in_its_frame, table_layout

    base = "http://streamops.test/streamops"
    stub = json.dumps({"streams": [STUB_ROW, {**STUB_ROW, "app": "user_activity", "watermark": None}],
                       "dags": {"with_app_param": []}})

    def serve(route) -> None:
        path = route.request.url.removeprefix(base)
        if path.startswith("/api/streams"):
            route.fulfill(status=200, content_type="application/json", body=stub)
            return
        r = client.get(path)  # the plugin's own page and assets
        route.fulfill(status=r.status_code, body=r.content, content_type=r.headers.get("content-type"))

    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    page.route(f"{base}/**", serve)
    page.goto(f"{base}/")
    page.wait_for_selector('#streams tr[data-app="user_activity"]', timeout=30_000)
    layout = table_layout(page, "#streams")
    assert_the_table_scrolls_in_its_frame(layout)
    assert layout["frame_scroll_width"] > layout["frame_width"], f"the sample table fits: no test of scrolling: {layout}"
    assert layout["last_header"] == "Output"
    assert page.locator('#streams tr[data-app="user_activity"] td').last.inner_text() == STUB_ROW["output_topic"]
    # the watermark, its lag, its holder since which batch, the idle partitions; "–" without stream time
    cell = page.locator('#streams tr[data-app="enriched_orders"] [data-field=watermark] div')
    lines = cell.all_inner_texts()
    since = page.evaluate("(ms) => new Date(ms).toLocaleString()", STUB_ROW["watermark"]["holder"]["since_ms"])
    assert lines[1:] == ["lags 4m12s", "held by product-prices[2]", f"since batch 1820, {since}",
                         "idle: product-prices[0]"], lines
    assert lines[0] == page.evaluate("(ms) => new Date(ms).toLocaleString()", STUB_ROW["watermark"]["watermark_ms"])
    assert page.locator('#streams tr[data-app="user_activity"] [data-field=watermark]').inner_text() == "–"


def test_an_apps_page_sums_it_up_in_one_line(plugin, client, chromium) -> None:
    """In Chromium, an app's page (the plugin's own data, from the ledger and a progress file):
    its summary names the last batch and its age apart ("last batch 1 41 s ago" read as one
    number), and an app without a batch says so instead of "last batch – – ago"."""
    settings = Settings.from_env()
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        for app in ("page_stats", "sessions"):
            ledger.set_desired(app, status="running", parallelism=1, who="t")
            ledger.report_observed(app, status="running", parallelism=1, executors=1)
    finally:
        ledger.close()
    _progress(settings, "page_stats", 1820, start='{"page-views":{"0":4}}', end='{"page-views":{"0":5}}',
              latest='{"page-views":{"0":5}}')
    base = "http://streamops.test/streamops"

    def serve(route) -> None:
        r = client.get(route.request.url.removeprefix(base))  # the plugin's pages, assets and data
        route.fulfill(status=r.status_code, body=r.content, content_type=r.headers.get("content-type"))

    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    page.route(f"{base}/**", serve)
    summaries = {}
    for app in ("page_stats", "sessions"):
        page.goto(f"{base}/apps/{app}")
        page.wait_for_function("() => document.getElementById('summary').textContent.includes('output')",
                               timeout=30_000)
        summaries[app] = " ".join(page.locator("#summary").inner_text().split())
    assert re.search(r", last batch 1,820, \d+ s ago, output page-stats$", summaries["page_stats"]), summaries
    assert re.search(r", no batch yet, output \S+$", summaries["sessions"]), summaries
