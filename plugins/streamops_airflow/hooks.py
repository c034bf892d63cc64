"""The one way a task, a trigger or the Streams view reaches the platform (the providers' hook
split: operators and triggers build the hook, never the core's objects).

The platform's settings come from the ``STREAMOPS_*`` environment the Airflow components run in
(docs/configuration.md), not from an Airflow connection: every component of one deployment shares
them, and the supervisor and the drivers read the same variables.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

if TYPE_CHECKING:
    from streamops.app.context import AppContext
    from streamops.ledger import Ledger
    from streamops.settings import Settings


class StreamopsHook(BaseHook):
    """Builds the ``AppContext`` an operation on one app runs with (``streamops.app.context``)."""

    hook_name = "streamops"

    def __init__(self, settings: Settings | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._settings = settings

    @property
    def settings(self) -> Settings:
        """The platform's settings (read once per hook)."""
        from streamops.settings import Settings

        if self._settings is None:
            self._settings = Settings.from_env()
        return self._settings

    def get_conn(self) -> Ledger:
        """The operations ledger (the caller closes it)."""
        from streamops.ledger import Ledger

        return Ledger.open(self.settings.ledger_db_url)

    @contextmanager
    def app_context(self, app: str, *, ledger: Ledger | None = None) -> Iterator[AppContext]:
        """``app``'s context for the block; its Kafka clients are made with ``ctx.kafka`` (the app's
        configuration, a value: nothing else in the same worker can pick up the app's credentials)."""
        from streamops.app.context import open_app

        with open_app(self.settings, app, ledger=ledger) as ctx:
            yield ctx

    def load_context(self, app: str, ledger: Ledger) -> AppContext:
        """``app``'s context on a ledger the caller holds (a trigger: its polls run in threads)."""
        from streamops.app.context import load_context

        return load_context(self.settings, app, ledger)

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's connection test: the broker and the Spark master answer."""
        from streamops.platform.health import probe

        down = probe(self.settings).unhealthy()
        return (not down, "healthy" if not down else f"not healthy: {', '.join(down)}")
