"""An app's batches, from the driver's progress file: each one as a point (lag, rates, records
read, DLQ, latency, state partitions), an app's per-batch history and newest batches, its DLQ rate
and its last resize's pause. The app's row (``observe.status``) is made of its last point.

Read-only, tolerant and cheap: no Kafka call and no Spark. The lag is Spark's own, as of the last
batch: per partition, the newest offset the source saw (``latestOffset``) minus the one the batch
read to (``endOffset``), from the driver's progress file (``AppDir.progress``). A missing file or
ledger row shows as None.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from streamops.app.dir import AppDir
from streamops.ledger import Ledger
from streamops.settings import Settings


@dataclass(frozen=True)
class BatchPoint:
    """One micro-batch from the progress file."""

    batch_id: int
    at_ms: int
    input_rows: int
    input_rate: float | None
    processing_rate: float | None
    duration_ms: int | None
    state_rows: int | None
    state_bytes: int | None
    executors: int | None
    #: "topic/partition" -> records behind after the batch (Spark's latestOffset - endOffset)
    lag: dict[str, int] = field(default_factory=dict)
    #: "topic/partition" -> records the batch read (skew across input partitions)
    read: dict[str, int] = field(default_factory=dict)
    #: reason -> records the batch sent to the DLQ
    dlq: dict[str, int] = field(default_factory=dict)
    #: the newest and oldest Kafka timestamp (ms) of the records the batch read (Spark's observed
    #: metrics, ``JobQuery.observe_input``); None: the batch read nothing, or an older driver
    newest_ms: int | None = None
    oldest_ms: int | None = None
    #: when the driver committed the batch's transaction (ms); None for a replayed batch
    committed_ms: int | None = None
    #: records each state partition received, partition 0 first (``JobQuery.observe_state_partitions``)
    state_partition_records: list[int] = field(default_factory=list)
    #: [key, records] of the batch's hottest keys, hottest first (``JobQuery.observe_state_partitions``)
    hot_keys: list[tuple[str, int]] = field(default_factory=list)

    @property
    def total_lag(self) -> int | None:
        return sum(self.lag.values()) if self.lag else None

    @property
    def end_ms(self) -> int:
        """When the batch ended (its trigger's start plus its duration): its commit, as the commit
        log's files date it (bench/resize.py's pause)."""
        return self.at_ms + (self.duration_ms or 0)

    def latency_s(self, record_ms: int | None) -> float | None:
        """Seconds from a record's Kafka timestamp to the batch's commit (never negative: clocks)."""
        if record_ms is None or self.committed_ms is None:
            return None
        return round(max(0, self.committed_ms - record_ms) / 1000, 3)


def _offsets(text: str | None) -> dict[str, int]:
    """``{"topic": {"0": 12}}`` (the Kafka source's offset JSON) -> ``{"topic/0": 12}``."""
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {f"{t}/{p}": int(o) for t, parts in data.items() if isinstance(parts, dict)
            for p, o in parts.items() if isinstance(o, int)}


def _ms(stamp: Any) -> int:
    if isinstance(stamp, (int, float)):
        return int(stamp)
    try:
        return int(datetime.fromisoformat(str(stamp)).timestamp() * 1000)
    except ValueError:
        return 0


def point(line: dict[str, Any]) -> BatchPoint:
    """A progress line (``spark.driver.report.progress_line``) as a ``BatchPoint``."""
    def first(key: str) -> str | None:  # the first source's (an aggregate's plan scans its topic twice)
        return (line.get(key) or [None])[0]

    end, latest, start = (_offsets(first(k)) for k in ("end_offsets", "latest_offsets", "start_offsets"))
    lag = {tp: max(0, latest[tp] - o) for tp, o in end.items() if tp in latest}
    read = {tp: max(0, o - start[tp]) for tp, o in end.items() if tp in start}
    durations = line.get("duration_ms") or {}
    return BatchPoint(int(line["batch_id"]), _ms(line.get("timestamp")), int(line.get("input_rows") or 0),
                      line.get("input_rows_per_s"), line.get("processed_rows_per_s"),
                      durations.get("triggerExecution") if isinstance(durations, dict) else None,
                      line.get("state_rows"), line.get("state_bytes"), line.get("executors"), lag, read,
                      {str(k): int(v) for k, v in (line.get("dlq") or {}).items()},
                      line.get("input_newest_ms"), line.get("input_oldest_ms"), line.get("committed_ms"),
                      [int(n) for n in line.get("state_partition_records") or ()],
                      [(str(k), int(n)) for k, n in line.get("hot_keys") or ()])


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            for raw in f:
                try:
                    yield json.loads(raw)
                except ValueError:
                    continue  # a line cut by a crash
    except FileNotFoundError:
        return


def _needed(files: list[Path], since_ms: int | None) -> list[Path]:
    """The progress files a window needs: the rotated one only if the current one begins after
    the window's start (a chart of the last hour reads one file, not up to 80 MiB)."""
    if since_ms is None or len(files) < 2:
        return files
    try:
        with open(files[-1], "rb") as f:
            first = json.loads(f.readline())
    except (FileNotFoundError, ValueError):
        return files
    return files[-1:] if isinstance(first, dict) and "batch_id" in first and point(first).at_ms <= since_ms else files


def history(settings: Settings, app: str, *, since_ms: int | None = None, max_points: int | None = None
            ) -> list[BatchPoint]:
    """The app's batches at or after ``since_ms`` (all it keeps, ``AppDir.append_progress``), in
    order; with ``max_points``, every n-th of them (the newest kept) so that about that many remain.

    Only the lines it returns are parsed: the window's start is found by bisecting the lines (they
    are in time order), so a chart of the last hour out of a day's history parses an hour's lines."""
    raw: list[bytes] = []
    for path in _needed(AppDir.of(settings, app).progress_files(), since_ms):
        try:
            raw += path.read_bytes().splitlines()
        except FileNotFoundError:
            continue

    def parsed(i: int) -> BatchPoint | None:
        try:
            line = json.loads(raw[i])
        except ValueError:
            return None  # a line cut by a crash
        return point(line) if isinstance(line, dict) and "batch_id" in line else None

    lo = 0
    if since_ms is not None:  # the first line at or after since_ms (an unreadable line counts as before)
        hi = len(raw)
        while lo < hi:
            mid = (lo + hi) // 2
            p = parsed(mid)
            if p is None or p.at_ms < since_ms:
                lo = mid + 1
            else:
                hi = mid
    idx = list(range(lo, len(raw)))
    if max_points is not None and len(idx) > max_points:
        step = -(-len(idx) // max_points)
        idx = [*idx[:-1:step], idx[-1]]
    out = []
    for i in idx:
        p = parsed(i)
        if p is not None and (since_ms is None or p.at_ms >= since_ms):
            out.append(p)
    return out


def recent(settings: Settings, app: str, *, since_ms: int) -> list[BatchPoint]:
    """The batches at or after ``since_ms`` among the newest half MiB of progress (cheap: a scrape's)."""
    return [p for p in (point(line) for line in AppDir.of(settings, app).tail_progress() if "batch_id" in line)
            if p.at_ms >= since_ms]


def as_point(line: dict[str, Any] | None) -> BatchPoint | None:
    """A progress line as a point; None for no line or one that is not a batch's."""
    return point(line) if line and "batch_id" in line else None


def last_point(settings: Settings, app: str) -> BatchPoint | None:
    return as_point(AppDir.of(settings, app).last_progress())


def dlq_per_minute(points: Iterable[BatchPoint], *, now_ms: int, window_s: float = 300.0) -> dict[str, float]:
    """reason -> DLQ records per minute over the batches of the last ``window_s`` seconds."""
    since = now_ms - window_s * 1000
    total: dict[str, int] = {}
    for p in points:
        if p.at_ms >= since:
            for reason, n in p.dlq.items():
                total[reason] = total.get(reason, 0) + n
    return {reason: round(n * 60 / window_s, 3) for reason, n in total.items()}


# -- the last resize's pause ---------------------------------------------------------------------------
#: the pause's window, as bench/resize.py measures it: from this long before the resize's request ...
PAUSE_BEFORE_S = 5.0
#: ... until this long after it converged (the first batches at the new size: a new executor starts cold)
PAUSE_SETTLE_S = 20.0


@dataclass(frozen=True)
class ResizePause:
    """The longest time without a batch commit around an app's last succeeded resize."""

    operation_id: int
    strategy: str
    seconds: float
    #: the window has closed: the value no longer changes
    final: bool


def longest_gap(ends_ms: Iterable[int], start_ms: int, end_ms: int) -> float:
    """Seconds of the longest time without a batch commit inside [start, end] (edges count as
    commits; bench/resize.py's ``longest_gap``)."""
    times = sorted([start_ms, end_ms, *(t for t in ends_ms if start_ms < t < end_ms)])
    return max(b - a for a, b in itertools.pairwise(times)) / 1000


def resize_pause(op: dict[str, Any], points: Iterable[BatchPoint], *, now_ms: int) -> ResizePause:
    """Pure: the pause of resize operation ``op`` (a ledger row) from the batches around it. An
    idle app commits no batch: its pause is the whole window (as in the benchmark, which loads it)."""
    start = int(op["started_at"].timestamp() * 1000 - PAUSE_BEFORE_S * 1000)
    closes = int(op["ended_at"].timestamp() * 1000 + PAUSE_SETTLE_S * 1000)
    end = min(now_ms, closes)
    return ResizePause(int(op["id"]), str((op.get("params") or {}).get("strategy") or "restart"),
                       round(longest_gap((p.end_ms for p in points), start, end), 3), now_ms >= closes)


def last_resize(ledger: Ledger, app: str) -> dict[str, Any] | None:
    """The app's newest succeeded resize operation (request -> converged; the supervisor's own
    records of carrying one out are not requests)."""
    done = [op for op in ledger.operations(app, limit=5, kind="resize") if op["outcome"] == "succeeded"
            and op.get("ended_at") is not None]
    return done[0] if done else None


def last_resize_pause(settings: Settings, app: str, ledger: Ledger, *, now: float | None = None
                      ) -> ResizePause | None:
    """``resize_pause`` of the app's last resize, from the newest progress lines (or all of them
    when the window is older than those)."""
    op = last_resize(ledger, app)
    if op is None:
        return None
    now_ms = int((time.time() if now is None else now) * 1000)
    since = int(op["started_at"].timestamp() * 1000 - PAUSE_BEFORE_S * 1000)
    tail = [point(line) for line in AppDir.of(settings, app).tail_progress() if "batch_id" in line]
    if tail and tail[0].at_ms > since:  # the tail starts after the window: read the history
        tail = history(settings, app, since_ms=since - 600_000)  # a batch running at the start ends in it
    return resize_pause(op, tail, now_ms=now_ms)
