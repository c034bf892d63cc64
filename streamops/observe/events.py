"""What the output asset's watcher announces: the batches an app committed since the last
announcement, at most one announcement per ``AppSpec.events.batch_every_s``.

A batch is committed when its progress line exists: the driver writes it after the batch's
transaction (output, changelog, DLQ, batch marker) committed. The cursor is
``AppDir.batch_events`` (the last announced commit time), so a restarted triggerer goes on from the last batch it announced instead
of announcing the history again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from streamops.app.dir import AppDir
from streamops.settings import Settings


@dataclass(frozen=True)
class BatchesCommitted:
    """The payload of one asset event: the batches committed after ``after_ms``."""

    app: str
    first_batch: int
    last_batch: int
    batches: int
    input_records: int
    #: the previous announcement's last commit (epoch ms; None: the first one)
    after_ms: int | None
    #: when the last of them committed (epoch ms)
    committed_at_ms: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cursor(settings: Settings, app: str) -> int | None:
    """When the last batch announced committed (epoch ms); None before the first announcement."""
    appdir = AppDir.of(settings, app)
    got = appdir.read(appdir.batch_events)
    return None if got is None else int(got["at_ms"])


def start_cursor(settings: Settings, app: str) -> int | None:
    """Where a watcher starts: its cursor, else the app's last commit now (batches committed before
    anyone watched are not news)."""
    from streamops.observe.streams import last_point

    known = cursor(settings, app)
    if known is not None:
        return known
    last = last_point(settings, app)
    return None if last is None else last.at_ms


def committed_after(settings: Settings, app: str, after_ms: int | None) -> BatchesCommitted | None:
    """The batches committed after ``after_ms`` (from the newest progress), or None. By commit
    time, not batch id: a restore or reset rewinds the batch ids."""
    from streamops.observe.streams import point

    lines = [line for line in AppDir.of(settings, app).tail_progress() if "batch_id" in line]
    points = [p for p in map(point, lines) if after_ms is None or p.at_ms > after_ms]
    if not points:
        return None
    return BatchesCommitted(app=app, first_batch=points[0].batch_id, last_batch=points[-1].batch_id,
                            batches=len({p.batch_id for p in points}),
                            input_records=sum(p.input_rows for p in points), after_ms=after_ms,
                            committed_at_ms=max(p.at_ms for p in points))


def announced(settings: Settings, event: BatchesCommitted) -> None:
    """Move the cursor past ``event``'s batches."""
    appdir = AppDir.of(settings, event.app)
    appdir.write(appdir.batch_events, {"batch_id": event.last_batch, "at_ms": event.committed_at_ms})
