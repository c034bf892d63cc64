"""An app's dead-letter topic at a glance: the newest records per partition, counted by reason
per minute, and the newest few shown with their headers decoded and their values cut short."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from streamops.settings import Settings
from streamops.spec import AppSpec

#: what a shown key or value keeps (the source coordinates in its headers find the whole record)
SHOWN_BYTES = 300


@dataclass(frozen=True)
class DlqRecord:
    partition: int
    offset: int
    timestamp_ms: int | None
    reason: str | None
    headers: dict[str, str]
    key: str | None
    value: str | None
    value_bytes: int


@dataclass(frozen=True)
class DlqSummary:
    topic: str
    read: int  # records looked at (the newest ``last`` per partition)
    by_reason: dict[str, int] = field(default_factory=dict)
    #: minute (epoch ms) -> reason -> records
    per_minute: dict[int, dict[str, int]] = field(default_factory=dict)
    newest: list[DlqRecord] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _text(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    cut = raw[:SHOWN_BYTES].decode("utf-8", "backslashreplace")
    return cut + ("…" if len(raw) > SHOWN_BYTES else "")


def dlq_summary(settings: Settings, spec: AppSpec, *, last: int = 500, shown: int = 20) -> DlqSummary:
    """Reads at most ``last`` records per partition of the app's DLQ topic; a broker that does
    not answer gives ``error`` (the page shows the rest)."""
    from streamops.kafka.read import read_topic
    from streamops.kafka.security import app_scope
    from streamops.spark.job_query import H_REASON

    records: list[DlqRecord] = []
    try:
        with app_scope(spec, settings):
            for m in read_topic(settings.kafka_bootstrap, spec.dlq_topic, last=last, stall_timeout=10):
                headers = {k: (v or b"").decode("utf-8", "backslashreplace") for k, v in (m.headers() or [])}
                ts_type, ts = m.timestamp()
                value = m.value()
                records.append(DlqRecord(m.partition(), m.offset(), ts if ts_type else None, headers.get(H_REASON),
                                         headers, _text(m.key()), _text(value), len(value or b"")))
    except Exception as exc:  # noqa: BLE001 - a page must still show the rest
        return DlqSummary(spec.dlq_topic, 0, error=str(exc).splitlines()[0][:300])
    by_reason = Counter(r.reason or "?" for r in records)
    per_minute: dict[int, Counter] = {}
    for r in records:
        if r.timestamp_ms is not None:
            per_minute.setdefault(r.timestamp_ms // 60_000 * 60_000, Counter())[r.reason or "?"] += 1
    newest = sorted(records, key=lambda r: (r.timestamp_ms or 0, r.offset), reverse=True)[:shown]
    return DlqSummary(spec.dlq_topic, len(records), dict(by_reason.most_common()),
                      {k: dict(v) for k, v in sorted(per_minute.items())}, newest)
