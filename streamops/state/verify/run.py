"""The ``streamops verify APP`` command: read the state store (on a thread: it runs mostly in the
JVM) while the checksums, the topic scans and GX's imports run, compare the topics with it, run
the expectation suites and record the outcome in the ledger (``verify``)."""

from __future__ import annotations

import gc
import threading
import time
from typing import TYPE_CHECKING, Any

from streamops.checkpoints import layout
from streamops.settings import Settings
from streamops.spec import AppSpec, load_job
from streamops.state.check import NothingCommittedError, compare
from streamops.state.verify.expectations import run_quality
from streamops.state.verify.outputs import emitted, split_job_output
from streamops.state.verify.report import VerifyReport, ViewResult
from streamops.state.verify.state_read import StateRead, checksum_failures, read_state
from streamops.state.verify.topics import Progress, assemble_parts, decode_json, scan_topic

if TYPE_CHECKING:
    from streamops.ledger.store import Ledger

VIEWS = ("changelog", "output")


def verify(spec: AppSpec, settings: Settings, *, ledger: Ledger | None = None, record: bool = True,
           who: str | None = None, spark: Any = None, progress: Progress = lambda _m: None,
           now_ms: int | None = None, html: bool = True) -> VerifyReport:
    """Compare changelog and output with the state store at the last committed batch, run the
    GX suites, record the outcome in the ledger (``record``; a verify takes no lease).

    ``now_ms``: the instant last logins must not be after (default: now + ``CLOCK_SKEW_MS``).
    Raises ``NothingCommittedError`` before anything is read if no batch is committed.
    """
    # millions of small dicts and no reference cycles: the cyclic GC would only rescan them
    # again and again (~30% of the decode time at 1M keys)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        report = _verify(spec, settings, spark=spark, progress=progress, now_ms=now_ms, html=html)
    finally:
        if gc_was_enabled:
            gc.enable()
    if record:
        report.operation_id = _record(report, settings, ledger, who)
    return report


def _verify(spec: AppSpec, settings: Settings, *, spark: Any, progress: Progress, now_ms: int | None,
            html: bool) -> VerifyReport:
    import pandas  # noqa: F401  # imported here, before the threads below import lazily
    import pyarrow  # noqa: F401

    from streamops.app.checkpoint import checkpoint_dir
    from streamops.state import quality as q

    t0 = time.monotonic()
    timings: dict[str, float] = {}
    job_cls = load_job(spec, settings.repo)
    ckpt = checkpoint_dir(settings, spec)
    batch = layout.last_committed_batch(ckpt)
    if batch is None:
        raise NothingCommittedError(f"{spec.name}: no committed batch in {ckpt}")
    progress(f"verifying {spec.name} as of batch {batch} (checkpoint {ckpt})")

    # the state scan runs mostly in the JVM: overlap it with the topic scans (Python) below
    state_box: dict[str, Any] = {}

    def read_state_in_background() -> None:
        ts = time.monotonic()
        try:
            own = spark is None
            session = _session(settings) if own else spark
            timings["spark_start"] = time.monotonic() - ts
            try:
                state_box["state"] = read_state(job_cls, session, ckpt, batch)
            finally:
                if own:
                    session.stop()
        except BaseException as exc:  # noqa: BLE001  # re-raised in the main thread
            state_box["error"] = exc

    import pyspark.sql  # noqa: F401  # before the thread: no concurrent first import of pyspark

    worker = threading.Thread(target=read_state_in_background, name="verify-state", daemon=True)
    worker.start()
    try:
        ts = time.monotonic()
        corrupt = checksum_failures(ckpt / "state")
        timings["checksums"] = time.monotonic() - ts
        ts = time.monotonic()
        from streamops.job import JsonSerde
        from streamops.spark.job_query import batch_of

        topics = {"changelog": spec.changelog_topic, "output": spec.live_output_topic}
        serde = job_cls.state_serde
        named = job_cls.has_named_state()
        decoders = {"changelog": (lambda v: v) if named else decode_json if isinstance(serde, JsonSerde)
                    else serde.loads, "output": decode_json}
        reads = {view: scan_topic(settings.kafka_bootstrap, topics[view], view=view, max_batch=batch,
                                  batch_of=batch_of, progress=progress, decode=decoders[view]) for view in VIEWS}
        if named:  # one record per part of a key's state: put each key's state together
            reads["changelog"] = assemble_parts(job_cls, reads["changelog"])
        timings["topics"] = time.monotonic() - ts
        ts = time.monotonic()
        q.prefetch()  # ~8 s of imports, also overlapped with the state scan
        timings["gx_import"] = time.monotonic() - ts
    finally:
        if worker.is_alive():
            progress("  waiting for the state store scan")
        worker.join()
    if "error" in state_box:
        raise state_box["error"]
    state: StateRead = state_box["state"]
    state.corrupt_files = corrupt
    timings["state"] = state.seconds
    notes: list[str] = []
    if not state.readable:
        progress(f"  state store at batch {batch}: UNREADABLE: {state.error}")
        notes.append("the topics were read but not compared: the state store is the reference")
        views: list[ViewResult] = []
        quality = None
    else:
        progress(f"  state store at batch {batch}: {len(state.values):,} keys in {state.seconds:.1f}s")
        ts = time.monotonic()
        out = emitted(job_cls, state.values)
        split = split_job_output(job_cls, out, reads["output"], notes, input_topic=spec.input_topics[0])
        views = [ViewResult(compare("changelog", state.values, reads["changelog"].values), reads["changelog"]),
                 ViewResult(compare("output", out, split.to_compare), reads["output"], split)]
        timings["compare"] = time.monotonic() - ts
        ts = time.monotonic()
        quality = run_quality(spec, settings, state, views, batch=batch, now_ms=now_ms, html=html,
                              notes=notes, progress=progress)
        timings["quality"] = time.monotonic() - ts
    return VerifyReport(spec.name, batch, state, views, quality, notes, time.monotonic() - t0, timings)


def _session(settings: Settings):
    from streamops.state.check import _local_spark

    return _local_spark(settings)


def _record(report: VerifyReport, settings: Settings, ledger: Ledger | None, who: str | None) -> int:
    """A verify is read-only: logged with ``record`` (no lease), so it runs beside other operations."""
    from streamops.ledger.store import Ledger, requested_by

    own = ledger is None
    lg = Ledger.open(settings.ledger_db_url) if own else ledger
    try:
        return lg.record(report.app, "verify", {"batch_id": report.batch_id}, who=requested_by(who),
                         outcome="succeeded" if report.ok else "failed",
                         error=None if report.ok else report.headline(), after=report.ledger_summary())
    finally:
        if own:
            lg.close()
