"""One app's status, read once: the row the Streams page, the metrics and the alerts show
(``StreamRow``) and, for ``streamops status``, what an operator debugging the app adds to it (the
ledger's rows as they are, the checkpoint, the lag Kafka reports, the last operations, notes).

Read-only and tolerant, because status is what operators run when something is broken: a missing
ledger row, checkpoint, progress file or broker shows as None (with a note) instead of failing.
The row is cheap (no Kafka call, no Spark): its lag is Spark's own as of the last batch
(``streams.BatchPoint.lag``); only the CLI's detail asks the broker (``lag``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamops.app.dir import AppDir
from streamops.checkpoints import layout
from streamops.host.files import read_json
from streamops.ledger import Ledger
from streamops.lifecycle.supervisor import heartbeat_file
from streamops.observe.streams import BatchPoint, as_point, history
from streamops.observe.watermark import WatermarkStatus, watermark_status
from streamops.observe.watermark import render as render_watermark
from streamops.settings import Settings
from streamops.spec import AppSpec, versioned_output

if TYPE_CHECKING:
    from streamops.kafka.config import KafkaConfig

#: a running app whose driver wrote no heartbeat for this long is ``stale``
STALE_AFTER_S = 120.0
#: operations ``streamops status`` lists
LAST_OPERATIONS = 5


# -- the lag Kafka reports (the CLI, the operations, ``check --wait``) ---------------------------------
def lag(kafka: KafkaConfig, spec: AppSpec, committed: dict[str, dict[int, int]]) -> tuple[dict | None, str | None]:
    """Per topic and partition: end offset - committed offset (whole topic if nothing committed);
    ``kafka``: the app's client configuration."""
    from streamops.kafka.admin import end_offsets

    out: dict[str, dict[str, int]] = {}
    try:
        for topic in spec.input_topics:
            ends = end_offsets(kafka, topic, timeout=5)
            done = committed.get(topic, {})
            out[topic] = {str(p): hi - done.get(p, lo) for p, (lo, hi) in sorted(ends.items())}
    except Exception as exc:  # noqa: BLE001 - status must still show the rest
        return None, f"lag unknown: {str(exc).splitlines()[0][:200]}"
    return out, None


def wait_caught_up(settings: Settings, spec: AppSpec, kafka: KafkaConfig, timeout: float,
                   progress: Callable[[str], None] = lambda _m: None) -> int:
    """Wait (at most ``timeout`` s) until the app's checkpoint has committed every input record
    present now, so that a comparison right after producing compares all of it. Returns the
    records still not committed (0: caught up)."""
    from streamops.app.checkpoint import checkpoint_dir
    from streamops.kafka.admin import end_offsets

    ckpt = checkpoint_dir(settings, spec)
    targets = {t: end_offsets(kafka, t, timeout=10) for t in spec.input_topics}
    deadline, said = time.monotonic() + timeout, 0.0
    while True:
        committed = layout.committed_offsets(ckpt)
        left = sum(max(0, hi - committed.get(t, {}).get(p, lo)) for t, ends in targets.items()
                   for p, (lo, hi) in ends.items())
        if left == 0 or time.monotonic() >= deadline:
            return left
        if time.monotonic() - said >= 10:
            progress(f"{spec.name}: waiting for {left} input records to be committed ...")
            said = time.monotonic()
        time.sleep(0.5)


# -- the row ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StreamRow:
    """What an operator wants to see of an app at a glance (the Streams page's row, the metrics)."""

    app: str
    description: str
    desired_status: str | None
    desired_parallelism: int | None
    observed_status: str | None
    observed_parallelism: int | None
    executors: int | None
    #: healthy | stale | crash-loop | failed | starting | stopped | not deployed
    health: str
    heartbeat_age_s: float | None
    crash_loop: bool
    error: str | None
    lag_records: int | None
    #: the time to read the lag at the last batch's processing rate
    lag_seconds: float | None
    input_rate: float | None
    processing_rate: float | None
    last_batch_id: int | None
    last_batch_age_s: float | None
    last_batch_duration_ms: int | None
    state_rows: int | None
    state_bytes: int | None
    newest_savepoint: dict[str, Any] | None
    last_verify: dict[str, Any] | None
    output_topic: str
    output_version: str | None
    spark_ui: str | None
    running_operation: dict[str, Any] | None
    #: the driver UI's Prometheus endpoint: Spark's own metrics (``spark.driver.report.prometheus_url``)
    spark_prometheus: str | None = None
    #: jobs with stream time: the watermark, its lag behind the newest stream time, the partition
    #: that holds it and since when, the idle partitions (``observe.watermark``; None without)
    watermark: WatermarkStatus | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _age(then: datetime | None, now: float) -> float | None:
    return None if then is None else round(max(0.0, now - then.timestamp()), 1)


def health(desired: dict | None, observed: dict | None, heartbeat_age_s: float | None) -> str:
    """Pure: an app's health from its desired and observed rows."""
    if desired is None and observed is None:
        return "not deployed"
    status = (observed or {}).get("status")
    if status == "crash-loop":
        return "crash-loop"
    if (desired or {}).get("status") != "running":
        return "stopped" if status in (None, "stopped") else status
    if status in ("crashed", "failed"):
        return "failed"
    if status in (None, "starting", "restarting"):
        return "starting"
    if heartbeat_age_s is not None and heartbeat_age_s > STALE_AFTER_S:
        return "stale"
    return "healthy" if status == "running" else str(status)


def _lag_seconds(lag_records: int | None, rate: float | None) -> float | None:
    """The time to read ``lag_records`` at ``rate`` (0 when caught up, None when unknown)."""
    if lag_records is None:
        return None
    return 0.0 if lag_records == 0 else round(lag_records / rate, 1) if rate else None


def _last_verify(ledger: Ledger, app: str) -> dict[str, Any] | None:
    verifies = ledger.operations(app, limit=1, kind="verify")
    if not verifies:
        return None
    v = verifies[0]
    return {"id": v["id"], "outcome": v["outcome"], "at": v["started_at"], "error": v["error"], "report": v["after"]}


def _batch_fields(last: BatchPoint | None, now: float) -> dict[str, Any]:
    """The row's columns from the app's last batch (all None without one)."""
    if last is None:
        return dict.fromkeys(("lag_records", "lag_seconds", "input_rate", "processing_rate", "last_batch_id",
                              "last_batch_age_s", "last_batch_duration_ms", "state_rows", "state_bytes"))
    return {"lag_records": last.total_lag, "lag_seconds": _lag_seconds(last.total_lag, last.processing_rate),
            "input_rate": last.input_rate, "processing_rate": last.processing_rate, "last_batch_id": last.batch_id,
            "last_batch_age_s": round(max(0.0, now - last.at_ms / 1000), 1),
            "last_batch_duration_ms": last.duration_ms, "state_rows": last.state_rows,
            "state_bytes": last.state_bytes}


def _row(settings: Settings, spec: AppSpec, ledger: Ledger, rows: tuple[dict | None, dict | None, dict | None],
         last: BatchPoint | None, now: float) -> StreamRow:
    """The row from the ledger ``rows`` (desired, observed, lease) and ``last`` the caller read,
    plus what only the row shows (savepoint, verification, output version, the driver's UI, the
    watermark)."""
    from streamops.app.checkpoint import checkpoint_dir

    desired, observed, lease = rows
    d, o = desired or {}, observed or {}
    hb_age = _age(o.get("heartbeat_at"), now)
    savepoints = ledger.savepoints(spec.name)
    version = ledger.output_version(spec.name)
    driver = read_json(AppDir.of(settings, spec.name).heartbeat)
    ui = driver if o.get("status") == "running" and isinstance(driver, dict) else {}
    return StreamRow(
        app=spec.name, description=spec.description or "",
        desired_status=d.get("status"), desired_parallelism=d.get("parallelism"),
        observed_status=o.get("status"), observed_parallelism=o.get("parallelism"), executors=o.get("executors"),
        health=health(desired, observed, hb_age), heartbeat_age_s=hb_age,
        crash_loop=o.get("status") == "crash-loop", error=o.get("error"), **_batch_fields(last, now),
        newest_savepoint=({k: savepoints[0][k] for k in ("id", "batch_id", "bytes", "created_at")}
                          if savepoints else None),
        last_verify=_last_verify(ledger, spec.name),
        output_topic=versioned_output(spec.output_topic, version), output_version=version,
        spark_ui=ui.get("ui_url"),
        running_operation=({k: lease[k] for k in ("operation_id", "kind", "holder", "acquired_at")}
                           if lease else None),
        spark_prometheus=ui.get("prometheus_url"),
        watermark=watermark_status(checkpoint_dir(settings, spec)),
    )


# -- the status: the row and the CLI's detail ---------------------------------------------------------
@dataclass(frozen=True)
class CheckpointStatus:
    """Where the app's checkpoint is and what its last committed batch covers."""

    path: Path
    last_committed_batch: int | None
    #: topic -> partition -> the next offset the app reads (empty: nothing committed)
    committed_offsets: dict[str, dict[int, int]]

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "last_committed_batch": self.last_committed_batch,
                "committed_offsets": {t: {str(p): o for p, o in ps.items()} for t, ps in
                                      self.committed_offsets.items()}}


@dataclass(frozen=True)
class AppStatus:
    """An app's status: its row, the ledger rows it was made of and, with ``app_status(detail=True)``,
    what ``streamops status`` shows beyond the row (``cli_dict``)."""

    row: StreamRow
    desired: dict[str, Any] | None
    observed: dict[str, Any] | None
    lease: dict[str, Any] | None
    #: the newest progress line as the driver wrote it (None: none, or the caller passed its point)
    last_batch: dict[str, Any] | None
    #: the detail (None / empty without it)
    checkpoint: CheckpointStatus | None = None
    #: topic -> partition -> records not committed, from Kafka's end offsets (None: not asked or unknown)
    lag: dict[str, dict[str, int]] | None = None
    operations: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def total_lag(self) -> int | None:
        return sum(sum(ps.values()) for ps in self.lag.values()) if self.lag else None

    def cli_dict(self) -> dict[str, Any]:
        """``streamops status --json`` (scripts read it: keys, order and values stay as they are;
        a job with stream time adds ``watermark`` at the end)."""
        if self.checkpoint is None:
            raise ValueError("the CLI's status needs app_status(..., detail=True)")
        wm = self.row.watermark
        return {"app": self.row.app, "desired": self.desired, "observed": self.observed, "lease": self.lease,
                "checkpoint": self.checkpoint.to_dict(), "lag": self.lag, "total_lag": self.total_lag,
                "last_batch": self.last_batch, "operations": self.operations, "notes": list(self.notes),
                **({"watermark": wm.to_dict()} if wm is not None else {})}


#: ``app_status``'s ``last`` when the caller has not read it
_READ: Any = object()


def app_status(settings: Settings, spec: AppSpec, ledger: Ledger, *, now: float | None = None, last: Any = _READ,
               detail: bool = False, kafka_lag: bool = True) -> AppStatus:
    """The app's status from one read of its ledger rows and its last progress line. ``last``: the
    app's ``streams.last_point`` if the caller read it already (a scrape needs it too). ``detail``:
    add what ``streamops status`` shows (``kafka_lag``: asking the broker, which ``--no-lag`` skips)."""
    rows = ledger.desired(spec.name), ledger.observed(spec.name), ledger.lease(spec.name)
    line = AppDir.of(settings, spec.name).last_progress() if detail or last is _READ else None
    if last is _READ:
        last = as_point(line)
    row = _row(settings, spec, ledger, rows, last, time.time() if now is None else now)
    status = AppStatus(row, *rows, last_batch=line)
    return _with_detail(status, settings, spec, ledger, kafka_lag=kafka_lag) if detail else status


def _with_detail(status: AppStatus, settings: Settings, spec: AppSpec, ledger: Ledger, *,
                 kafka_lag: bool) -> AppStatus:
    """``status`` with the checkpoint, Kafka's lag, the last operations and the notes."""
    from streamops.app.checkpoint import checkpoint_dir

    ckpt = checkpoint_dir(settings, spec)
    committed = layout.committed_offsets(ckpt)
    notes: list[str] = []
    lags = None
    if kafka_lag:
        lags, note = _lag(settings, spec, committed)
        if note:
            notes.append(note)
        if lags is not None:  # the broker answered: one more question to it
            notes += replication_notes(settings, [spec])
    supervisor = read_json(heartbeat_file(settings))
    if isinstance(supervisor, dict) and (note := (supervisor.get("notes") or {}).get(spec.name)):
        notes.append(f"supervisor: {note}")
    return replace(status, checkpoint=CheckpointStatus(ckpt, layout.last_committed_batch(ckpt), committed),
                   lag=lags, operations=ledger.operations(spec.name, limit=LAST_OPERATIONS), notes=notes)


def _lag(settings: Settings, spec: AppSpec, committed: dict[str, dict[int, int]]) -> tuple[dict | None, str | None]:
    """``lag`` with the app's Kafka client configuration built here: status shows a bad one as a
    note (status is what an operator runs when something is broken)."""
    from streamops.exceptions import ConfigError
    from streamops.kafka.security import kafka_config

    try:
        kafka = kafka_config(settings, spec)
    except ConfigError as exc:
        return None, f"lag unknown: {str(exc).splitlines()[0][:200]}"
    return lag(kafka, spec, committed)


def replication_notes(settings: Settings, specs: Iterable[AppSpec]) -> list[str]:
    """A note per topic of these apps whose replication differs from what the platform creates:
    one metadata request per Kafka client configuration among them (most apps share the platform's)."""
    from streamops.app.topics import app_topic_specs
    from streamops.kafka.admin import replication_drift
    from streamops.kafka.security import kafka_config

    groups: dict[tuple, tuple[Any, list[str]]] = {}
    notes: list[str] = []
    for spec in specs:
        try:
            kafka = kafka_config(settings, spec)
        except Exception as exc:  # noqa: BLE001 - status must still show the rest
            notes.append(f"replication unknown for {spec.name}: {str(exc).splitlines()[0][:200]}")
            continue
        same = (kafka.bootstrap, tuple(sorted(kafka.properties.items())), kafka.replication, kafka.min_insync)
        topics = groups.setdefault(same, (kafka, []))[1]
        topics += [t.name for t in app_topic_specs(spec).values() if t.name not in topics]
    for kafka, topics in groups.values():
        try:
            notes += [d.note() for d in replication_drift(kafka, topics)]
        except Exception as exc:  # noqa: BLE001 - status must still show the rest
            notes.append(f"replication unknown: {str(exc).splitlines()[0][:200]}")
    return notes


def stream_row(settings: Settings, spec: AppSpec, ledger: Ledger, *, now: float | None = None,
               last: Any = _READ) -> StreamRow:
    """The app's row alone (the Streams page, a scrape, the alerts)."""
    return app_status(settings, spec, ledger, now=now, last=last).row


def overview(settings: Settings, specs: Iterable[AppSpec], ledger: Ledger, *, now: float | None = None
             ) -> list[StreamRow]:
    now = time.time() if now is None else now
    return [stream_row(settings, spec, ledger, now=now) for spec in sorted(specs, key=lambda s: s.name)]


def _to_the_second(at: Any) -> str:
    """A time for a person to read: to the second (the ledger keeps microseconds)."""
    if isinstance(at, datetime):
        return str(at.replace(microsecond=0))
    return str(at) if at else "-"


def render(st: dict[str, Any]) -> str:
    """``streamops status``'s text, from ``AppStatus.cli_dict`` (so the text and --json agree)."""
    d, o, b = st["desired"] or {}, st["observed"] or {}, st["last_batch"] or {}
    desired = f"desired {d.get('status') or '-'} x{d.get('parallelism') or '-'}" if d else "not deployed"
    observed = (f"observed {o.get('status') or '-'} x{o.get('parallelism') or '-'} "
                f"(executors {o.get('executors') if o.get('executors') is not None else '-'}, "
                f"pid {o.get('pid') or '-'}, heartbeat {_to_the_second(o.get('heartbeat_at'))})"
                if o else "never seen running")
    batch = st["checkpoint"]["last_committed_batch"]
    committed = "no committed batch yet" if batch is None else f"last committed batch {batch}"
    lines = [f"{st['app']}: {desired}, {observed}",
             f"  {committed}, lag {st['total_lag'] if st['total_lag'] is not None else '?'}"]
    if st["lag"]:
        for topic, parts in st["lag"].items():
            lines.append(f"    {topic}: " + " ".join(f"p{p}={n}" for p, n in parts.items()))
    if b:
        rate_in, rate_done = b.get("input_rows_per_s") or 0, b.get("processed_rows_per_s") or 0
        lines.append(f"  batch {b.get('batch_id')}: {b.get('input_rows')} rows, in {rate_in:.0f}/s, "
                     f"processed {rate_done:.0f}/s, state {b.get('state_rows')} rows / "
                     f"{b.get('state_bytes')} bytes")
    if st.get("watermark"):
        lines += render_watermark(st["watermark"])
    if st["lease"]:
        le = st["lease"]
        lines.append(f"  operation {le['kind']} #{le['operation_id']} running since {_to_the_second(le['acquired_at'])}, "
                     f"asked by {le['holder']}")
    for op in st["operations"]:
        lines.append(f"  #{op['id']} {op['kind']} {op['outcome']} {op['started_at']:%Y-%m-%d %H:%M:%S} "
                     f"by {op['requested_by']}" + (f": {op['error'][:120]}" if op.get("error") else ""))
    lines += [f"  note: {n}" for n in st["notes"]]
    return "\n".join(lines)


# -- one app, over a window ---------------------------------------------------------------------------
@dataclass(frozen=True)
class AppView:
    """An app's page: its row, its batches over the window, the operations drawn on them."""

    row: StreamRow
    since_ms: int
    points: list[BatchPoint]
    operations: list[dict[str, Any]]
    savepoints: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"row": self.row.to_dict(), "since_ms": self.since_ms,
                "points": [{**asdict(p), "total_lag": p.total_lag} for p in self.points],
                "operations": self.operations, "savepoints": self.savepoints}


def app_view(settings: Settings, spec: AppSpec, ledger: Ledger, *, window_s: float = 3600.0,
             max_points: int = 600, now: float | None = None) -> AppView:
    """``max_points``: a long window is thinned to about that many batches (every n-th, the last kept)."""
    now = time.time() if now is None else now
    since_ms = int((now - window_s) * 1000)
    points = history(settings, spec.name, since_ms=since_ms, max_points=max_points)
    ops = ledger.operations(spec.name, limit=200, since=datetime.fromtimestamp(since_ms / 1000, UTC))
    return AppView(stream_row(settings, spec, ledger, now=now), since_ms, points, ops,
                   ledger.savepoints(spec.name)[:20])
