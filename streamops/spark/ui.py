"""Read a running driver's Spark REST API (``/api/v1``): which executors ran which tasks.

Used to prove a live scale-out really moved work (stateful tasks included) onto the new
executors, and by the benchmarks to report it.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any


def _get(ui_url: str, path: str, timeout: float = 30.0, attempts: int = 3) -> Any:
    """One REST read, tried ``attempts`` times: a driver busy with a batch (its UI thread starved
    on a loaded machine) can miss one read's timeout and answer the next."""
    url = f"{ui_url.rstrip('/')}/api/v1/{path.lstrip('/')}"
    for _ in range(attempts - 1):
        try:
            return _read(url, timeout)
        except urllib.error.HTTPError:
            raise  # an answer: not a slow driver
        except OSError:  # a timeout, a refused connection
            time.sleep(1.0)
    return _read(url, timeout)


def _read(url: str, timeout: float) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def environment(ui_url: str, app_id: str) -> dict[str, Any]:
    """The application's environment: its Spark properties (secrets redacted) and class path."""
    return _get(ui_url, f"applications/{app_id}/environment")


def executors(ui_url: str, app_id: str) -> dict[str, dict[str, Any]]:
    """Active executors (the driver left out) by id: host, totalTasks, activeTasks, ..."""
    return {e["id"]: e for e in _get(ui_url, f"applications/{app_id}/executors")
            if e["id"] != "driver" and e.get("isActive", True)}


def stage_executors(ui_url: str, app_id: str, *, num_tasks: int, after_stage: int = -1) -> dict[int, set[str]]:
    """Completed stages with ``num_tasks`` tasks (e.g. the stateful one: one task per state
    partition) newer than ``after_stage``: stage id -> executor ids that ran its tasks."""
    out: dict[int, set[str]] = {}
    for st in _get(ui_url, f"applications/{app_id}/stages?status=complete"):
        if st["stageId"] <= after_stage or st["numTasks"] != num_tasks:
            continue
        tasks = _get(ui_url, f"applications/{app_id}/stages/{st['stageId']}/{st['attemptId']}/taskList"
                             f"?length={num_tasks * 4}")
        out[st["stageId"]] = {t["executorId"] for t in tasks if t.get("status") == "SUCCESS"}
    return out


def last_stage(ui_url: str, app_id: str) -> int:
    stages = _get(ui_url, f"applications/{app_id}/stages")
    return max((s["stageId"] for s in stages), default=-1)


def first_job_on(ui_url: str, app_id: str, executor_id: str, after_stage: int = -1) -> str | None:
    """The description of the job whose task ran first on ``executor_id`` (stages newer than
    ``after_stage``): after a live scale-out it must be the executor's warm-up."""
    jobs = _get(ui_url, f"applications/{app_id}/jobs")
    job_of_stage = {s: j for j in jobs for s in j.get("stageIds", [])}
    first: tuple[int, int] | None = None  # (task id, stage id)
    for st in _get(ui_url, f"applications/{app_id}/stages"):
        if st["stageId"] <= after_stage:
            continue
        tasks = _get(ui_url, f"applications/{app_id}/stages/{st['stageId']}/{st['attemptId']}/taskList"
                             "?length=1000")
        for t in tasks:
            if t.get("executorId") == executor_id and (first is None or t["taskId"] < first[0]):
                first = (t["taskId"], st["stageId"])
    if first is None or first[1] not in job_of_stage:
        return None
    return job_of_stage[first[1]].get("description") or job_of_stage[first[1]].get("name")


def stage_tasks(ui_url: str, app_id: str, after_stage: int = -1,
                pools: set[str] | None = None) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(stage, task) of every task of the stages newer than ``after_stage`` (in the FAIR ``pools``
    only, when given: the others' task lists are not read), as the REST API has them."""
    out = []
    for st in _get(ui_url, f"applications/{app_id}/stages"):
        if st["stageId"] > after_stage and (pools is None or st.get("schedulingPool") in pools):
            out += [(st, t) for t in _get(ui_url, f"applications/{app_id}/stages/{st['stageId']}/{st['attemptId']}"
                                                  "/taskList?length=1000")]
    return out


def pool_tasks(ui_url: str, app_id: str, pools: set[str], after_stage: int = -1) -> dict[str, tuple[int, float]]:
    """Tasks of stages in the FAIR ``pools`` newer than ``after_stage``: executor id ->
    (tasks, seconds they ran). After a live scale-out: where the warm-up work ran."""
    out: dict[str, tuple[int, float]] = {}
    for _st, t in stage_tasks(ui_url, app_id, after_stage, pools):
        if "executorId" in t:
            n, secs = out.get(t["executorId"], (0, 0.0))
            out[t["executorId"]] = (n + 1, secs + t.get("duration", 0) / 1000)
    return out
