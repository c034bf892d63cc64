"""One app as every operation sees it, built once by a front end and handed down.

A front end (a CLI command, an Airflow task or trigger, the Streams view, the supervisor) knows
where its settings come from and how long it works on the app; everything below it takes an
``AppContext`` and reads neither the environment nor opens the ledger itself. So the CLI's
``streamops deploy`` and Airflow's deploy task run the same code from here down.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from streamops.app import outputs
from streamops.kafka import security
from streamops.ledger import Ledger
from streamops.settings import Settings
from streamops.spec import AppSpec

#: whose Kafka clients are the app's: every client of this ``process`` from now on (a CLI
#: command, a driver: clients made in any thread), or those made in the ``block`` (an Airflow task:
#: nothing after it in the same worker inherits the app's credentials)
KafkaScope = Literal["process", "block"]


@dataclass(frozen=True)
class AppContext:
    """The platform's settings, the app's live spec (the spec file's entry with what its last
    deploy pinned and the ledger's output version) and the open ledger."""

    settings: Settings
    spec: AppSpec
    ledger: Ledger

    @property
    def app(self) -> str:
        return self.spec.name


def load_context(settings: Settings, app: str, ledger: Ledger, *, last_good_ok: bool = False) -> AppContext:
    """``app``'s context on a ledger the caller holds, its Kafka clients left as they are (a
    trigger's poll, which runs in a thread of its own)."""
    return AppContext(settings, outputs.load_live_spec(settings, app, ledger, last_good_ok=last_good_ok), ledger)


@contextmanager
def open_app(settings: Settings, app: str, *, kafka: KafkaScope, last_good_ok: bool = False,
             ledger: Ledger | None = None) -> Iterator[AppContext]:
    """The context of ``app`` for the block; the ledger it opened is closed after it.

    ``last_good_ok``: on the last good spec file if the file does not load (``stop`` must work
    while it is broken). ``ledger``: one the caller already holds (kept open). An unknown app is a
    usage error naming the known ones; its merged Kafka configuration is checked at once
    (``ConfigError`` naming the property).
    """
    own = ledger is None
    ledger = Ledger.open(settings.ledger_db_url) if ledger is None else ledger
    try:
        ctx = load_context(settings, app, ledger, last_good_ok=last_good_ok)
        if kafka == "process":
            security.use_app(ctx.spec, settings)
            yield ctx
        else:
            with security.app_scope(ctx.spec, settings):
                yield ctx
    finally:
        if own:
            ledger.close()
