"""``open_app``: one context per front end, its ledger closed after the block (a caller's kept
open), and the app's Kafka clients for the process (a CLI command) or for the block (a task)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamops.app.context import AppContext, open_app
from streamops.exceptions import UsageError
from streamops.kafka import security
from streamops.ledger import Ledger
from streamops.settings import Settings


@pytest.fixture
def settings(tmp_path: Path, monkeypatch) -> Settings:
    monkeypatch.setattr(security, "_PROCESS_APP", None)
    return Settings(home=tmp_path)


def test_a_block_context_is_the_apps_and_closes_the_ledger_it_opened(settings: Settings, monkeypatch) -> None:
    closed = []
    monkeypatch.setattr(Ledger, "close", lambda self: closed.append(self))
    with open_app(settings, "user_activity", kafka="block") as ctx:
        assert isinstance(ctx, AppContext) and ctx.app == "user_activity" and ctx.settings is settings
        assert ctx.spec.output_topic == "user-profiles"
        assert security.current_app() == "user_activity" and not closed
    assert closed == [ctx.ledger]
    assert security.current_app() is None  # nothing after the block inherits the app's clients


def test_a_process_context_sets_the_apps_clients_for_the_process(settings: Settings) -> None:
    with open_app(settings, "user_activity", kafka="process"):
        pass
    assert security.current_app() == "user_activity"  # a CLI command's clients, in any thread


def test_a_callers_ledger_stays_open_and_an_unknown_app_names_the_known_ones(settings: Settings) -> None:
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        with open_app(settings, "user_activity", kafka="block", ledger=ledger) as ctx:
            assert ctx.ledger is ledger
        assert ledger.desired("user_activity") is None  # still usable
        with pytest.raises(UsageError, match="unknown app 'nope'.*user_activity"), \
                open_app(settings, "nope", kafka="block", ledger=ledger):
            pass
    finally:
        ledger.close()
