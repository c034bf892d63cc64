"""Watching apps from Airflow: alerts as a failed task, DLQ digests (``streamops.observe``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator

from streamops_airflow.operators.base import app_session


class WatchAppOperator(BaseOperator):
    """Watch ``app`` for ``watch_s`` seconds in the triggerer (no worker slot): the task fails
    with the alert when the app crash-loops, a verification fails, or its lag or DLQ rate passes
    the spec's ``alerts`` limits; each condition alerts once when it starts (``observe.alerts``)."""

    template_fields = ("app",)

    def __init__(self, *, app: str, watch_s: float = 3600.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.app, self.watch_s = app, watch_s

    def execute(self, context: Any) -> None:
        import time
        from datetime import UTC, datetime

        from streamops_airflow.triggers import AppWatchTrigger

        with app_session(self.app, "watch"):
            pass  # an app that is no longer in the spec fails here, not in the triggerer
        since = datetime.now(UTC).isoformat()
        self.defer(trigger=AppWatchTrigger(app=self.app, until=time.time() + self.watch_s, since_iso=since),
                   method_name="execute_complete", timeout=timedelta(seconds=self.watch_s + 600))

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        alerts = event.get("alerts") or []
        if alerts:
            raise AirflowException("; ".join(f"[{a['kind']}] {a['message']}" for a in alerts))
        self.log.info("%s: no alert in %.0f s", self.app, self.watch_s)
        return {"alerts": []}


class DlqSummaryOperator(BaseOperator):
    """Digest the DLQ records written since the last digest (``streamops.observe.dlq.digest_new``),
    per app: counts by reason, the partitions' offset ranges, the newest few. Run by
    ``streamops_dlq_summary`` when a DLQ asset's watcher sees a new record (the apps whose DLQ
    triggered the run); ``apps`` empty in a manual run: every app."""

    template_fields = ("apps",)

    def __init__(self, *, apps: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.apps = apps

    def execute(self, context: Any) -> list[dict[str, Any]]:
        from streamops.observe.dlq import digest_new

        events = context.get("triggering_asset_events") or {}
        triggered = []
        for asset in events:
            self.log.info("triggered by %s: %d new DLQ record(s) seen", asset.name, len(events[asset]))
            triggered.append(asset.name.removeprefix("streamops.").removesuffix(".dlq"))
        out = []
        for app in self._apps(triggered):
            with app_session(app, "dlq summary") as ctx:
                digest = digest_new(ctx.settings, ctx.spec, ctx.kafka)
            for part, (first, end) in sorted(digest.ranges.items()):
                self.log.info("%s[%s]: offsets %s..%s", digest.topic, part, first, end - 1)
            self.log.info("%s: %d new DLQ record(s)%s; by reason: %s", app, digest.records,
                          f" ({digest.skipped} older ones not read)" if digest.skipped else "",
                          ", ".join(f"{r} {n}" for r, n in digest.by_reason.items()) or "none")
            for r in digest.newest:
                self.log.info("  %s[%s]@%s %s: key=%s value=%s", digest.topic, r.partition, r.offset, r.reason,
                              r.key, r.value)
            out.append(digest.to_dict())
        return out

    def _apps(self, triggered: list[str]) -> list[str]:
        """The apps asked for, else those whose DLQ asset triggered the run, else every app."""
        from streamops.specfile import open_spec_file
        from streamops_airflow.hooks import StreamopsHook

        if self.apps not in (None, "", "None", []):
            return [self.apps] if isinstance(self.apps, str) else list(self.apps)
        if triggered:
            return sorted(set(triggered))
        settings = StreamopsHook().settings
        return sorted(open_spec_file(settings.repo, settings.state_dir).specs)
