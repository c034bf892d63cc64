"""What the driver tells about itself: its observed state in the ledger (``ObservedReporter``),
one line per micro-batch in the progress file (``progress_line``, ``progress_listener``, with
what the sink knew of the batch: ``BatchFacts``) and its heartbeat (``driver.json``).

One module for the three because they are one concern, the driver's reports: the loop and the
sink write them; ``observe`` reads what they wrote (files and ledger), never this module.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

from streamops.app.dir import AppDir, read_json, write_json
from streamops.settings import Settings

log = logging.getLogger("streamops.runtime")

#: seconds between liveness heartbeats while no batch commits
HEARTBEAT_S = 5.0


class ObservedReporter:
    """Writes the driver's observed state to the ledger. Best effort: a ledger outage is logged
    (once per kind of error) and never stops the stream."""

    def __init__(self, settings: Settings, app: str) -> None:
        self.app = app
        self._ledger = None
        self._warned: set[str] = set()
        try:
            from streamops.ledger import Ledger

            self._ledger = Ledger.open(settings.ledger_db_url)
        except Exception as exc:  # noqa: BLE001
            self._warn(exc)

    def _warn(self, exc: Exception) -> None:
        kind = type(exc).__name__
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("%s: cannot write observed state to the ledger (%s); the stream goes on",
                        self.app, str(exc).splitlines()[0][:200])

    def report(self, **fields) -> None:
        if self._ledger is None:
            return
        try:
            self._ledger.report_observed(self.app, **fields)
        except Exception as exc:  # noqa: BLE001
            self._warn(exc)

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()


def prometheus_url(ui_url: str | None) -> str | None:
    """The driver UI's Prometheus endpoint (``session.session_conf``: the streaming query's
    metrics, ``spark.sql.streaming.metricsEnabled``); the executors' are under
    ``/metrics/executors/prometheus/`` (``spark.ui.prometheus.enabled``)."""
    from streamops.spark.session import SPARK_PROMETHEUS_PATH

    return None if not ui_url else f"{ui_url.rstrip('/')}{SPARK_PROMETHEUS_PATH}/"


def dlq_reasons(records: list, dlq_topic: str) -> dict[str, int]:
    """A batch's DLQ records by reason (the header every DLQ record carries)."""
    from streamops.app.topics import H_REASON

    out: dict[str, int] = {}
    for r in records:
        if r.topic != dlq_topic:
            continue
        for k, v in r.headers or ():
            if k == H_REASON:
                reason = v.decode("utf-8", "replace")
                out[reason] = out.get(reason, 0) + 1
    return out


def progress_line(progress: dict) -> dict:
    """One line of the progress file from Spark's own JSON of a ``StreamingQueryProgress``
    (rates Spark could not compute, NaN there, are left out of its JSON: None here)."""
    return {
        "batch_id": progress["batchId"], "timestamp": progress["timestamp"],
        "input_rows": progress.get("numInputRows", 0),
        "input_rows_per_s": progress.get("inputRowsPerSecond"),
        "processed_rows_per_s": progress.get("processedRowsPerSecond"),
        "duration_ms": progress.get("durationMs", {}),
        # each as the JSON text Spark's offsets log holds, as before
        "end_offsets": [json.dumps(s.get("endOffset"), separators=(",", ":")) for s in progress.get("sources", [])],
        # per partition, what the batch read and what was there to read (lag and skew, ``observe``)
        "start_offsets": [json.dumps(s.get("startOffset"), separators=(",", ":")) for s in progress.get("sources", [])],
        "latest_offsets": [json.dumps(s.get("latestOffset"), separators=(",", ":"))
                           for s in progress.get("sources", [])],
        "state_rows": sum(op.get("numRowsTotal", 0) for op in progress.get("stateOperators", [])),
        "state_bytes": sum(op.get("memoryUsedBytes", 0) for op in progress.get("stateOperators", [])),
        **observed_facts(progress.get("observedMetrics") or {}),
    }


def observed_facts(observed: dict) -> dict:
    """What the query's observed metrics (``JobQuery.observe_input``, ``observe_state_partitions``)
    add to a progress line: the input's newest and oldest Kafka timestamps (ms; absent when the
    batch read nothing), the records per state partition (a list, partition 0 first) and the
    hottest keys."""
    from streamops.spark.query.observed import OBSERVED_HOT_KEYS, OBSERVED_INPUT, OBSERVED_STATE_PARTITIONS

    out: dict = {}
    inp = observed.get(OBSERVED_INPUT) or {}
    if inp.get("newest_ms") is not None:
        out.update(input_newest_ms=int(inp["newest_ms"]), input_oldest_ms=int(inp["oldest_ms"]))
    parts = observed.get(OBSERVED_STATE_PARTITIONS) or {}
    if parts:  # a sum over no rows is null
        out["state_partition_records"] = [int(parts.get(f"p{i}") or 0) for i in range(len(parts))]
    hot = (observed.get(OBSERVED_HOT_KEYS) or {}).get("hot") or []
    if hot:  # [key (cut at HOT_KEY_CHARS), records], hottest first
        out["hot_keys"] = [[str(h["item"])[:HOT_KEY_CHARS], int(h["count"])] for h in hot if h["item"] is not None]
    return out


#: a hot key as the progress line and the metrics show it: cut to this many characters
HOT_KEY_CHARS = 80


def progress_listener(app_dir: AppDir, reporter: ObservedReporter | None = None, name: str | None = None,
                      extra: Callable[[int], dict] | None = None):
    """A StreamingQueryListener appending one JSON line per micro-batch (rates, durations, offsets)
    and reporting rates and state size as observed state; only the query called ``name`` if
    given (an executor's warm-up runs a query of its own beside the app's).

    PySpark's own wrapper converts each event into Python field by field, one Py4J call each
    (maps and lists element by element): about 0.2 s of the driver JVM's CPU and 0.08 s of
    Python's per batch, more than a small batch's own work (bench/progress_listener.py). This
    one takes the progress as Spark's JSON in one call."""
    return _json_listener(_progress_writer(app_dir, reporter, name, extra))


def _progress_writer(app_dir: AppDir, reporter: ObservedReporter | None, name: str | None,
                     extra: Callable[[int], dict] | None) -> Callable[[dict], None]:
    """What ``progress_listener`` does with each progress (Spark's JSON, parsed)."""

    def on_progress(progress: dict) -> None:
        if name is not None and progress.get("name") != name:
            return
        line = progress_line(progress)
        if extra is not None:  # what the driver knows of the batch: executors, DLQ records by reason
            line.update(extra(line["batch_id"]))
        app_dir.append_progress(line)
        if reporter is not None:
            reporter.report(input_rate=line["input_rows_per_s"], processing_rate=line["processed_rows_per_s"],
                            state_rows=line["state_rows"], state_bytes=line["state_bytes"])

    return on_progress


def _json_listener(on_progress: Callable[[dict], None]):
    """A StreamingQueryListener that hands ``on_progress`` each progress, taken as Spark's JSON."""
    from pyspark import SparkContext
    from pyspark.sql.streaming import StreamingQueryListener

    class JsonCallback:
        """The Java interface PySpark's listener wrapper calls (through Py4J's callback server)."""

        def onQueryStarted(self, jevent) -> None:
            pass

        def onQueryProgress(self, jevent) -> None:
            on_progress(json.loads(jevent.progress().json()))

        def onQueryIdle(self, jevent) -> None:
            pass

        def onQueryTerminated(self, jevent) -> None:
            pass

        class Java:
            implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]

    class ProgressRecorder(StreamingQueryListener):
        """Registered with ``spark.streams.addListener`` (which starts the callback server), which
        hands Spark this listener's ``_jlistener``: here the JSON callback, not PySpark's."""

        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:  # only if PySpark called it itself
            on_progress(json.loads(event.progress.json))

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

        @property
        def _jlistener(self):
            if not hasattr(self, "_jlistenerobj"):  # one object: removeListener must find it again
                self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(JsonCallback())
            return self._jlistenerobj

    return ProgressRecorder()


class BatchFacts:
    """What the driver knows of each batch beside Spark's progress (its executors, its DLQ records
    by reason, when it committed), kept from the sink until Spark reports the batch's progress
    (after the sink ran): the ``extra`` of ``progress_listener``."""

    def __init__(self) -> None:
        self.last_executors: int | None = None  # as of the last committed batch (the progress file)
        self._facts: dict[int, dict] = {}  # batch id -> what its progress line adds

    def record(self, batch_id: int, executors: int, facts: dict) -> None:
        self.last_executors = executors
        self._facts[batch_id] = {"executors": executors, **facts}

    def __call__(self, batch_id: int) -> dict:
        """For the progress line of ``batch_id``."""
        facts = self._facts.pop(batch_id, {"executors": self.last_executors})
        for old in [b for b in self._facts if b < batch_id]:  # a batch Spark reported no progress for
            del self._facts[old]
        return facts


def last_batch(hb: Path) -> int | None:
    """The batch the heartbeat last reported committed."""
    data = read_json(hb)
    return data.get("batch_id") if isinstance(data, dict) else None


def update_heartbeat(hb: Path, **fields) -> None:
    """Merge ``fields`` into the heartbeat, stamped now."""
    current = read_json(hb)
    write_json(hb, {**(current if isinstance(current, dict) else {}), **fields,
                    "heartbeat_ms": int(time.time() * 1000)})
