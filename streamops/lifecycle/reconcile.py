"""Desired vs observed -> the one action to take now. Pure: the supervisor does the I/O.

Like a Kubernetes controller, each pass looks only at the current desired state (ledger), the
observed state (driver heartbeat + process table) and the restart history, so a supervisor
restarted at any moment makes the same decision again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["none", "launch", "restart", "stop", "resize", "resize_live", "wait", "give_up"]


@dataclass(frozen=True)
class Desired:
    status: Literal["running", "stopped"]
    parallelism: int
    strategy: Literal["restart", "live"] = "restart"


@dataclass(frozen=True)
class Observed:
    """What is true right now. ``alive``: the driver process exists; ``heartbeat_age``: seconds
    since its last heartbeat (None: never); ``parallelism``: what it runs with."""

    alive: bool
    parallelism: int | None = None
    heartbeat_age: float | None = None
    status: str | None = None  # the driver's own word: starting | running | restarting | stopped
    #: a live resize asked of the running driver for the desired size, not applied yet: its age
    live_request_age: float | None = None


@dataclass(frozen=True)
class RestartPolicy:
    backoff_s: float = 2.0
    max_backoff_s: float = 120.0
    #: restarts within ``window_s`` beyond this many: crash loop, stop trying until desired changes
    crash_loop_limit: int = 5
    window_s: float = 600.0
    #: a live driver whose heartbeat is older than this is hung: restart it
    heartbeat_timeout_s: float = 120.0
    #: grace after launch before a missing heartbeat counts
    startup_grace_s: float = 180.0
    #: a live resize the driver has not applied in this long falls back to a restart
    live_resize_timeout_s: float = 90.0
    #: a restart resize first starts the next driver as a warm standby (JVM, SparkContext,
    #: executors, a rehearsal of the query: up to ~170 s on 2 busy cores); not ready in this
    #: long, the resize goes on without one (stop, then launch)
    standby_ready_s: float = 240.0


@dataclass(frozen=True)
class History:
    """Recent crashes (seconds ago, newest first) and when the current driver was launched."""

    crashes_ago: tuple[float, ...] = ()
    launched_ago: float | None = None


@dataclass(frozen=True)
class Action:
    kind: Kind
    reason: str
    parallelism: int | None = None
    after_s: float = 0.0  # for "wait": try again in this many seconds
    extra: dict = field(default_factory=dict)


def backoff(policy: RestartPolicy, crashes: int) -> float:
    return min(policy.max_backoff_s, policy.backoff_s * 2 ** max(0, crashes - 1))


def decide(desired: Desired | None, observed: Observed, history: History,
           policy: RestartPolicy = RestartPolicy()) -> Action:
    if desired is None:
        return Action("none", "no desired state recorded (never deployed)")
    if desired.status == "stopped":
        if observed.alive:
            return Action("stop", "desired stopped, driver running")
        return Action("none", "stopped as desired")

    # desired running
    recent = [c for c in history.crashes_ago if c <= policy.window_s]
    if not observed.alive:
        if len(recent) >= policy.crash_loop_limit:
            return Action("give_up", f"crash loop: {len(recent)} crashes in the last "
                                     f"{policy.window_s:.0f} s; fix the cause, then deploy again")
        if recent:
            wait = backoff(policy, len(recent)) - recent[0]
            if wait > 0:
                return Action("wait", f"backing off after crash {len(recent)}", after_s=wait)
            return Action("launch", f"restart after crash {len(recent)} (backoff done)",
                          parallelism=desired.parallelism)
        return Action("launch", "desired running, no driver", parallelism=desired.parallelism)

    hung = (observed.heartbeat_age is not None and observed.heartbeat_age > policy.heartbeat_timeout_s) or (
        observed.heartbeat_age is None and history.launched_ago is not None
        and history.launched_ago > policy.startup_grace_s)
    if hung:
        age = "never" if observed.heartbeat_age is None else f"{observed.heartbeat_age:.0f} s ago"
        return Action("restart", f"driver alive but its last heartbeat was {age}", parallelism=desired.parallelism)
    if observed.parallelism is not None and observed.parallelism != desired.parallelism:
        change = f"running at {observed.parallelism}, desired {desired.parallelism}"
        if desired.strategy == "live":
            age = observed.live_request_age
            if age is None:
                return Action("resize_live", f"{change} (live)", parallelism=desired.parallelism)
            if age <= policy.live_resize_timeout_s:
                return Action("wait", f"{change}: live resize asked {age:.0f} s ago, not applied yet",
                              after_s=1.0)
            return Action("resize", f"{change}: live resize not applied in {age:.0f} s; restarting instead",
                          parallelism=desired.parallelism)
        return Action("resize", change, parallelism=desired.parallelism)
    return Action("none", "running as desired")
