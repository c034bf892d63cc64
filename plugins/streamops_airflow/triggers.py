"""Triggers: wait for an operation to converge, watch an app, announce its batches: in the
triggerer, holding no worker slot."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

#: seconds a trigger waits at least before it fires (see LedgerConvergenceTrigger)
MIN_DWELL_S = 15.0


def _classpath(trigger: BaseTrigger) -> str:
    """Where the triggerer imports the trigger from (each trigger's ``serialize``)."""
    return f"{type(trigger).__module__}.{type(trigger).__qualname__}"


class _Serialized:
    """A trigger whose ``serialize`` is its constructor's arguments, plain values named in ``FIELDS``
    (the triggerer rebuilds it from them)."""

    FIELDS: tuple[str, ...] = ()

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return _classpath(self), {name: getattr(self, name) for name in self.FIELDS}


class _PendingTrigger(_Serialized, BaseTrigger):
    """Waits for an operation handed over by a task (``pending``: its ``Pending`` as a dict)."""

    FIELDS = ("pending", "poll_interval", "min_dwell_s")
    POLL_S = 2.0

    def __init__(self, pending: dict[str, Any], poll_interval: float | None = None,
                 min_dwell_s: float = MIN_DWELL_S) -> None:
        super().__init__()
        self.pending = pending
        self.poll_interval = self.POLL_S if poll_interval is None else poll_interval
        self.min_dwell_s = min_dwell_s


async def _dwell(started: float, min_dwell_s: float) -> None:
    """Fire no sooner than ``min_dwell_s`` after ``started`` (see LedgerConvergenceTrigger)."""
    if (left := min_dwell_s - (time.monotonic() - started)) > 0:
        await asyncio.sleep(left)


class LedgerConvergenceTrigger(_PendingTrigger):
    """Poll ``streamops.lifecycle.operations.poll`` for a pending operation until it converges.

    The poll is blocking I/O (ledger, checkpoint files, the broker for lag), so it runs in a
    thread; the event says ``converged`` or ``failed`` and carries the pending operation back to
    the operator, which records the outcome in the ledger.

    It fires no sooner than ``min_dwell_s`` after it started. Airflow 3.3 fails a deferred task
    whose trigger fires before the scheduler has drained the executor's "success" of the deferring
    attempt (apache/airflow#72716, #71580: "finished with state success, but the task instance's
    state is running"); on 2 busy cores that event came 5.5 s after the deferral, and a stop
    converged in 3 s.
    """


    async def run(self) -> AsyncIterator[TriggerEvent]:
        from streamops.exceptions import StreamopsError
        from streamops.lifecycle.operations import Pending, poll
        from streamops_airflow.hooks import StreamopsHook

        started = time.monotonic()
        pending = Pending.from_dict(self.pending)
        hook = StreamopsHook()
        ledger = await asyncio.to_thread(hook.get_conn)
        try:
            ctx = await asyncio.to_thread(hook.load_context, pending.app, ledger)
            while True:
                try:
                    observed = await asyncio.to_thread(poll, ctx, pending)
                except StreamopsError as exc:
                    await _dwell(started, self.min_dwell_s)
                    yield TriggerEvent({"status": "failed", "pending": pending.to_dict(), "error": str(exc)})
                    return
                if observed is not None:
                    self.log.info("%s #%s converged", pending.kind, pending.operation_id)
                    await _dwell(started, self.min_dwell_s)
                    yield TriggerEvent({"status": "converged", "pending": pending.to_dict()})
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            ledger.close()

class ReprocessRunTrigger(_PendingTrigger):
    """Wait for a handed-over reprocess run's driver to end (``streamops.reset.reprocess.watch_run``),
    logging the records it has committed; ``failed`` past the run's deadline."""

    POLL_S = 5.0

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from streamops.reset.reprocess import watch_run

        started, shown = time.monotonic(), -1
        total = self.pending["plan"]["records"]
        while True:
            alive, done = await asyncio.to_thread(watch_run, self.pending)
            if done != shown:
                shown = done
                self.log.info("%s: %s/%s records (%.0f%%)", self.pending["app"], done, total,
                              100 * done / total if total else 100)
            if not alive or time.time() > self.pending["deadline"]:
                await _dwell(started, self.min_dwell_s)
                yield TriggerEvent({"status": "converged", "pending": self.pending} if not alive else
                                   {"status": "failed", "pending": self.pending,
                                    "error": f"did not finish by its deadline ({done}/{total} records)"})
                return
            await asyncio.sleep(self.poll_interval)

class AppWatchTrigger(_Serialized, BaseTrigger):
    """Watch one app in the triggerer (``streamops.observe.alerts``) until ``until`` (epoch s):
    fire with the new alerts as soon as there are any, or with none at the end of the watch."""

    FIELDS = ("app", "until", "since_iso", "min_dwell_s")

    def __init__(self, app: str, until: float, since_iso: str, min_dwell_s: float = MIN_DWELL_S) -> None:
        super().__init__()
        self.app, self.until, self.since_iso, self.min_dwell_s = app, until, since_iso, min_dwell_s

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from datetime import UTC, datetime

        from streamops.app.dir import AppDir
        from streamops.app.outputs import load_live_spec
        from streamops.observe.alerts import check, new_alerts
        from streamops_airflow.hooks import StreamopsHook

        started = time.monotonic()
        since = datetime.fromisoformat(self.since_iso)
        hook = StreamopsHook()
        settings = hook.settings
        ledger = await asyncio.to_thread(hook.get_conn)
        state = AppDir.of(settings, self.app).alerts
        try:
            while True:
                spec = await asyncio.to_thread(load_live_spec, settings, self.app, ledger)
                found = await asyncio.to_thread(check, settings, spec, ledger, since=since)
                fresh = await asyncio.to_thread(new_alerts, state, found, datetime.now(UTC))
                if fresh or time.time() >= self.until:
                    await _dwell(started, self.min_dwell_s)
                    yield TriggerEvent({"alerts": [a.to_dict() for a in fresh]})
                    return
                await asyncio.sleep(spec.alerts.check_every_s)
        finally:
            ledger.close()

class BatchCommitTrigger(_Serialized, BaseEventTrigger):
    """The output asset's watcher (``streamops_airflow.assets.output_asset``): fires with the
    batches ``app`` committed since the last event (``streamops.observe.events``), at most once per
    the spec's ``events.batch_every_s``. It runs as long as a DAG is scheduled on the asset.

    A failure to read (a spec that does not load, a file being replaced) is logged and retried: a
    watcher that died would silently stop the downstream DAGs."""

    FIELDS = ("app", "poll_interval")

    def __init__(self, app: str, poll_interval: float = 2.0) -> None:
        super().__init__()
        self.app, self.poll_interval = app, poll_interval

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from streamops.observe import events
        from streamops.specfile import open_spec_file
        from streamops_airflow.hooks import StreamopsHook

        settings = StreamopsHook().settings
        spec_file = await asyncio.to_thread(open_spec_file, settings.repo, settings.state_dir)
        after = await asyncio.to_thread(events.start_cursor, settings, self.app)
        last_event = 0.0
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                await asyncio.to_thread(spec_file.refresh)
                spec = spec_file.specs.get(self.app)
                every = spec.events.batch_every_s if spec is not None else 60.0
                if time.monotonic() - last_event < every:
                    continue
                found = await asyncio.to_thread(events.committed_after, settings, self.app, after)
            except Exception as exc:  # noqa: BLE001 - keep watching (see the class docstring)
                self.log.warning("%s: could not read its batches (%s); retrying", self.app, exc)
                continue
            if found is None:
                continue
            self.log.info("%s: batches %s-%s committed (%s records)", self.app, found.first_batch, found.last_batch,
                          found.input_records)
            yield TriggerEvent(found.to_dict())
            await asyncio.to_thread(events.announced, settings, found)
            after, last_event = found.committed_at_ms, time.monotonic()


class DlqRecordsTrigger(_Serialized, BaseEventTrigger):
    """The DLQ asset's watcher (``streamops_airflow.assets.dlq_asset``): fires when the app's DLQ
    topic holds records no digest has counted (``streamops.observe.dlq.new_records``) beyond those
    it fired for, at most once per ``every_s`` (records meanwhile are in the next event).

    It compares the topic's end offsets with the digest's cursor (one metadata request per poll,
    no consumer group). A topic that does not exist yet (an app never deployed) is no news."""

    FIELDS = ("app", "poll_interval", "every_s")

    def __init__(self, app: str, poll_interval: float = 2.0, every_s: float = 10.0) -> None:
        super().__init__()
        self.app, self.poll_interval, self.every_s = app, poll_interval, every_s

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from streamops.observe.dlq import new_records
        from streamops.specfile import open_spec_file
        from streamops_airflow.hooks import StreamopsHook

        settings = StreamopsHook().settings
        spec_file = await asyncio.to_thread(open_spec_file, settings.repo, settings.state_dir)
        fired: dict[int, int] = {}  # partition -> end offset an event was fired for
        last_event = 0.0
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                await asyncio.to_thread(spec_file.refresh)  # re-read only when the file changed
                news = await asyncio.to_thread(new_records, settings, spec_file.specs.get(self.app))
            except Exception as exc:  # noqa: BLE001 - keep watching (a broker restarting)
                self.log.warning("%s: could not read its DLQ's offsets (%s); retrying", self.app, exc)
                continue
            if news is None:
                fired.clear()  # counted: the next records are news again
                continue
            beyond = any(int(end) > fired.get(int(p), -1) for p, end in news.ends.items())
            if not beyond or time.monotonic() - last_event < self.every_s:
                continue
            self.log.info("%s: %s new DLQ record(s) in %s", self.app, news.records, news.topic)
            yield TriggerEvent(news.to_dict())
            fired = {int(p): int(e) for p, e in news.ends.items()}
            last_event = time.monotonic()
