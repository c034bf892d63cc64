"""The signals between an app's running driver and those who steer it, as files in its folder
(``app.dir``): a live resize request (``control.json``, polled by the driver's main loop) and a
warm standby's readiness and go (``standby.json``, ``standby.go``). The supervisor and the
operations write and read them without the Spark runtime; the driver answers them."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from streamops.app.dir import AppDir

#: set in a driver's environment when it is launched as a standby (read once, then removed)
STANDBY_ENV = "STREAMOPS_STANDBY"


def advertised_locally(master: str) -> bool:
    """Does a driver on ``master`` bind to the platform's host (``SPARK_LOCAL_IP``)? Yes in local mode
    and for a master on a loopback address (the embedded cluster: its executors are on this
    machine). A master elsewhere (compose's ``spark://spark-master:7077``, a ``k8s://`` API) has
    executors on other machines, which must call the driver back at an address they reach: there
    Spark's own choice (the first address that is not loopback; on Kubernetes the pod's)."""
    import ipaddress
    from urllib.parse import urlsplit

    if master.startswith("local"):
        return True
    host = urlsplit(master.split(",")[0]).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def supports_live(master: str) -> bool:
    """Can this cluster manager add executors to a running application?"""
    return master.startswith(("spark://", "k8s://"))


@dataclass(frozen=True)
class ControlRequest:
    parallelism: int
    requested_at: float


def write_request(app: AppDir, parallelism: int) -> ControlRequest:
    req = ControlRequest(parallelism, time.time())
    app.write(app.control, {"parallelism": parallelism, "requested_at": req.requested_at})
    return req


def read_request(app: AppDir) -> ControlRequest | None:
    """The pending request, None if there is none or it is unreadable (written atomically)."""
    data = app.read(app.control)
    try:
        return None if data is None else ControlRequest(int(data["parallelism"]), float(data["requested_at"]))
    except (KeyError, ValueError, TypeError):
        return None


def standby_requested() -> bool:
    """Was this driver launched as a standby? (Read once: children must not inherit it.)"""
    return os.environ.pop(STANDBY_ENV, "") == "1"


def mark_standby_ready(app: AppDir) -> None:
    app.write(app.standby_ready, {"pid": os.getpid(), "ready_at": time.time()})


def standby_ready(app: AppDir, pid: int) -> bool:
    return (app.read(app.standby_ready) or {}).get("pid") == pid


def release_standby(app: AppDir) -> None:
    app.write(app.standby_go, {"released_at": time.time()})


def clear_standby_signals(app: AppDir) -> None:
    for path in (app.standby_ready, app.standby_go):
        path.unlink(missing_ok=True)
