"""The streamops Airflow plugin: the Streams view (``streamops_airflow.streams_view``) mounted
under the API server at ``/streamops``, a "Streams" entry in the UI's Browse menu that opens it
inside the UI, and on every DAG a "Stream app" tab with the page of the app the DAG acts on.

Relative hrefs: the UI's ``<base href>`` is the API server's base URL, so they also work behind a
path prefix. The trailing slash matters: ``streamops`` alone is the UI's own catch-all route."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from streamops_airflow.streams_view import create_app


class StreamopsPlugin(AirflowPlugin):
    name = "streamops"
    fastapi_apps = [{"name": "streamops", "app": create_app(), "url_prefix": "/streamops"}]
    external_views = [
        {"name": "Streams", "href": "streamops/", "destination": "nav", "url_route": "streams",
         "category": "browse"},
        {"name": "Stream app", "href": "streamops/dag/{DAG_ID}", "destination": "dag",
         "url_route": "stream-app"},
    ]
