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

from streamops.app import outputs
from streamops.kafka.config import KafkaConfig
from streamops.kafka.security import kafka_config
from streamops.ledger import Ledger
from streamops.settings import Settings
from streamops.spec import AppSpec


@dataclass(frozen=True)
class AppContext:
    """The platform's settings, the app's live spec (the spec file's entry with what its last
    deploy pinned and the ledger's output version), the open ledger, and the Kafka client
    configuration every client of the app is made with (its spec's ``kafka`` overrides merged
    over the platform's defaults)."""

    settings: Settings
    spec: AppSpec
    ledger: Ledger
    kafka: KafkaConfig

    @property
    def app(self) -> str:
        return self.spec.name


def load_context(settings: Settings, app: str, ledger: Ledger, *, last_good_ok: bool = False) -> AppContext:
    """``app``'s context on a ledger the caller holds (a trigger's poll). Its merged Kafka
    configuration is checked and resolved now (``ConfigError`` naming the property)."""
    spec = outputs.load_live_spec(settings, app, ledger, last_good_ok=last_good_ok)
    return AppContext(settings, spec, ledger, kafka_config(settings, spec))


@contextmanager
def open_app(settings: Settings, app: str, *, last_good_ok: bool = False,
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
        yield load_context(settings, app, ledger, last_good_ok=last_good_ok)
    finally:
        if own:
            ledger.close()
