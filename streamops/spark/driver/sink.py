"""The app query's per-batch sink (``foreachBatch``): the exactly-once commit path.

For each micro-batch, in this order: evaluate it (the state store advances even on a replay);
let the live resize remove surplus executors at this boundary; encode the output records (with
stream time: the clocks for the next batch and their tick); commit the records, the batch's
input end and its marker in one Kafka transaction (``commit.BatchCommitter``: a batch an earlier
driver committed is skipped, ``written`` None); then write the heartbeat, keep what the progress
line of the batch adds (``report.BatchFacts``) and report the observed state.

With ``commit_on: executors`` (``tasks``, a ``task_commit.TaskCommit``) the tasks make and write
the batch's records, each partition in its own transaction, and the driver's transaction holds
the marker, the group's offsets and a tick only (``task_commit`` module docstring).

A class, where it was a closure inside the runner's query start: its collaborators (the
committer, the live control, the job's encoders, the reports) are handed to it once, in its
constructor, for each start of the query.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamops.app.dir import write_json
from streamops.checkpoints import layout
from streamops.host import failpoints
from streamops.spark.driver.live import LiveControl, control_step
from streamops.spark.driver.report import BatchFacts, ObservedReporter, dlq_reasons, prometheus_url
from streamops.spark.kafka_io import clamp_to_bound
from streamops.spec import AppSpec

if TYPE_CHECKING:
    from streamops.spark.driver.task_commit import TaskCommit


class BatchSink:
    """``foreachBatch``'s function for one start of the app's query (see the module docstring).

    ``stop_at``: a bounded run's end (reprocess), whose input end is clamped to it;
    ``started``: when the query started (wall clock s), for the heartbeat; ``executors()``:
    how many executors the driver has now."""

    def __init__(self, spark: Any, spec: AppSpec, ckpt: Path, committer: Any, *, to_records: Callable,
                 advance_clocks: Callable | None, control: LiveControl | None,
                 stop_at: dict[str, dict[str, int]] | None, heartbeat: Path, reporter: ObservedReporter,
                 facts: BatchFacts, executors: Callable[[], int], started: float,
                 tasks: TaskCommit | None = None) -> None:
        self.spark, self.spec, self.ckpt, self.committer, self.tasks = spark, spec, ckpt, committer, tasks
        self.to_records, self.advance_clocks, self.control = to_records, advance_clocks, control
        self.stop_at, self.started = stop_at, started
        self.heartbeat, self.reporter, self.facts, self.executors = heartbeat, reporter, facts, executors

    def __call__(self, df, batch_id: int) -> None:
        if self.tasks is not None:
            return self._on_executors(df, batch_id)
        t0 = time.monotonic()
        table = df.toArrow()  # always evaluate: the state store must advance even on a replay
        t1 = time.monotonic()
        resized = control_step(self.control.boundary) if self.control is not None else None
        records, end, extra = self._encode(table, batch_id)
        t2 = time.monotonic()
        if self.stop_at is not None:  # a bounded read consumed nothing past its bound
            end = clamp_to_bound(end, self.stop_at)
        written = self.committer.commit(batch_id, records, input_end=end, marker_extra=extra)
        failpoints.hit("sink.committed")  # committed in Kafka, not yet in Spark's commit log
        t3 = time.monotonic()
        self._report(batch_id, len(records), dlq_reasons(records, self.spec.dlq_topic), written, resized,
                     (t0, t1, t2, t3))

    def _on_executors(self, df, batch_id: int) -> None:
        """The batch's records made and committed by its tasks, then the driver's marker (module docstring)."""
        t0 = time.monotonic()
        planned = layout.batch_end_offsets(self.ckpt, batch_id)  # the clocks step takes it as planned
        # a bounded read consumed nothing past its bound
        end = clamp_to_bound(planned, self.stop_at) if self.stop_at is not None else planned
        emitted = self.committer.emitted_before(end)
        totals = self.tasks.write(df, batch_id, marker=self.committer.task_marker(batch_id), emitted_until=emitted)
        failpoints.hit("sink.tasks_committed")  # the tasks' records committed, the batch's marker not yet
        t1 = time.monotonic()
        resized = control_step(self.control.boundary) if self.control is not None else None
        ticks, extra = self._clocks(totals.clocks, batch_id, planned)
        t2 = time.monotonic()
        written = self.committer.commit(batch_id, ticks, input_end=end, marker_extra=extra, written=totals.records)
        failpoints.hit("sink.committed")  # committed in Kafka, not yet in Spark's commit log
        self.committer.dropped += totals.dropped
        t3 = time.monotonic()
        self._report(batch_id, totals.records + len(ticks), totals.dlq, written, resized, (t0, t1, t2, t3))

    def _encode(self, table, batch_id: int) -> tuple[list, dict, dict | None]:
        """The batch's output records, its input end offsets, and what its marker adds (stream time)."""
        records = self.to_records(table, batch_id)
        end = layout.batch_end_offsets(self.ckpt, batch_id)
        ticks, extra = self._clocks(table, batch_id, end)
        return records + ticks, end, extra

    def _clocks(self, clocks, batch_id: int, end: dict) -> tuple[list, dict | None]:
        """Stream time: the clocks for the next batch from this batch's clock rows (its output
        table, or the tasks' sums), and the tick and marker field to commit with it."""
        if self.advance_clocks is None:
            return [], None
        parts = [(t, int(p)) for t in self.spec.input_topics for p in end.get(t, {})]
        step = self.advance_clocks(clocks, batch_id, self.ckpt, parts,
                                   ends={(t, p): int(end[t][str(p)]) for t, p in parts})
        return step.ticks, {"stream_time": layout.clocks_marker(step.clocks, layout.batch_watermark(self.ckpt, batch_id))}

    def _report(self, batch_id: int, records: int, dlq: dict[str, int], written, resized: dict | None,
                times: tuple[float, float, float, float]) -> None:
        """After the commit: the heartbeat, the batch's facts for its progress line, the observed state."""
        t0, t1, t2, t3 = times
        spark, spec = self.spark, self.spec
        committed_ms = int(time.time() * 1000)
        ui_url = spark.sparkContext.uiWebUrl
        write_json(self.heartbeat, {
            "app": spec.name, "pid": os.getpid(), "app_id": spark.sparkContext.applicationId,
            "ui_url": ui_url, "prometheus_url": prometheus_url(ui_url),
            "status": "running", "batch_id": batch_id, "replayed": written is None,
            "records": records, "sink_seconds": round(t3 - t0, 3),
            "compute_seconds": round(t1 - t0, 3), "encode_seconds": round(t2 - t1, 3),
            "commit_seconds": round(t3 - t2, 3), **(resized or {}),
            "heartbeat_ms": int(time.time() * 1000), "started_ms": int(self.started * 1000),
        })
        executors = self.executors()
        self.facts.record(batch_id, executors, {
            "dlq": dlq,
            # a replayed batch was committed by an earlier driver: no latency of its own
            **({"committed_ms": committed_ms} if written is not None else {})})
        self.reporter.report(status="running", last_batch=batch_id, executors=executors, error=None)
