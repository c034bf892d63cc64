"""Operations on apps as core functions (the CLI and the Airflow operators are thin callers).

Each operation has three steps so that waiting can happen anywhere: ``request_*`` checks the
request, takes the app's lease, records "before" and changes the desired state, returning a
``Pending`` (plain data: an Airflow trigger carries it); ``poll`` says, without blocking, whether
the supervisor has made the observed state match; ``complete`` / ``abandon`` record the outcome
and release the lease. ``deploy`` / ``resize`` / ``stop`` chain them for the CLI. Their results are
``streamops.lifecycle.outcomes`` types.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.context import AppContext
from streamops.app.control import supports_live
from streamops.app.dir import AppDir
from streamops.app.topics import check_partitions
from streamops.checkpoints import layout
from streamops.exceptions import StreamopsError, UsageError
from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger
from streamops.ledger.store import Operation
from streamops.lifecycle import driver
from streamops.lifecycle.outcomes import (
    AlreadyAtSize,
    OperationResult,
    Resized,
    ResizeResult,
    Running,
    Stopped,
)
from streamops.lifecycle.supervisor import SupervisorBeat, heartbeat_file
from streamops.observe.status import lag
from streamops.results import extend
from streamops.settings import Settings
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


class AppNotLoaded(StreamopsError):
    """The running supervisor does not know the app, so nothing would launch its driver.

    Operator action: the message says why (the spec file was refused, or the supervisor predates
    live specs) and what to run; nothing was changed.
    """


class SpecChangeNeedsRestart(StreamopsError):
    """The spec file changes a field that a running driver read at its start.

    Operator action: apply it with ``streamops stop APP`` then ``streamops deploy APP`` (the plan
    in the message), or put the field back; nothing was changed.
    """


def read_heartbeat(settings: Settings) -> SupervisorBeat | None:
    """The supervisor's last heartbeat, however old; None if it never wrote one."""
    return SupervisorBeat.from_file(heartbeat_file(settings))


def require_supervisor(settings: Settings) -> SupervisorBeat:
    """The supervisor's last heartbeat (apps loaded, spec file in force, its decisions)."""
    beat = read_heartbeat(settings)
    if beat is None:
        raise SupervisorNotRunning(
            "the supervisor is not running (no heartbeat); start it with `streamops platform up`") from None
    if beat.age() > SUPERVISOR_STALE_S:
        raise SupervisorNotRunning(
            f"the supervisor's last heartbeat is {beat.age():.0f} s old; "
            f"restart it with `streamops platform up`")
    return beat


#: how long a deploy waits for the supervisor to load an app it has not loaded yet (it reloads
#: the spec file on every pass, every 2 s)
LOAD_WAIT_S = 8.0


def require_loaded(settings: Settings, app: str, *, wait_s: float = LOAD_WAIT_S) -> SupervisorBeat:
    """The supervisor's heartbeat once it lists ``app``; ``AppNotLoaded`` (naming why and the
    remedy) if it does not within ``wait_s``, instead of a deploy that waits for a driver nobody starts."""
    deadline = time.monotonic() + wait_s
    while True:
        beat = require_supervisor(settings)
        if beat.loaded(app):
            return beat
        if time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    spec = beat.spec
    known = ", ".join(beat.apps or ()) or "none"
    if spec is None:
        raise AppNotLoaded(
            f"the running supervisor has not loaded {app} (it knows: {known}) and does not reload the spec file "
            f"(it was started before apps became live configuration); restart it: `streamops platform down --only "
            f"supervisor` then `streamops platform up`")
    if spec.get("error"):
        raise AppNotLoaded(
            f"the supervisor has not loaded {app}: it refused the spec file as it is now and keeps the last good "
            f"one (apps: {known}); fix the file and deploy again: {spec['error']}")
    raise AppNotLoaded(
        f"the supervisor has not loaded {app} within {wait_s:.0f} s (apps: {known}; spec file {spec.get('path')} "
        f"loaded {time.time() - (spec.get('loaded_at') or 0):.0f} s ago); is {app} in that file? "
        f"`streamops platform status` shows the supervisor, its log says what it loaded")


def spec_to_deploy(settings: Settings, spec: AppSpec) -> AppSpec:
    """What a deploy pins (``streamops.specfile``): the spec file's entry for the app, with the
    ledger's output version. A running app whose file entry changes a field its driver read at
    start is refused with the plan: such a change is applied by a stop and a deploy, never half way."""
    from streamops.app.dir import AppDir
    from streamops.app.outputs import with_version
    from streamops.spec import default_spec_path, load_specs
    from streamops.specfile import restart_changes

    current = load_specs(default_spec_path(settings.repo)).get(spec.name)
    if current is None:
        raise UsageError(f"{spec.name} is not in {default_spec_path(settings.repo)} any more: it cannot be deployed "
                         f"(`streamops stop {spec.name}` stops it)")
    target = with_version(current, spec.output_version)
    pinned = AppDir.of(settings, spec.name).pinned_spec()
    if pinned is not None and driver.running(settings, spec.name) is not None:
        changes = restart_changes(pinned, target)
        if changes:
            raise SpecChangeNeedsRestart(
                f"{spec.name} runs with a spec that differs from include/streams.yaml in fields its driver reads at "
                f"its start: {'; '.join(str(c) for c in changes)}. Nothing was changed. The plan to apply it: "
                f"`streamops stop {spec.name}` (a batch boundary), then `streamops deploy {spec.name}` (checks the "
                f"new spec against the checkpoint before it starts)")
    return target


STRATEGIES = ("restart", "live")


@dataclass
class Pending:
    """An operation whose desired state is set, and what "converged" means for it."""

    app: str
    kind: str  # deploy | resize | stop
    operation_id: int
    requested_by: str
    t0: float
    deadline: float
    before: dict[str, Any]
    parallelism: int | None = None
    batch_before: int | None = None
    #: set when there is nothing to wait for (a no-op resize): the operation is already finished
    result: AlreadyAtSize | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (an Airflow trigger carries it): ``result`` as its document."""
        return {**asdict(self), "result": None if self.result is None else self.result.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pending:
        result = data.get("result")
        return cls(**{**data, "result": None if result is None else AlreadyAtSize.from_dict(result)})

    @property
    def op(self) -> Operation:
        return Operation(self.operation_id, self.app, self.kind, self.requested_by)


def _snapshot(ctx: AppContext) -> dict[str, Any]:
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    ckpt = checkpoint_dir(settings, spec)
    desired = ledger.desired(spec.name) or {}
    return {"status": desired.get("status"), "parallelism": desired.get("parallelism"),
            "batch": layout.last_committed_batch(ckpt),
            "offsets": {t: {str(p): o for p, o in ps.items()} for t, ps in layout.committed_offsets(ckpt).items()}}


def _begin(ctx: AppContext, kind: str, params: dict[str, Any],
           who: str | None, timeout: float, parallelism: int | None) -> Pending:
    spec, ledger = ctx.spec, ctx.ledger
    before = _snapshot(ctx)
    op = ledger.begin(spec.name, kind, params, who=who, before=before, ttl_s=max(600.0, timeout + 120))
    t0 = time.time()
    return Pending(app=spec.name, kind=kind, operation_id=op.id, requested_by=op.requested_by, t0=t0,
                   deadline=t0 + timeout, before=before, parallelism=parallelism, batch_before=before["batch"])


def _guarded(ledger: Ledger, pending: Pending, step: Callable[[], None]) -> Pending:
    """Run the step that changes desired state; if it fails, the operation is recorded failed."""
    try:
        step()
    except BaseException as exc:
        abandon(ledger, pending, f"{type(exc).__name__}: {exc}")
        raise
    return pending


def request_deploy(ctx: AppContext, *, parallelism: int | None = None,
                   who: str | None = None, timeout: float = 300.0) -> Pending:
    """Desired running at ``parallelism`` (the spec's default when None)."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    n = spec.check_parallelism(spec.parallelism.default if parallelism is None else parallelism)
    require_supervisor(settings)
    target = spec_to_deploy(settings, spec)  # an app no longer in the file: a usage error, at once
    require_loaded(settings, spec.name)
    target.check_parallelism(n)
    check_compatible(settings, target, ctx.kafka)
    check_partitions(ctx.kafka, target)  # before anything is desired: no driver that cannot start
    pending = _begin(ctx, "deploy", {"parallelism": n}, who, timeout, n)

    def step() -> None:
        AppDir.of(settings, spec.name).pin_spec(target)
        ledger.set_desired(spec.name, status="running", parallelism=n, who=who, op=pending.op)

    return _guarded(ledger, pending, step)


def check_compatible(settings: Settings, spec: AppSpec, kafka: KafkaConfig) -> None:
    """The driver's pre-flight checks (``app.preflight``), before anything is desired or started."""
    from streamops.app.preflight import preflight
    from streamops.spec import load_job

    preflight(settings, spec, load_job(spec, settings.repo), kafka)


def check_strategy(settings: Settings, spec: AppSpec, strategy: str) -> str:
    """``live`` needs a cluster manager that can add executors to a running application."""
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown strategy {strategy!r}; available: {', '.join(STRATEGIES)}")
    if strategy == "live":
        master = spec.spark_master or settings.spark_master_url
        if not supports_live(master):
            raise UsageError(f"{spec.name} runs on {master}: a live resize needs a standalone (spark://) or "
                             f"k8s:// master that can add executors; use --strategy restart")
    return strategy


def request_resize(ctx: AppContext, *, parallelism: int,
                   strategy: str = "restart", who: str | None = None, timeout: float = 300.0) -> Pending:
    """Change a running app's parallelism. ``restart``: graceful stop at a batch boundary and a new
    driver from the same checkpoint with the new executor count; ``live``: the running driver adds
    or removes executors, the query keeps running. Already at that size: a finished no-op."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    check_strategy(settings, spec, strategy)
    n = spec.check_parallelism(parallelism)
    require_supervisor(settings)
    desired = ledger.desired(spec.name)
    if desired is None or desired["status"] != "running":
        raise UsageError(f"{spec.name} is not deployed; `streamops deploy {spec.name} --parallelism {n}`")
    pending = _begin(ctx, "resize", {"parallelism": n, "strategy": strategy}, who, timeout, n)
    pending.extra["strategy"] = strategy
    observed = ledger.observed(spec.name) or {}
    if desired["parallelism"] == n and observed.get("parallelism") == n:
        after = {**pending.before, "noop": True}
        ledger.finish(pending.op, "succeeded", after=after)
        pending.result = AlreadyAtSize(app=spec.name, operation_id=pending.operation_id, parallelism=n, noop=True,
                                       strategy=strategy, before=pending.before, after=after, seconds=0.0)
        return pending
    return _guarded(ledger, pending, lambda: ledger.set_desired(
        spec.name, status="running", parallelism=n, who=who, op=pending.op, strategy=strategy))


def request_stop(ctx: AppContext, *, now: bool = False, who: str | None = None,
                 timeout: float = 180.0) -> Pending:
    """Desired stopped; graceful (batch boundary) unless ``now`` (the driver is killed at once)."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    require_supervisor(settings)
    pending = _begin(ctx, "stop", {"now": now}, who, timeout, None)

    def step() -> None:
        desired = ledger.desired(spec.name)
        ledger.set_desired(spec.name, status="stopped",
                           parallelism=desired["parallelism"] if desired else spec.parallelism.default,
                           who=who, op=pending.op)
        if now:  # do not wait for the supervisor's graceful stop
            driver.stop(settings, spec.name, now=True)

    return _guarded(ledger, pending, step)


def poll(ctx: AppContext, pending: Pending) -> dict[str, Any] | None:
    """Non-blocking: the observed state once converged, else None. Raises ``NotConverged`` when it
    cannot converge any more (crash loop, deadline passed). Keeps the lease alive. A no-op resize
    converged at its request: its result's document."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    if pending.result is not None:
        return pending.result.to_dict()
    if time.time() - pending.extra.get("renewed", pending.t0) > 60:
        ledger.renew(pending.op, ttl_s=max(600.0, pending.deadline - time.time() + 120))
        pending.extra["renewed"] = time.time()
    if pending.kind == "stop":
        if driver.running(settings, spec.name) is None:
            return ledger.observed(spec.name) or {}
        if time.time() > pending.deadline:
            raise NotConverged(f"{spec.name} still running after {pending.deadline - pending.t0:.0f} s; "
                               f"`streamops stop {spec.name} --now` kills it")
        return None
    o = ledger.observed(spec.name) or {}
    if _converged(ctx, o, pending):
        return o
    gave_up = o.get("status") == "crash-loop" and o.get("heartbeat_at") is not None and \
        o["heartbeat_at"].timestamp() >= pending.t0  # not the give-up this deploy is meant to end
    if gave_up or time.time() > pending.deadline:
        what = "a batch" if pending.kind == "deploy" else f"a batch at x{pending.parallelism}"
        raise NotConverged(f"{spec.name} did not commit {what} within {pending.deadline - pending.t0:.0f} s "
                           f"(observed: {o.get('status')}): {diagnose(ctx, pending)}")
    return None


#: the supervisor's own operation rows that start a driver
LAUNCHES = ("supervisor-launch", "supervisor-restart", "supervisor-resize")


def diagnose(ctx: AppContext, pending: Pending) -> str:
    """Why an app has not converged, in the operator's terms: its driver was never launched (and
    who should have), was launched and exited (its last log lines), or runs without a batch (what
    it waits for)."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    app = spec.name
    since = [op for op in ledger.operations(app, limit=200) if op["started_at"].timestamp() >= pending.t0 - 1]
    launches = [op for op in since if op["kind"] in LAUNCHES]
    exits = [op for op in since if op["kind"] == "driver-exit"]
    rec = driver.running(settings, app)
    beat = read_heartbeat(settings)
    if not launches and rec is None:
        decision = beat.decisions.get(app) if beat is not None else None
        if beat is not None and beat.apps is not None and app not in beat.apps:
            who = f"the supervisor has not loaded {app} (it knows: {', '.join(beat.apps) or 'none'})"
        elif decision:
            who = f"the supervisor, whose last decision for {app} was: {decision}"
        else:
            who = "the supervisor (`streamops platform status`; its log says what it did)"
        return f"no driver was launched since the request; it should have been launched by {who}"
    if rec is None or exits:
        first = launches[-1] if launches else None
        pid = (first or {}).get("after", {}) or {}
        return (f"the driver was launched ({len(launches)} time(s){', first pid ' + str(pid.get('pid')) if pid else ''})"
                f" and exited {len(exits) or 1} time(s); its last log lines:\n{driver.log_tail(settings, app, 30)}")
    o = ledger.observed(app) or {}
    hb_age = driver.heartbeat_age(settings, app)
    state = (f"the driver (pid {rec.pid}) runs (status {o.get('status')}, executors {o.get('executors')}, heartbeat "
             f"{'none yet' if hb_age is None else f'{hb_age:.0f} s ago'}) but committed no batch since the request")
    lags, note = lag(ctx.kafka, spec, layout.committed_offsets(checkpoint_dir(settings, spec)))
    if lags is None:
        waits = f"; it cannot read its input: {note}"
    else:
        total = sum(sum(p.values()) for p in lags.values())
        waits = (f"; {total} input records wait on {', '.join(spec.input_topics)}"
                 + (": a batch runs or Spark waits for executors (is the Spark master out of free cores? "
                    "`streamops platform status`)" if total else ""))
    return f"{state}{waits}; its last log lines:\n{driver.log_tail(settings, app, 20)}"


def _converged(ctx: AppContext, o: dict[str, Any], pending: Pending) -> bool:
    settings, spec = ctx.settings, ctx.spec
    fresh = o.get("heartbeat_at") is not None and o["heartbeat_at"].timestamp() >= pending.t0
    if not fresh or o.get("status") != "running" or o.get("parallelism") != pending.parallelism:
        return False
    ckpt = checkpoint_dir(settings, spec)
    reported = o.get("last_batch")
    if reported is not None and (pending.batch_before is None or reported > pending.batch_before):
        # reported by this driver from inside the batch (so at the new size); Spark writes the
        # batch's commit file only after that: wait for it, so "after" names a committed batch
        committed = layout.last_committed_batch(ckpt)
        return committed is not None and committed >= reported
    lags, _note = lag(ctx.kafka, spec, layout.committed_offsets(ckpt))
    return lags is not None and sum(sum(p.values()) for p in lags.values()) == 0  # caught up: no batch to wait for


def complete(ctx: AppContext, pending: Pending,
             observed: dict[str, Any]) -> OperationResult:
    """Record the converged operation as succeeded (with "after") and release the lease; its
    result by kind (``Stopped``, ``Resized``, else ``Running``), a no-op resize's as it finished."""
    spec, ledger = ctx.spec, ctx.ledger
    if pending.result is not None:
        return pending.result
    after = _snapshot(ctx)
    if pending.kind != "stop":
        after.update(pid=observed.get("pid"), spark_app_id=observed.get("spark_app_id"),
                     executors=observed.get("executors"))
    ledger.finish(pending.op, "succeeded", after=after)
    seconds = round(time.time() - pending.t0, 1)
    if pending.kind == "stop":
        return Stopped(app=spec.name, operation_id=pending.operation_id, before=pending.before, after=after,
                       seconds=seconds)
    ran = Running(app=spec.name, operation_id=pending.operation_id, before=pending.before, after=after,
                  seconds=seconds, parallelism=cast(int, pending.parallelism))  # set by every request but a stop's
    if pending.kind == "resize":
        return extend(ran, Resized, noop=False, strategy=pending.extra.get("strategy", "restart"))
    return ran


def abandon(ledger: Ledger, pending: Pending, error: str) -> None:
    """Record the operation as failed and release the lease (desired state stays as asked)."""
    if pending.result is None:
        ledger.finish(pending.op, "failed", error=error[:4000])


def wait(ctx: AppContext, pending: Pending, *, interval: float = 0.5,
         progress: Callable[[str], None] = lambda _m: None) -> OperationResult:
    """Block until converged (then ``complete``), or ``abandon`` and raise."""
    ledger = ctx.ledger
    try:
        while (observed := poll(ctx, pending)) is None:
            time.sleep(interval)
    except BaseException as exc:
        abandon(ledger, pending, f"{type(exc).__name__}: {exc}")
        raise
    return complete(ctx, pending, observed)


def deploy(ctx: AppContext, *, parallelism: int | None = None,
           who: str | None = None, timeout: float = 300.0,
           progress: Callable[[str], None] = lambda _m: None) -> Running:
    """Returns once a batch after the start has committed (or the driver runs with nothing to read)."""
    spec = ctx.spec
    pending = request_deploy(ctx, parallelism=parallelism, who=who, timeout=timeout)
    progress(f"{spec.name}: desired running x{pending.parallelism}; waiting for the first committed batch ...")
    return cast(Running, wait(ctx, pending))  # a deploy's ``complete``


def resize(ctx: AppContext, *, parallelism: int, strategy: str = "restart",
           who: str | None = None, timeout: float = 300.0,
           progress: Callable[[str], None] = lambda _m: None) -> ResizeResult:
    """Returns once a batch committed at the new size (or it runs caught up at that size)."""
    spec = ctx.spec
    pending = request_resize(ctx, parallelism=parallelism, strategy=strategy, who=who,
                             timeout=timeout)
    if pending.result is None:
        progress(f"{spec.name}: desired x{pending.parallelism} ({strategy}); waiting for a batch at the new size ...")
    return cast(ResizeResult, wait(ctx, pending))  # a resize's ``complete``, or the no-op it finished with


def stop(ctx: AppContext, *, now: bool = False, who: str | None = None,
         timeout: float = 180.0, progress: Callable[[str], None] = lambda _m: None) -> Stopped:
    """Returns once no driver runs."""
    spec = ctx.spec
    pending = request_stop(ctx, now=now, who=who, timeout=timeout)
    progress(f"{spec.name}: desired stopped; waiting for the driver to exit ...")
    return cast(Stopped, wait(ctx, pending))  # a stop's ``complete``
