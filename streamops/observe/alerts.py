"""Alerts an operator can hang on: an app's row (``observe.status``) judged against its spec's
``alerts`` policy. Pure (``alerts_for``), so the watch DAG's trigger, the tests and anything else
decide the same way. A crash loop and a verification that failed after the watch began always
alert; the lag and the DLQ rate alert above the spec's thresholds."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from streamops.spec import AlertPolicy


@dataclass(frozen=True)
class Alert:
    kind: str  # crash_loop | verify_failed | lag | dlq_rate
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def alerts_for(app: str, row: Any, policy: AlertPolicy, *, dlq_per_minute: dict[str, float],
               since: datetime) -> list[Alert]:
    """``row``: a ``StreamRow``; ``since``: verifications before it were seen already."""
    out: list[Alert] = []
    if row.crash_loop:
        out.append(Alert("crash_loop", f"{app}: the supervisor gave up after repeated crashes "
                                       f"({(row.error or 'no error recorded')[:300]}); `streamops deploy {app}` retries"))
    verify = row.last_verify
    if verify and verify["outcome"] == "failed" and verify["at"] is not None and verify["at"] >= since:
        out.append(Alert("verify_failed", f"{app}: verification #{verify['id']} failed: "
                                          f"{(verify.get('error') or '')[:300]}"))
    limit = policy.max_lag_seconds
    if limit is not None and row.health == "healthy" and row.lag_seconds is not None and row.lag_seconds > limit:
        out.append(Alert("lag", f"{app}: {row.lag_records:,} records behind, {row.lag_seconds:.0f} s at "
                                f"{row.processing_rate or 0:.0f} records/s (limit {limit:.0f} s)"))
    if policy.max_dlq_per_minute is not None:
        rate = sum(dlq_per_minute.values())
        if rate > policy.max_dlq_per_minute:
            reasons = ", ".join(f"{k} {v:g}/min" for k, v in sorted(dlq_per_minute.items(), key=lambda kv: -kv[1]))
            out.append(Alert("dlq_rate", f"{app}: {rate:g} DLQ records per minute over 5 minutes ({reasons}; "
                                         f"limit {policy.max_dlq_per_minute:g})"))
    return out


def check(settings: Any, spec: Any, ledger: Any, *, since: datetime) -> list[Alert]:
    """The app's alerts now (reads its row and its last 5 minutes of batches)."""
    import time

    from streamops.observe.status import stream_row
    from streamops.observe.streams import dlq_per_minute, recent

    now_ms = int(time.time() * 1000)
    row = stream_row(settings, spec, ledger)
    rates = dlq_per_minute(recent(settings, spec.name, since_ms=now_ms - 300_000), now_ms=now_ms)
    return alerts_for(spec.name, row, spec.alerts, dlq_per_minute=rates, since=since)


def new_alerts(state_file: Any, alerts: list[Alert], now: datetime) -> list[Alert]:
    """The alerts not raised before: a condition alerts once when it starts, and again only after
    it cleared (as Alertmanager groups a firing alert). ``state_file`` (a JSON file, the app
    directory's ``alerts``) keeps what is firing; a failed verification is one alert per run."""
    from streamops.host.files import read_json, write_json

    def key(a: Alert) -> str:
        return f"{a.kind}:{a.message.split('#', 1)[1].split(' ', 1)[0]}" if a.kind == "verify_failed" else a.kind

    firing = read_json(state_file)
    firing = firing if isinstance(firing, dict) else {}
    fresh = [a for a in alerts if key(a) not in firing]
    now_firing = {key(a): firing.get(key(a), now.isoformat()) for a in alerts}
    # a verification's alert stays remembered (it is about one run, which does not clear)
    now_firing.update({k: v for k, v in firing.items() if k.startswith("verify_failed:")})
    if now_firing != firing:
        write_json(state_file, now_firing)
    return fresh
