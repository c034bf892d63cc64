"""``open_app``: one context per front end, its ledger closed after the block (a caller's kept
open), and the app's Kafka client configuration in it as a value (``ctx.kafka``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamops.app.context import AppContext, load_context, open_app
from streamops.exceptions import ConfigError, UsageError
from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger
from streamops.settings import Settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path)


def test_a_context_is_the_apps_and_closes_the_ledger_it_opened(settings: Settings, monkeypatch) -> None:
    closed = []
    monkeypatch.setattr(Ledger, "close", lambda self: closed.append(self))
    with open_app(settings, "user_activity") as ctx:
        assert isinstance(ctx, AppContext) and ctx.app == "user_activity" and ctx.settings is settings
        assert ctx.spec.output_topic == "user-profiles"
        assert isinstance(ctx.kafka, KafkaConfig) and not closed
        assert (ctx.kafka.app, ctx.kafka.bootstrap, ctx.kafka.properties) == ("user_activity",
                                                                             settings.kafka_bootstrap, {})
    assert closed == [ctx.ledger]


def test_the_contexts_kafka_configuration_is_the_apps_and_checked_at_once(settings: Settings, monkeypatch) -> None:
    from streamops.app import outputs

    real = outputs.load_live_spec

    def with_override(settings, app, ledger=None, last_good_ok=False):
        spec = real(settings, app, ledger, last_good_ok=last_good_ok)
        return spec.model_copy(update={"kafka": {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                                 "ssl.truststore.location": "/ca.pem"}})

    monkeypatch.setattr(outputs, "load_live_spec", with_override)
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        ctx = load_context(settings, "user_activity", ledger)
        assert ctx.kafka.overrides == ("security.protocol", "ssl.truststore.location", "ssl.truststore.type")
        assert ctx.kafka.librdkafka() == {"security.protocol": "ssl", "ssl.ca.location": "/ca.pem"}
        monkeypatch.setattr(outputs, "load_live_spec", lambda *a, **k: with_override(*a, **k).model_copy(
            update={"kafka": {"security.protocol": "TLS"}}))
        with pytest.raises(ConfigError, match=r"^apps\.user_activity\.kafka .*security\.protocol='TLS' is not one"), \
                open_app(settings, "user_activity", ledger=ledger):
            pass
    finally:
        ledger.close()


def test_a_callers_ledger_stays_open_and_an_unknown_app_names_the_known_ones(settings: Settings) -> None:
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        with open_app(settings, "user_activity", ledger=ledger) as ctx:
            assert ctx.ledger is ledger
        assert ledger.desired("user_activity") is None  # still usable
        with pytest.raises(UsageError, match="unknown app 'nope'.*user_activity"), \
                open_app(settings, "nope", ledger=ledger):
            pass
    finally:
        ledger.close()
