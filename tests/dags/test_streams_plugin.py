"""The Airflow plugin's Streams view (``plugins/streamops_plugin.py``), without a running Airflow:
its UI entries pass Airflow's own response model (a plugin that does not is silently left out of
the UI), and its FastAPI app answers from the ledger and the apps' progress files. Its login check
and the pages in a browser are tests/integration/airflow/test_streams_view.py's."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

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


def test_the_view_answers_from_the_ledger_and_the_progress_files(plugin, client) -> None:
    settings = Settings.from_env()
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        ledger.set_desired("orders", status="running", parallelism=1, who="t")
        ledger.report_observed("orders", status="running", parallelism=1, executors=1)
        ledger.record("orders", "resize", {"parallelism": 2}, who="t", outcome="succeeded")
    finally:
        ledger.close()
    now = datetime.now(UTC)
    AppDir.of(settings, "orders").append_progress({
        "batch_id": 4, "timestamp": now.isoformat(), "input_rows": 3, "input_rows_per_s": 1.0,
        "processed_rows_per_s": 10.0, "duration_ms": {"triggerExecution": 120},
        "end_offsets": ['{"orders":{"0":5,"1":7}}'], "start_offsets": ['{"orders":{"0":4,"1":5}}'],
        "latest_offsets": ['{"orders":{"0":9,"1":7}}'], "state_rows": 2, "state_bytes": 100, "executors": 1})

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
