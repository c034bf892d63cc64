"""The Streams view inside the Airflow UI: a FastAPI app mounted under Airflow's API server at
``/streamops`` (``streamops_plugin.StreamopsPlugin``), behind Airflow's own login.

A thin adapter: every answer comes from ``streamops.observe`` (the rows, an app's history, its
DLQ) and the ledger; the pages (``ui/``) are static HTML and JavaScript that fetch the JSON.

- ``/streamops/`` the Streams page; ``/streamops/apps/<app>`` an app's page;
- ``/streamops/api/streams``, ``/streamops/api/apps/<app>?window_s=``,
  ``/streamops/api/apps/<app>/dlq``: their data;
- ``/streamops/dag/<dag_id>``: the per-DAG link, to the page of the DAG's app.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, RedirectResponse, Response

UI = Path(__file__).parent / "ui"
#: the DAGs that act on one app take it as a param (their trigger forms), per app DAGs end in __<app>
APP_PARAM_DAGS = ("streamops_deploy", "streamops_resize", "streamops_stop", "streamops_restore",
                  "streamops_rebuild_state", "streamops_reset", "streamops_promote")


def _auth():
    """Airflow's own check: the JWT of the UI's login (its ``_token`` cookie, or a Bearer header)."""
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view

    return Depends(requires_access_view(AccessView.WEBSITE))


def _json(data: Any) -> Response:
    def default(o: Any) -> Any:
        if isinstance(o, (datetime, date)):
            return o.isoformat()
        return str(o)

    return Response(json.dumps(data, default=default), media_type="application/json",
                    headers={"Cache-Control": "no-store"})


@contextlib.contextmanager
def _core() -> Iterator[tuple[Any, dict, Any]]:
    """(settings, specs by name, ledger), opened per request and closed after it."""
    from streamops.specfile import open_spec_file
    from streamops_airflow.hooks import StreamopsHook

    hook = StreamopsHook()
    settings = hook.settings
    specs = open_spec_file(settings.repo, settings.state_dir).specs
    ledger = hook.get_conn()
    try:
        yield settings, specs, ledger
    finally:
        ledger.close()


def _live(settings: Any, name: str, ledger: Any) -> Any:
    from streamops.app.outputs import load_live_spec
    from streamops.exceptions import StreamopsError

    try:
        return load_live_spec(settings, name, ledger)
    except StreamopsError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None


def app_of_dag(dag_id: str, apps: list[str]) -> str | None:
    """The app a DAG acts on: ``streamops_<op>__<app>``; the shared operation DAGs have none."""
    _, sep, app = dag_id.rpartition("__")
    return app if sep and app in apps else None


def create_app(dependencies: list | None = None) -> FastAPI:
    """``dependencies``: what every route requires (default: Airflow's login, ``_auth``)."""
    app = FastAPI(title="streamops", docs_url=None, redoc_url=None, openapi_url=None,
                  dependencies=[_auth()] if dependencies is None else dependencies)

    @app.get("/", include_in_schema=False)
    def streams_page() -> FileResponse:
        return FileResponse(UI / "streams.html", headers={"Cache-Control": "no-store"})

    @app.get("/apps/{name}", include_in_schema=False)
    def app_page(name: str) -> FileResponse:
        return FileResponse(UI / "app.html", headers={"Cache-Control": "no-store"})

    @app.get("/ui/{file}", include_in_schema=False)
    def asset(file: str) -> FileResponse:
        path = UI / file
        if path.parent != UI or not path.is_file() or path.suffix not in (".js", ".css"):
            raise HTTPException(status_code=404)
        return FileResponse(path)

    @app.get("/api/streams")
    def streams() -> Response:
        import time

        from streamops.observe.status import overview

        with _core() as (settings, specs, ledger):
            rows = overview(settings, [_live(settings, n, ledger) for n in specs], ledger)
            return _json({"generated_at": time.time(), "streams": [r.to_dict() for r in rows],
                          "dags": {"with_app_param": list(APP_PARAM_DAGS)}})

    @app.get("/api/apps/{name}")
    def app_data(name: str, window_s: float = Query(3600.0, ge=60, le=7 * 86400)) -> Response:
        from streamops.observe.status import app_view

        with _core() as (settings, specs, ledger):
            if name not in specs:
                raise HTTPException(status_code=404, detail=f"no app {name!r}; apps: {', '.join(sorted(specs))}")
            view = app_view(settings, _live(settings, name, ledger), ledger, window_s=window_s)
            return _json({**view.to_dict(), "dags": {"with_app_param": list(APP_PARAM_DAGS),
                                                     "own": [f"streamops_{op}__{name}" for op in
                                                             ("verify", "compact", "savepoint", "reprocess",
                                                              "scale_windows")]}})

    @app.get("/api/apps/{name}/dlq")
    def dlq(name: str, last: int = Query(500, ge=1, le=10_000)) -> Response:
        from streamops.observe.dlq import dlq_summary

        with _core() as (settings, specs, ledger):
            if name not in specs:
                raise HTTPException(status_code=404, detail=f"no app {name!r}")
            return _json(dlq_summary(settings, _live(settings, name, ledger), last=last).to_dict())

    @app.get("/dag/{dag_id}", include_in_schema=False)
    def dag_link(dag_id: str) -> RedirectResponse:
        with _core() as (_settings, specs, _ledger):
            name = app_of_dag(dag_id, sorted(specs))
        return RedirectResponse(f"../apps/{name}" if name else "../", status_code=307)

    return app
