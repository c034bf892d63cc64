"""The ``streamops verify APP`` command: read the state store (on a thread: it runs mostly in the
JVM) while the checksums, the topic scans and GX's imports run, compare the topics with it, run
the expectation suites and record the outcome in the ledger (``verify``)."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamops.settings import Settings
from streamops.spec import AppSpec, load_job
from streamops.state.check import committed_batch, compare
from streamops.state.verify.expectations import run_quality
from streamops.state.verify.outputs import emitted, split_job_output
from streamops.state.verify.report import VerifyReport, ViewResult
from streamops.state.verify.state_read import StateRead, checksum_failures, read_state
from streamops.state.verify.topics import Progress, TopicRead, assemble_parts, decode_json, scan_topic

if TYPE_CHECKING:
    from streamops.kafka.config import KafkaConfig
    from streamops.ledger.store import Ledger

VIEWS = ("changelog", "output")


def verify(spec: AppSpec, settings: Settings, kafka: KafkaConfig, *, ledger: Ledger | None = None, record: bool = True,
           who: str | None = None, spark: Any = None, progress: Progress = lambda _m: None,
           now_ms: int | None = None, html: bool = True) -> VerifyReport:
    """Compare changelog and output with the state store at the last committed batch, run the
    GX suites, record the outcome in the ledger (``record``; a verify takes no lease).

    ``kafka``: the app's client configuration. ``now_ms``: the instant last logins must not be after (default: now + ``CLOCK_SKEW_MS``).
    Raises ``NothingCommittedError`` before anything is read if no batch is committed.
    """
    # millions of small dicts and no reference cycles: the cyclic GC would only rescan them
    # again and again (~30% of the decode time at 1M keys)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        report = _verify(spec, settings, kafka, spark=spark, progress=progress, now_ms=now_ms, html=html)
    finally:
        if gc_was_enabled:
            gc.enable()
    if record:
        report.operation_id = _record(report, settings, ledger, who)
    return report


@dataclass
class _Run:
    """One verify run: the app's job, checkpoint and batch it reads, and what it gathers on the way."""

    spec: AppSpec
    settings: Settings
    kafka: KafkaConfig
    job_cls: Any
    ckpt: Path
    batch: int
    progress: Progress
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @contextmanager
    def timed(self, step: str) -> Iterator[None]:
        """``timings[step]``: the seconds the block took (not set when it raises)."""
        ts = time.monotonic()
        yield
        self.timings[step] = time.monotonic() - ts


def _verify(spec: AppSpec, settings: Settings, kafka: KafkaConfig, *, spark: Any, progress: Progress, now_ms: int | None,
            html: bool) -> VerifyReport:
    import pandas  # noqa: F401  # imported here, before the threads below import lazily
    import pyarrow  # noqa: F401

    t0 = time.monotonic()
    job_cls = load_job(spec, settings.repo)
    ckpt, batch = committed_batch(settings, spec)
    run = _Run(spec, settings, kafka, job_cls, ckpt, batch, progress)
    progress(f"verifying {spec.name} as of batch {batch} (checkpoint {ckpt})")
    state, reads = _read(run, spark)
    if not state.readable:
        progress(f"  state store at batch {batch}: UNREADABLE: {state.error}")
        run.notes.append("the topics were read but not compared: the state store is the reference")
        views: list[ViewResult] = []
        quality = None
    else:
        progress(f"  state store at batch {batch}: {len(state.values):,} keys in {state.seconds:.1f}s")
        views = _compare(run, state, reads)
        with run.timed("quality"):
            quality = run_quality(spec, settings, state, views, batch=batch, now_ms=now_ms, html=html,
                                  notes=run.notes, progress=progress)
    return VerifyReport(spec.name, batch, state, views, quality, run.notes, time.monotonic() - t0, run.timings)


def _read(run: _Run, spark: Any) -> tuple[StateRead, dict[str, TopicRead]]:
    """The state store and the topics. The state scan runs mostly in the JVM: it runs on a thread
    of its own, overlapped with the checksums, the topic scans (Python) and GX's imports."""
    from streamops.state import quality as q

    state_box: dict[str, Any] = {}
    import pyspark.sql  # noqa: F401  # before the thread: no concurrent first import of pyspark

    worker = threading.Thread(target=_read_state_into, args=(state_box, run, spark), name="verify-state",
                              daemon=True)
    worker.start()
    try:
        with run.timed("checksums"):
            corrupt = checksum_failures(run.ckpt / "state")
        with run.timed("topics"):
            reads = _scan_topics(run)
        with run.timed("gx_import"):
            q.prefetch()  # ~8 s of imports, also overlapped with the state scan
    finally:
        if worker.is_alive():
            run.progress("  waiting for the state store scan")
        worker.join()
    if "error" in state_box:
        raise state_box["error"]
    state: StateRead = state_box["state"]
    state.corrupt_files = corrupt
    run.timings["state"] = state.seconds
    return state, reads


def _read_state_into(state_box: dict[str, Any], run: _Run, spark: Any) -> None:
    """``read_state`` on ``spark`` (default: a local session of its own), for a thread: the result
    (``state``) or what it raised (``error``, re-raised in the main thread) goes to ``state_box``."""
    ts = time.monotonic()
    try:
        own = spark is None
        session = _session(run.settings) if own else spark
        run.timings["spark_start"] = time.monotonic() - ts
        try:
            state_box["state"] = read_state(run.job_cls, session, run.ckpt, run.batch)
        finally:
            if own:
                session.stop()
    except BaseException as exc:  # noqa: BLE001  # re-raised in the main thread
        state_box["error"] = exc


def _scan_topics(run: _Run) -> dict[str, TopicRead]:
    """The changelog's and the output's latest value per key as of the batch, decoded as the job
    writes them (a named-state changelog's parts put together per key)."""
    from streamops.job import JsonSerde
    from streamops.spark.query.records import batch_of

    spec, job_cls = run.spec, run.job_cls
    topics = {"changelog": spec.changelog_topic, "output": spec.live_output_topic}
    serde = job_cls.state_serde
    named = job_cls.has_named_state()
    decoders = {"changelog": (lambda v: v) if named else decode_json if isinstance(serde, JsonSerde)
                else serde.loads, "output": decode_json}
    reads = {view: scan_topic(run.kafka, topics[view], view=view, max_batch=run.batch,
                              batch_of=batch_of, progress=run.progress, decode=decoders[view]) for view in VIEWS}
    if named:  # one record per part of a key's state: put each key's state together
        reads["changelog"] = assemble_parts(job_cls, reads["changelog"])
    return reads


def _compare(run: _Run, state: StateRead, reads: dict[str, TopicRead]) -> list[ViewResult]:
    """The changelog with the state, the output with what the state emits (the keys it explains)."""
    with run.timed("compare"):
        out = emitted(run.job_cls, state.values)
        split = split_job_output(run.job_cls, out, reads["output"], run.notes,
                                 input_topic=run.spec.input_topics[0])
        return [ViewResult(compare("changelog", state.values, reads["changelog"].values), reads["changelog"]),
                ViewResult(compare("output", out, split.to_compare), reads["output"], split)]


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
