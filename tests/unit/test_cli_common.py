"""The helpers the subcommands share (streamops.cli.common): the app and ledger an operation runs on,
the ledger closed before the result is printed and on failure, report exit codes."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import pytest

from streamops.cli import common
from streamops.exceptions import StreamopsError


class _Ledger:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def close(self) -> None:
        self.events.append("closed")


@pytest.fixture
def events(monkeypatch, tmp_path) -> list[str]:
    """load_app and open_ledger on stubs: what they were called with, and when the ledger closed."""
    import streamops.ledger as ledger_mod
    from streamops.kafka import security
    from streamops.ledger import outputs

    seen: list[str] = []
    monkeypatch.setenv("STREAMOPS_HOME", str(tmp_path))
    monkeypatch.setattr(outputs, "load_live_spec", lambda settings, app, last_good_ok=False: SimpleNamespace(
        name=app, last_good_ok=last_good_ok))
    monkeypatch.setattr(security, "use_app", lambda spec, settings: seen.append(f"use_app {spec.name}"))
    monkeypatch.setattr(ledger_mod.Ledger, "open", classmethod(lambda cls, url: (seen.append("open"), _Ledger(seen))[1]))
    return seen


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"app": "shop", "json": False, "home": None, **kw})


def test_load_app_makes_the_commands_kafka_clients_the_apps(events: list[str]) -> None:
    settings, spec = common.load_app(_args(), last_good_ok=True)
    assert (spec.name, spec.last_good_ok, events) == ("shop", True, ["use_app shop"])
    assert settings.ledger_db_url


def test_app_ledger_closes_the_ledger_when_the_operation_fails(events: list[str]) -> None:
    with pytest.raises(StreamopsError, match="refused"), common.app_ledger(_args()) as (_s, spec, ledger):
        assert isinstance(ledger, _Ledger) and spec.name == "shop"
        raise StreamopsError("refused")
    assert events == ["use_app shop", "open", "closed"]


def test_run_operation_passes_progress_and_closes_the_ledger_before_returning(events, capsys) -> None:
    def operation(settings, spec, ledger, first, *, progress, flag):
        progress(f"working on {spec.name}")
        events.append(f"ran {first} {flag}")
        return {"ok": True}

    spec, out = common.run_operation(_args(json=True), operation, "one", flag=2)
    assert (spec.name, out) == ("shop", {"ok": True})
    assert events == ["use_app shop", "open", "ran one 2", "closed"]
    assert capsys.readouterr().err == "working on shop\n"  # under --json progress goes to stderr


@pytest.mark.parametrize(("ok", "code"), [(True, 0), (False, 1)])
def test_emit_report_exits_1_on_any_difference(ok: bool, code: int, capsys) -> None:
    report = SimpleNamespace(ok=ok, to_dict=lambda: {"ok": ok})
    assert common.emit_report(argparse.Namespace(json=True), report, "text") == code
    assert json.loads(capsys.readouterr().out) == {"ok": ok}
    assert common.emit_report(argparse.Namespace(json=False), report, "text") == code
    assert capsys.readouterr().out == "text\n"


@pytest.mark.parametrize(("n", "text"), [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (5 * 2**20, "5.0 MiB"),
                                          (3 * 2**40, "3072.0 GiB")])
def test_human_bytes(n: int, text: str) -> None:
    assert common.human_bytes(n) == text

