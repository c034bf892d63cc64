"""Where a stream-time app's watermark stands and which input partition holds it (issue 40).

The watermark is the smallest stream time over the app's input partitions
(``stream_time.watermark``), so one quiet partition holds every timer, window and join of the app;
``streamops status``, the Streams page and the metrics say which one, and since when. Read from
the checkpoint's clocks files (``layout.clocks_file``), no Spark and no pyarrow: the last
committed batch's file, then the ones before it only while the same partition holds the watermark
(at most ``layout.CLOCKS_RETAINED`` of a few hundred bytes each). An app without stream time has
no clocks files: None.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from streamops.checkpoints import layout
from streamops.stream_time import span, utc

Partition = tuple[str, int]


@dataclass(frozen=True)
class Holder:
    """The input partition the watermark waits for."""

    topic: str
    partition: int
    #: its stream time (ms); None: it has shown no event yet, so the app has no watermark
    stream_time_ms: int | None
    #: the first batch of the run of batches, up to the last committed one, in which it held the
    #: watermark, and when Spark planned that batch (the offsets log, wall clock ms; None: gone)
    since_batch: int
    since_ms: int | None
    #: False: it held it in every clocks file kept, so since that batch or an earlier one
    since_exact: bool

    @property
    def name(self) -> str:
        return f"{self.topic}[{self.partition}]"


@dataclass(frozen=True)
class IdlePartition:
    """A partition an idleness timeout released: it no longer holds the watermark."""

    topic: str
    partition: int
    #: since when it is idle (wall clock ms)
    since_ms: int


@dataclass(frozen=True)
class WatermarkStatus:
    """A stream-time app's watermark as of its last committed batch."""

    #: the batch whose clocks these are (the last committed one)
    batch_id: int
    #: the smallest stream time over the input partitions that are not idle (ms); None while one
    #: of them has shown no event
    watermark_ms: int | None
    #: the largest stream time over the input partitions (ms; None: none has shown an event)
    newest_ms: int | None
    #: how far the watermark lags the newest stream time: newest - watermark (ms; None: no watermark)
    lag_ms: int | None
    #: None: every input partition is idle
    holder: Holder | None
    idle: list[IdlePartition]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def holding(clocks: layout.ClocksFile) -> Partition | None:
    """Pure: the partition that holds the watermark in ``clocks``: among the partitions that are not
    idle, one that has shown no event yet, else the one with the smallest stream time (ties: the
    first by topic and partition); None when every partition is idle."""
    live = {tp: st for tp, st in clocks.partitions.items() if tp not in clocks.idle}
    waiting = sorted(tp for tp, st in live.items() if st is None)
    if waiting:
        return waiting[0]
    return min(live, key=lambda tp: (live[tp], tp)) if live else None


def watermark_status(checkpoint: Path) -> WatermarkStatus | None:
    """The watermark of the checkpoint's last committed batch, its lag behind the newest stream
    time, the partition that holds it and since when, and the idle partitions (None: no batch
    committed, or no stream time)."""
    batch = layout.last_committed_batch(checkpoint)
    found = layout.read_clocks(checkpoint, batch) if batch is not None else None
    clocks = layout.clocks_file(checkpoint, found.batch_id) if found is not None else None
    if clocks is None:
        return None
    times = [st for st in clocks.partitions.values() if st is not None]
    newest = max(times) if times else None
    wm = clocks.watermark
    return WatermarkStatus(
        batch_id=clocks.batch_id, watermark_ms=wm, newest_ms=newest,
        lag_ms=None if wm is None or newest is None else max(0, newest - wm),
        holder=_holder(checkpoint, clocks),
        idle=[IdlePartition(t, p, since) for (t, p), since in sorted(clocks.idle.items())])


def _holder(checkpoint: Path, clocks: layout.ClocksFile) -> Holder | None:
    """``holding(clocks)`` and the first batch of its run: walk back the clocks files while the same
    partition holds the watermark; a file not kept (or the bound) ends the walk with ``since_exact``
    False, batch 0 or another holder with it True."""
    tp = holding(clocks)
    if tp is None:
        return None
    since, exact = clocks.batch_id, False
    for _ in range(layout.CLOCKS_RETAINED):
        if since == 0:
            exact = True  # held since the app's first batch
            break
        before = layout.clocks_file(checkpoint, since - 1)
        if before is None:
            break
        if holding(before) != tp:
            exact = True
            break
        since -= 1
    return Holder(tp[0], tp[1], clocks.partitions[tp], since, layout.batch_timestamp(checkpoint, since), exact)


# -- text, for ``streamops status`` --------------------------------------------------------------------
def render(w: dict[str, Any]) -> list[str]:
    """``streamops status``'s lines of the watermark, from ``WatermarkStatus.to_dict``."""
    if w["watermark_ms"] is None:
        line = "watermark none yet"
    else:
        line = f"watermark {utc(w['watermark_ms'])} (lags newest stream time by {span(w['lag_ms'] or 0)})"
    h = w["holder"]
    if h is None:
        line += ", held by no partition (all idle)"
    else:
        when = f" ({utc(h['since_ms'])})" if h["since_ms"] is not None else ""
        line += (f", held by {h['topic']}[{h['partition']}]"
                 + (" (no event yet)" if h["stream_time_ms"] is None else "")
                 + f" since batch {h['since_batch']}" + ("" if h["since_exact"] else " or earlier") + when)
    lines = [f"  {line}"]
    if w["idle"]:
        lines.append("    idle: " + ", ".join(f"{i['topic']}[{i['partition']}] since {utc(i['since_ms'])}"
                                            for i in w["idle"]))
    return lines
