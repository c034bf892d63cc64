"""``streamops reprocess APP --from T1 --to T2 [--output-version v2]`` and ``promote``.

A reprocess is a bounded backfill of one input range, run beside the live app: the job runs
under its own identity (``APP__reprocess_vN``: own checkpoint, transactional id and batch
marker, so it never fences the live driver) into the versioned output ``<output>.vN`` (and
versioned changelog and DLQ topics), starting at T1's offsets and stopping by itself once T2's
are committed. Consecutive ranges chain: when a run ends, a copy of its checkpoint is kept under the
offsets it ended at, and a run whose range starts exactly there continues from that copy (so an
Airflow backfill, interval by interval, folds the whole span); any other start begins with empty
state. A rerun of a range therefore starts from the same checkpoint over the same offsets, and
the version's latest value per key comes out identical (its DLQ holds each invalid record once).
``promote`` then makes a version the one the live app writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.context import AppContext
from streamops.app.dir import AppDir
from streamops.app.outputs import check_version, reprocess_spec
from streamops.checkpoints import layout
from streamops.exceptions import StreamopsError, UsageError
from streamops.host.process import start_ticks
from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger
from streamops.ledger.store import HandOver
from streamops.lifecycle import driver, waits
from streamops.lifecycle import operations as ops
from streamops.lifecycle.replace import Replacement, rewind_marker
from streamops.reset.reprocess_results import (
    Offsets,
    PromotePlan,
    PromoteResult,
    ReprocessDryRun,
    ReprocessPlan,
    ReprocessResult,
    WaitingRun,
)
from streamops.reset.targets import parse_datetime
from streamops.results import extend
from streamops.settings import Settings
from streamops.spec import AppSpec, versioned_output


class ReprocessError(StreamopsError):
    """A reprocess run failed or did not finish in time.

    Operator action: read the driver log lines in the message; rerun (it starts over, idempotent).
    """


# -- the range ----------------------------------------------------------------------------------
def parse_bound(text: str, option: str) -> dict[str, Any]:
    """'earliest' | 'latest' | ISO 8601 date-time | JSON {topic: {partition: offset}}."""
    value = text.strip()
    if value in ("earliest", "latest"):
        return {"kind": value}
    if value.startswith("{"):
        try:
            offsets = json.loads(value)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{option}: not JSON offsets ({exc.msg}): {value!r}") from None
        if not isinstance(offsets, dict) or not all(isinstance(v, dict) for v in offsets.values()):
            raise UsageError(f"{option}: offsets must be {{topic: {{partition: offset}}}}")
        return {"kind": "offsets", "offsets": offsets}
    try:
        return {"kind": "time", "ms": int(parse_datetime(value).timestamp() * 1000), "text": value}
    except ValueError:
        raise UsageError(f"{option}: {value!r} is none of earliest, latest, an ISO 8601 date-time "
                         f"(e.g. 2026-11-23T08:00:00Z) or JSON offsets") from None


def bound_offset(bound: dict[str, Any], option: str, lo: int, hi: int, at_time: int | None,
                 given: int | None) -> tuple[int, bool]:
    """One partition's offset for a bound, within [lo, hi]; and whether a --from bound may start
    in records the broker has deleted (retention): records before the oldest kept one (``lo``) are
    gone, and it asked for offsets before it, or a time whose first kept record is that one.
    ``earliest``, or a partition its offsets leave out, asks for what is kept."""
    kind = bound["kind"]
    if kind == "earliest":
        o = lo
    elif kind == "latest":
        o = hi
    elif kind == "time":
        o = hi if at_time is None else at_time
    else:
        o = (lo if option == "--from" else hi) if given is None else given
    gone = (kind == "time" and o <= lo) or (kind == "offsets" and given is not None and given < lo)
    return min(max(o, lo), hi), option == "--from" and 0 < lo and gone


def resolve_bound(kafka: KafkaConfig, spec: AppSpec, bound: dict[str, Any], option: str
                  ) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Offsets per partition of every input topic (a time: the first record at or after it), and
    the partitions where the range may start in deleted records (``bound_offset``)."""
    from streamops.kafka.admin import end_offsets, offsets_for_times

    out: dict[str, dict[str, int]] = {}
    deleted: list[str] = []
    given = bound.get("offsets", {})
    unknown = sorted(set(given) - set(spec.input_topics))
    if unknown:
        raise UsageError(f"{option}: {', '.join(unknown)} is not an input of {spec.name} "
                         f"({', '.join(spec.input_topics)})")
    for topic in spec.input_topics:
        marks = end_offsets(kafka, topic)
        times = offsets_for_times(kafka, topic, bound["ms"]) if bound["kind"] == "time" else {}
        for p, (lo, hi) in sorted(marks.items()):
            asked = given.get(topic, {}).get(str(p))
            o, gone = bound_offset(bound, option, lo, hi, times.get(p), None if asked is None else int(asked))
            out.setdefault(topic, {})[str(p)] = o
            if gone:
                deleted.append(f"{topic}[{p}]: the records before offset {lo}, the oldest kept")
    return out, deleted


def default_version(ledger: Ledger, spec: AppSpec) -> str:
    """The version after the one the app writes now (the spec's own topic counts as v1)."""
    live = ledger.output_version(spec.name)
    return f"v{int(live[1:]) + 1 if live else 2}"


# -- reprocess -------------------------------------------------------------------------------------
def reprocess_plan(settings: Settings, spec: AppSpec, ledger: Ledger, *, kafka: KafkaConfig, frm: str, to: str,
                   output_version: str | None = None) -> ReprocessPlan:
    """What reprocess would do (``kafka``: the app's client configuration); changes nothing."""
    version = check_version(output_version) or default_version(ledger, spec)
    live = ledger.output_version(spec.name)
    if version == (live or "v1"):  # v1 is the spec's own topic
        raise UsageError(f"{spec.name} writes {versioned_output(spec.output_topic, live)} now: reprocess into "
                         f"another version (e.g. {default_version(ledger, spec)})")
    start, deleted = resolve_bound(kafka, spec, parse_bound(frm, "--from"), "--from")
    stop, _ = resolve_bound(kafka, spec, parse_bound(to, "--to"), "--to")
    rows, backwards = [], []
    for topic, parts in start.items():
        for p, s in sorted(parts.items(), key=lambda kv: int(kv[0])):
            e = stop[topic][p]
            if e < s:
                backwards.append(f"{topic}[{p}] {s} > {e}")
            rows.append({"topic": topic, "partition": int(p), "from": s, "to": e, "records": max(0, e - s)})
    if backwards:
        raise UsageError(f"--to is before --from on {', '.join(backwards[:5])}")
    derived = reprocess_spec(spec, version)
    return ReprocessPlan(
        app=spec.name, run_as=derived.name, output_version=version, frm=frm, to=to,
        output_topic=derived.output_topic, changelog_topic=derived.changelog_topic,
        dlq_topic=derived.dlq_topic, offsets=rows, records=sum(r["records"] for r in rows),
        start=start, stop=stop, checkpoint=str(checkpoint_dir(settings, derived)),
        continues=chain_dir(settings, derived, start).is_dir(),
        live_output_topic=versioned_output(spec.output_topic, live),
        max_offsets_per_trigger=derived.max_offsets_per_trigger,
        # the broker deleted records at the range's start (retention): they may have been in it
        warnings=[f"the range may start in records the broker has deleted (retention): {d}; they are not "
                  f"reprocessed" for d in deleted],
    )


def reprocess(ctx: AppContext, **kwargs: Any) -> ReprocessDryRun | ReprocessResult:
    """``reprocess_step`` advanced to its end in this process (the CLI), with progress from the run's
    checkpoint; interrupted, the run's driver is ended too."""
    progress = kwargs.get("progress") or (lambda _m: None)
    return waits.wait_here(ctx.ledger, lambda resume: reprocess_step(ctx, resume=resume, **kwargs),
                           lambda pending: _run_poll(ctx.settings, pending, progress), abandon=stop_run)


def reprocess_step(ctx: AppContext, *, frm: str, to: str,
                   output_version: str | None = None, dry_run: bool = False, master: str | None = None,
                   parallelism: int | None = None, who: str | None = None, timeout: float = 3600.0,
                   resume: int | None = None, progress: Callable[[str], None] = lambda _m: None) -> waits.Step:
    """Run the job over [from, to) into the versioned output (``lifecycle.waits``): the step that
    launches the run's driver ends waiting for it (kind ``reprocess``: ``watch_run`` polls it); the
    step resumed after the driver ended checks and records the range."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    kafka = ctx.kafka
    plan = reprocess_plan(settings, spec, ledger, kafka=kafka, frm=frm, to=to, output_version=output_version)
    if dry_run:
        return waits.Done(extend(plan, ReprocessDryRun))
    derived = reprocess_spec(spec, plan.output_version)
    n = spec.check_parallelism(parallelism) if parallelism else spec.parallelism.min
    try:
        # its own lease (the live app's operations go on meanwhile); a second run into it is refused
        with ledger.operation(derived.name, "reprocess", {"app": spec.name, "from": frm, "to": to,
                                                          "output_version": plan.output_version},
                              who=who, before={"start": plan.start, "stop": plan.stop}, resume=resume) as rec:
            t0 = time.monotonic()
            launched = _launched(ledger, rec.id) if rec.resumed else None
            if launched is not None:  # resumed: the driver ran meanwhile
                plan, marker = ReprocessPlan.from_dict(launched["plan"]), launched["marker"]
                t0 -= time.time() - launched["at"]
                done = _finish_run(settings, derived, plan.start, plan.stop, plan.records, progress)
            else:
                marker, run_file = _prepare_run(settings, derived, kafka, plan, progress)
                done = 0
                if plan.records:
                    proc = _launch(settings, spec, derived, run_file, n, master)
                    document = plan.to_dict()  # journaled, and what the waiter reads (``watch_run``)
                    ledger.step(rec.op, "launched", pid=proc.pid, ticks=start_ticks(proc.pid), at=time.time(),
                                plan=document, marker=marker)
                    raise HandOver({"app": derived.name, "kind": "reprocess", "operation_id": rec.id,
                                    "requested_by": rec.op.requested_by, "deadline": time.time() + timeout,
                                    "pid": proc.pid, "ticks": start_ticks(proc.pid), "plan": document})
            if plan.records:
                _keep_chain(settings, derived, plan.stop)
            seconds = round(time.monotonic() - t0, 1)
            rec.after = {**_run_after(settings, derived, plan.records, plan.output_topic, marker, done),
                         "seconds": seconds}
    except HandOver as wait:
        return waits.Waiting(wait.pending)
    rate = round(plan.records / seconds, 1) if seconds else None
    return waits.Done(extend(plan, ReprocessResult, dry_run=False, operation_id=rec.id, seconds=seconds,
                             records_per_second=rate, batches=rec.after["batches"]))


def _prepare_run(settings: Settings, derived: AppSpec, kafka: KafkaConfig, plan: ReprocessPlan,
                 progress: Callable[[str], None]) -> tuple[Any, Path]:
    """The run's checkpoint (new, or the state of the range that ended where this one starts), its
    topics, its batch marker rewound and its run file: (the marker rewound, the run file). ``kafka``:
    the live app's client configuration (the run's clients are the app's)."""
    from streamops.app.topics import ensure_app_topics

    ckpt = checkpoint_dir(settings, derived)
    if ckpt.exists():
        shutil.rmtree(ckpt)
    resumed = chain_dir(settings, derived, plan.start)
    if resumed.is_dir():  # the previous range ended exactly here: its state goes on
        progress(f"{derived.name}: continuing the state of the range that ended at these offsets")
        shutil.copytree(resumed, ckpt)
    ensure_app_topics(kafka, derived)
    batch = layout.last_committed_batch(ckpt)
    # the next batch is written again (upserts); DLQ entries already written are not
    marker = rewind_marker(settings, derived, kafka, -1 if batch is None else batch)
    run_dir = AppDir.of(settings, derived.name)
    run_file = run_dir.reprocess_run
    run_dir.write(run_file, {"output_version": plan.output_version, "start": plan.start, "stop": plan.stop})
    return marker, run_file


def _keep_chain(settings: Settings, derived: AppSpec, stop: Offsets) -> None:
    """A copy of the run's checkpoint under the offsets it ended at (``stop``): the next range continues it.
    Its last batch is clamped to the range's end first, as the driver does when it stops (one
    killed before that left offsets past the end, and the next range would skip the records there)."""
    ckpt = checkpoint_dir(settings, derived)
    if (last := layout.last_committed_batch(ckpt)) is not None:
        layout.clamp_batch_offsets(ckpt, last, stop)
    ended = chain_dir(settings, derived, stop)
    shutil.rmtree(ended, ignore_errors=True)
    shutil.copytree(ckpt, ended)


def chain_dir(settings: Settings, derived: AppSpec, offsets: Offsets) -> Path:
    """Where the checkpoint of a range that ended at ``offsets`` is kept (see module docstring)."""
    import hashlib

    key = hashlib.sha256(json.dumps(offsets, sort_keys=True).encode()).hexdigest()[:16]
    return settings.state_dir / "reprocess" / derived.name / key


def _launched(ledger: Ledger, op_id: int) -> dict[str, Any] | None:
    return _launched_step(ledger.get_operation(op_id))


def _launched_step(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``launched`` step of an operation's journal (the driver's pid, the plan, the marker)."""
    return next((s for s in (row or {}).get("journal") or [] if s["step"] == "launched"), None)


def _run_after(settings: Settings, derived: AppSpec, records: int, output_topic: str, marker: Any,
               done: int) -> dict[str, Any]:
    """What an ended run records as its operation's ``after``."""
    return {"records": records, "batches": layout.last_committed_batch(checkpoint_dir(settings, derived)),
            "output_topic": output_topic, "rewind_marker": marker, "committed": done}


def _launch(settings: Settings, spec: AppSpec, derived: AppSpec, run_file: Path, parallelism: int,
            master: str | None) -> subprocess.Popen:
    """The job's driver in a session of its own (it outlives a task that defers). It takes none of
    the caller's standard streams: Airflow's task supervisor talks to the task over a socket on
    stdin and waits for every end of it to close, so a driver holding it kept the deferred task's
    first workload open for the whole run; the executor's late "finished" event then arrived after
    the trigger had queued the task again, and the scheduler failed it (the backfill's runs failed)."""

    argv = [*driver.job_argv(spec), "--reprocess", str(run_file), "--parallelism", str(parallelism)]
    if master:
        argv += ["--master", master]
    with open(AppDir.of(settings, derived.name).log, "ab") as out:
        return subprocess.Popen(argv, env=driver.driver_env(settings, master or spec.spark_master), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, cwd=AppDir.of(settings, derived.name).root,
                                start_new_session=True)


def committed_records(checkpoint: Path, plan: dict[str, Any]) -> int:
    """Records of the range the run's checkpoint has committed (``plan``: the plan's document, as the
    run's pending carries it to the waiter). A running batch may have planned past the range's end
    (the bounded source filters the rows there; the driver lowers the offsets when it ends), so each
    partition counts up to the end only."""
    first = {(t, p): o for t, ps in plan["start"].items() for p, o in ps.items()}
    last = {(t, p): o for t, ps in plan["stop"].items() for p, o in ps.items()}
    committed = layout.committed_offsets(checkpoint)
    return sum(max(0, min(o, last.get((t, str(p)), o)) - first.get((t, str(p)), 0))
               for t, ps in committed.items() for p, o in ps.items())


def _run_poll(settings: Settings, pending: dict[str, Any], progress: Callable[[str], None]) -> waits.Poll:
    """A poll of a run's driver for a waiter in this process: progress from its checkpoint; past the
    deadline the driver is ended (``stop_run``) and the run fails with its last log lines."""
    ckpt, total = Path(pending["plan"]["checkpoint"]), pending["plan"]["records"]
    shown = [-1]

    def poll() -> bool:
        running, done = watch_run(pending)
        if done != shown[0]:
            shown[0] = done
            progress(f"{pending['app']}: {done}/{total} records ({100 * done / total:.0f}%), batch "
                     f"{layout.last_committed_batch(ckpt)}")
        if running and time.time() > pending["deadline"]:
            stop_run(pending)
            raise ReprocessError(f"{pending['app']} did not finish in time ({done}/{total} records); last log "
                                 f"lines:\n{_tail(AppDir.of(settings, pending['app']).log)}")
        return not running

    return poll


def watch_run(pending: dict[str, Any]) -> tuple[bool, int]:
    """(is the handed-over run's driver still running, records committed so far): the waiter's poll."""
    from streamops.host.process import Tracked

    return (Tracked(int(pending["pid"]), pending.get("ticks")).running(),
            committed_records(Path(pending["plan"]["checkpoint"]), pending["plan"]))


def stop_run(pending: dict[str, Any]) -> None:
    """End a handed-over run's driver (its wait passed the deadline): TERM, then KILL its group."""
    import signal

    from streamops.host.process import Tracked

    proc = Tracked(int(pending["pid"]), pending.get("ticks"))
    proc.signal(signal.SIGTERM)
    deadline = time.monotonic() + 30
    while proc.running() and time.monotonic() < deadline:
        time.sleep(0.5)
    if proc.running():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def waiting_run(ledger: Ledger, spec: AppSpec, output_version: str | None) -> WaitingRun | None:
    """The reprocess into ``output_version`` that holds its lease while handed over (nobody holds
    it in a process: a waiter elsewhere, an Airflow trigger, is to resume it), or None. Whether
    that waiter is gone is for the caller to tell (``settle_lost_run``)."""
    derived = reprocess_spec(spec, check_version(output_version) or default_version(ledger, spec))
    lease = ledger.lease(derived.name)
    if not lease or lease.get("pid") is not None:
        return None
    row = ledger.get_operation(int(lease["operation_id"]))
    if row is None or row["kind"] != "reprocess" or row["outcome"] != "running" or _launched_step(row) is None:
        return None
    return WaitingRun(operation_id=int(row["id"]), requested_by=row["requested_by"])


def settle_lost_run(settings: Settings, spec: AppSpec, ledger: Ledger, op_id: int, *, why: str,
                    progress: Callable[[str], None] = lambda _m: None) -> str:
    """End a handed-over reprocess whose waiter is gone (Airflow ended the deferred task outside
    the operator: marked failed, a lost worker, apache/airflow#72716), as its waiter would have:
    its driver stopped if it still runs; ``succeeded`` if the whole range was committed (and its
    checkpoint kept, so the next range continues it), else ``failed``. Returns the outcome.

    Without this its lease stayed until the run's deadline (an hour), and every later range into the
    version (a backfill's next intervals) was refused."""
    from streamops.host.process import Tracked

    row = ledger.get_operation(op_id)
    launched = _launched_step(row)
    if launched is None or row["outcome"] != "running":
        raise UsageError(f"operation #{op_id} is not a reprocess run waiting to be resumed")
    plan = launched["plan"]  # the plan's document, as journaled: only its range, records and topic are read
    derived = reprocess_spec(spec, plan["output_version"])
    op = ledger.take_back(op_id, derived.name, "reprocess")
    pending = {"pid": launched["pid"], "ticks": launched.get("ticks"), "plan": plan}
    if Tracked(int(launched["pid"]), launched.get("ticks")).running():
        progress(f"{derived.name}: operation #{op_id}'s driver still runs; stopping it")
        stop_run(pending)
    ledger.step(op, "settled", why=why)
    try:
        done = _finish_run(settings, derived, plan["start"], plan["stop"], plan["records"], progress)
    except ReprocessError as exc:
        ledger.finish(op, "failed", error=f"{why}; {exc}"[:4000], after=row.get("after"))
        return "failed"
    _keep_chain(settings, derived, plan["stop"])
    after = _run_after(settings, derived, plan["records"], plan["output_topic"], launched["marker"], done)
    ledger.finish(op, "succeeded", after={**after, "settled": why})
    return "succeeded"


def _finish_run(settings: Settings, derived: AppSpec, start: Offsets, stop: Offsets, total: int,
                progress: Callable[[str], None]) -> int:
    """The driver has ended: the whole range [``start``, ``stop``) of ``total`` records must be
    committed (else the log says why)."""

    first = {(t, p): o for t, ps in start.items() for p, o in ps.items()}
    committed = layout.committed_offsets(checkpoint_dir(settings, derived))
    short = [f"{t}[{p}] {committed.get(t, {}).get(int(p))} < {o}" for t, ps in stop.items()
             for p, o in ps.items() if o > first.get((t, p), 0) and committed.get(t, {}).get(int(p), -1) < o]
    if short:
        raise ReprocessError(f"{derived.name} stopped before the end of the range: {', '.join(short[:5])}; last log "
                             f"lines:\n{_tail(AppDir.of(settings, derived.name).log)}")
    progress(f"{derived.name}: {total}/{total} records (100%), done")
    return total


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


# -- promote ---------------------------------------------------------------------------------------
def promote(ctx: AppContext, version: str | None, **kwargs: Any) -> PromoteResult:
    """``promote_step`` advanced to its end in this process (the CLI)."""
    return waits.wait_here(ctx.ledger, lambda resume: promote_step(ctx, version, resume=resume,
                                                               **kwargs),
                           waits.convergence(ctx))


def promote_plan(settings: Settings, spec: AppSpec, ledger: Ledger, version: str | None, *, kafka: KafkaConfig,
                 running: bool | None = None) -> PromotePlan:
    """What ``promote`` would do (``running``: whether the app runs, if known)."""
    from streamops.kafka.admin import end_offsets
    from streamops.kafka.exceptions import TopicNotFoundError

    target = None if version in (None, "v1") else check_version(version)
    before = ledger.output_version(spec.name)
    topic = versioned_output(spec.output_topic, target)
    try:
        records = sum(hi - lo for lo, hi in end_offsets(kafka, topic).values())
    except TopicNotFoundError:
        raise UsageError(f"{topic} does not exist: reprocess into {target} first "
                         f"(`streamops reprocess {spec.name} --from ... --to ... --output-version {target}`)") from None
    running = driver.running(settings, spec.name) is not None if running is None else running
    return PromotePlan(app=spec.name, output_version_before=before, output_version_after=target,
                       output_topic_before=versioned_output(spec.output_topic, before), output_topic_after=topic,
                       records_in_topic=records, running=running, noop=before == target,
                       actions=[] if before == target else
                       [f"record in the ledger that {spec.name} writes {topic}"]
                       + ([f"restart {spec.name} at a batch boundary so it writes {topic}"] if running else []))


def promote_step(ctx: AppContext, version: str | None, *, dry_run: bool = False,
                 who: str | None = None, timeout: float = 300.0, resume: int | None = None,
                 progress: Callable[[str], None] = lambda _m: None) -> waits.Step:
    """Make ``version`` (None or 'v1': the spec's own topic) the output the live app writes; a
    running app is restarted at a batch boundary so its next batch writes there (``lifecycle.waits``)."""
    settings, spec, ledger = ctx.settings, ctx.spec, ctx.ledger
    kafka = ctx.kafka
    plan = promote_plan(settings, spec, ledger, version, kafka=kafka)
    if dry_run or plan.noop:
        return waits.Done(extend(plan, PromoteResult, dry_run=dry_run))
    if plan.running:
        ops.require_supervisor(settings)
    target = plan.output_version_after
    try:
        with ledger.operation(spec.name, "promote", {"output_version": target}, who=who, resume=resume,
                              before={"output_version": plan.output_version_before}) as rec:
            with Replacement(ctx, rec, running=plan.running, who=who,
                             timeout=timeout, progress=progress) as swap:
                parallelism = swap.stop()
                plan = promote_plan(settings, spec, ledger, version, kafka=kafka, running=swap.running)
                swap.step("output-version", before=plan.output_version_before, after=target)
                ledger.set_output_version(spec.name, target, who=who, op=rec.op)
                swap.restart(parallelism, batch_before=layout.last_committed_batch(checkpoint_dir(settings, spec)))
            rec.after = {"output_version": target}
    except HandOver as wait:
        return waits.Waiting(wait.pending)
    return waits.ended(rec, extend(plan, PromoteResult, dry_run=False, operation_id=rec.id))
