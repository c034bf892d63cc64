"""Operations on apps as core functions (the CLI and the Airflow operators are thin callers).

Each one takes the app's lease in the ledger, records before/after, changes the desired state,
and waits (bounded) until the supervisor has made the observed state match.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from streamops.checkpoints import layout
from streamops.exceptions import StreamopsError, UsageError
from streamops.ledger import Ledger
from streamops.lifecycle import driver
from streamops.lifecycle.status import lag
from streamops.lifecycle.supervisor import heartbeat_file
from streamops.settings import Settings
from streamops.spark.session import checkpoint_dir
from streamops.spec import AppSpec

SUPERVISOR_STALE_S = 30.0


class SupervisorNotRunning(StreamopsError):
    """Nobody reconciles desired state into processes.

    Operator action: start the platform (``make run`` / ``streamops platform up``) or run
    ``streamops supervise``; nothing was changed.
    """


class NotConverged(StreamopsError):
    """The app did not reach the desired state in time.

    Operator action: read the driver log lines in the message and ``streamops status APP``.
    """


def require_supervisor(settings: Settings) -> None:
    try:
        beat = json.loads(heartbeat_file(settings).read_text())["heartbeat"]
    except (FileNotFoundError, ValueError, KeyError):
        raise SupervisorNotRunning(
            "the supervisor is not running (no heartbeat); start it with `streamops platform up`") from None
    if time.time() - beat > SUPERVISOR_STALE_S:
        raise SupervisorNotRunning(
            f"the supervisor's last heartbeat is {time.time() - beat:.0f} s old; "
            f"restart it with `streamops platform up`")


def _snapshot(settings: Settings, spec: AppSpec, ledger: Ledger) -> dict[str, Any]:
    ckpt = checkpoint_dir(settings, spec)
    desired = ledger.desired(spec.name) or {}
    return {"status": desired.get("status"), "parallelism": desired.get("parallelism"),
            "batch": layout.last_committed_batch(ckpt),
            "offsets": {t: {str(p): o for p, o in ps.items()} for t, ps in layout.committed_offsets(ckpt).items()}}


def deploy(settings: Settings, spec: AppSpec, ledger: Ledger, *, parallelism: int | None = None,
           who: str | None = None, timeout: float = 300.0,
           progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Desired running at ``parallelism``; returns once a batch after the start has committed
    (or the driver runs with nothing to read)."""
    n = spec.check_parallelism(spec.parallelism.default if parallelism is None else parallelism)
    require_supervisor(settings)
    before = _snapshot(settings, spec, ledger)
    with ledger.operation(spec.name, "deploy", {"parallelism": n}, who=who, before=before) as rec:
        t0 = time.time()
        ledger.set_desired(spec.name, status="running", parallelism=n, who=who, op=rec.op)
        progress(f"{spec.name}: desired running x{n}; waiting for the first committed batch ...")
        observed = _wait(settings, spec, ledger, t0, timeout, before["batch"])
        rec.after = {**_snapshot(settings, spec, ledger), "pid": observed.get("pid"),
                     "spark_app_id": observed.get("spark_app_id")}
    return {"app": spec.name, "operation_id": rec.id, "parallelism": n, "before": before, "after": rec.after,
            "seconds": round(time.time() - t0, 1)}


def resize(settings: Settings, spec: AppSpec, ledger: Ledger, *, parallelism: int, strategy: str = "restart",
           who: str | None = None, timeout: float = 300.0,
           progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Change a running app's parallelism. ``restart``: graceful stop at a batch boundary, relaunch
    from the same checkpoint with the new executor count. Returns once it committed a batch at the
    new size (or runs caught up). A no-op when already at that size."""
    if strategy != "restart":
        raise UsageError(f"unknown strategy {strategy!r}; available: restart")
    n = spec.check_parallelism(parallelism)
    require_supervisor(settings)
    desired = ledger.desired(spec.name)
    if desired is None or desired["status"] != "running":
        raise UsageError(f"{spec.name} is not deployed; `streamops deploy {spec.name} --parallelism {n}`")
    before = _snapshot(settings, spec, ledger)
    with ledger.operation(spec.name, "resize", {"parallelism": n, "strategy": strategy}, who=who,
                          before=before) as rec:
        t0 = time.time()
        observed = ledger.observed(spec.name) or {}
        if desired["parallelism"] == n and observed.get("parallelism") == n:
            rec.after = {**before, "noop": True}
            return {"app": spec.name, "operation_id": rec.id, "parallelism": n, "noop": True,
                    "before": before, "after": rec.after, "seconds": 0.0}
        ledger.set_desired(spec.name, status="running", parallelism=n, who=who, op=rec.op)
        progress(f"{spec.name}: desired x{n} ({strategy}); waiting for a batch at the new size ...")
        o = _wait(settings, spec, ledger, t0, timeout, before["batch"], parallelism=n)
        rec.after = {**_snapshot(settings, spec, ledger), "executors": o.get("executors"), "pid": o.get("pid")}
    return {"app": spec.name, "operation_id": rec.id, "parallelism": n, "noop": False, "before": before,
            "after": rec.after, "seconds": round(time.time() - t0, 1)}


def _wait(settings: Settings, spec: AppSpec, ledger: Ledger, t0: float, timeout: float,
          batch_before: int | None, parallelism: int | None = None) -> dict[str, Any]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        o = ledger.observed(spec.name) or {}
        fresh = o.get("heartbeat_at") is not None and o["heartbeat_at"].timestamp() >= t0
        if parallelism is not None and o.get("parallelism") != parallelism:
            fresh = False
        if fresh and o.get("status") == "running":
            new_batch = o.get("last_batch") is not None and (batch_before is None or o["last_batch"] > batch_before)
            if new_batch:
                return o
            lags, _note = lag(settings, spec, layout.committed_offsets(checkpoint_dir(settings, spec)))
            if lags is not None and sum(sum(p.values()) for p in lags.values()) == 0:
                return o  # running and caught up: there is no batch to wait for
        if o.get("status") in ("crash-loop",):
            break
        time.sleep(0.5)
    raise NotConverged(f"{spec.name} did not commit a batch within {timeout:.0f} s; last driver log lines:\n"
                       f"{driver.log_tail(settings, spec.name, 30)}")


def stop(settings: Settings, spec: AppSpec, ledger: Ledger, *, now: bool = False, who: str | None = None,
         timeout: float = 180.0, progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Desired stopped; graceful (batch boundary) unless ``now``. Returns once no driver runs."""
    require_supervisor(settings)
    before = _snapshot(settings, spec, ledger)
    with ledger.operation(spec.name, "stop", {"now": now}, who=who, before=before) as rec:
        t0 = time.time()
        desired = ledger.desired(spec.name)
        ledger.set_desired(spec.name, status="stopped",
                           parallelism=desired["parallelism"] if desired else spec.parallelism.default,
                           who=who, op=rec.op)
        if now:  # do not wait for the supervisor's graceful stop
            driver.stop(settings, spec.name, now=True)
        progress(f"{spec.name}: desired stopped; waiting for the driver to exit ...")
        deadline = time.time() + timeout
        while driver.running(settings, spec.name) is not None:
            if time.time() > deadline:
                raise NotConverged(f"{spec.name} still running after {timeout:.0f} s; "
                                   f"`streamops stop {spec.name} --now` kills it")
            time.sleep(0.5)
        rec.after = _snapshot(settings, spec, ledger)
    return {"app": spec.name, "operation_id": rec.id, "before": before, "after": rec.after,
            "seconds": round(time.time() - t0, 1)}
