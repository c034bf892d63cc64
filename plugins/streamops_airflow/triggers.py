"""Triggers: wait for an operation to converge in the triggerer, holding no worker slot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class LedgerConvergenceTrigger(BaseTrigger):
    """Poll ``streamops.lifecycle.operations.poll`` for a pending operation until it converges.

    The poll is blocking I/O (ledger, checkpoint files, the broker for lag), so it runs in a
    thread; the event says ``converged`` or ``failed`` and carries the pending operation back to
    the operator, which records the outcome in the ledger.
    """

    def __init__(self, pending: dict[str, Any], poll_interval: float = 2.0) -> None:
        super().__init__()
        self.pending = pending
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"pending": self.pending, "poll_interval": self.poll_interval})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from streamops.exceptions import StreamopsError
        from streamops.ledger import Ledger
        from streamops.ledger.outputs import load_live_spec
        from streamops.lifecycle.operations import Pending, poll
        from streamops.settings import Settings

        pending = Pending.from_dict(self.pending)
        settings = Settings.from_env()
        ledger = await asyncio.to_thread(Ledger.open, settings.ledger_db_url)
        try:
            spec = await asyncio.to_thread(load_live_spec, settings, pending.app, ledger)
            while True:
                try:
                    observed = await asyncio.to_thread(poll, settings, spec, ledger, pending)
                except StreamopsError as exc:
                    yield TriggerEvent({"status": "failed", "pending": pending.to_dict(), "error": str(exc)})
                    return
                if observed is not None:
                    self.log.info("%s #%s converged", pending.kind, pending.operation_id)
                    yield TriggerEvent({"status": "converged", "pending": pending.to_dict()})
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            ledger.close()
