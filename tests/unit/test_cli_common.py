"""The helpers the subcommands share (streamops.cli.common): the app and ledger an operation runs on,
the ledger closed before the result is printed and on failure, report exit codes, argument types."""

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
    from streamops.app import context, outputs
    from streamops.kafka import security

    seen: list[str] = []
    monkeypatch.setenv("STREAMOPS_HOME", str(tmp_path))
    monkeypatch.setattr(outputs, "load_live_spec", lambda settings, app, ledger=None, last_good_ok=False: SimpleNamespace(
        name=app, last_good_ok=last_good_ok))
    def kafka_config(settings, spec=None):
        seen.append(f"kafka_config {spec.name}")
        return f"the kafka config of {spec.name}"

    monkeypatch.setattr(security, "kafka_config", kafka_config)
    monkeypatch.setattr(context, "kafka_config", kafka_config)
    monkeypatch.setattr(ledger_mod.Ledger, "open", classmethod(lambda cls, url: (seen.append("open"), _Ledger(seen))[1]))
    return seen


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"app": "shop", "json": False, "home": None, **kw})


def test_load_app_gives_the_apps_kafka_configuration(events: list[str]) -> None:
    settings, spec, kafka = common.load_app(_args(), last_good_ok=True)
    assert (spec.name, spec.last_good_ok, events) == ("shop", True, ["kafka_config shop"])
    assert kafka == "the kafka config of shop"
    assert settings.ledger_db_url


def test_app_ledger_closes_the_ledger_when_the_operation_fails(events: list[str]) -> None:
    with pytest.raises(StreamopsError, match="refused"), common.app_ledger(_args()) as (_s, spec, ledger):
        assert isinstance(ledger, _Ledger) and spec.name == "shop"
        raise StreamopsError("refused")
    assert events == ["open", "kafka_config shop", "closed"]


def test_run_operation_passes_progress_and_closes_the_ledger_before_returning(events, capsys) -> None:
    def operation(ctx, first, *, progress, flag):
        progress(f"working on {ctx.spec.name}")
        events.append(f"ran {first} {flag} on {type(ctx).__name__}")
        return {"ok": True}

    spec, out = common.run_operation(_args(json=True), operation, "one", flag=2)
    assert (spec.name, out) == ("shop", {"ok": True})
    assert events == ["open", "kafka_config shop", "ran one 2 on AppContext", "closed"]
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


@pytest.mark.parametrize(("low", "high", "text", "error"), [
    (1, None, "x", "not an integer: 'x'"), (1, None, "0", "must be at least 1, got 0"),
    (1, 200, "201", "must be within 1..200, got 201"), (1, 200, "0", "must be within 1..200, got 0"),
])
def test_int_within_refuses_with_the_bound_in_the_message(low: int, high: int | None, text: str, error: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=f"^{error}$"):
        common.int_within(low, high)(text)
    assert common.int_within(low, high)(str(low)) == low


def test_app_command_with_operation_flags_in_their_help_order() -> None:
    parser = argparse.ArgumentParser(prog="streamops")
    sub = parser.add_subparsers()
    p = common.app_command(sub, common.common_parser(), "op", lambda a: 0, help="h", description="d")
    common.add_operation_flags(p, stop_first=True, timeout=3600.0, waits="before the run is given up")
    args = parser.parse_args(["op", "shop", "--json"])
    assert (args.app, args.json, args.stop_first, args.dry_run, args.timeout) == ("shop", True, False, False, 3600.0)
    assert args.func(args) == 0
    text = p.format_help()
    assert text.index("--stop-first") < text.index("--dry-run") < text.index("--timeout")
    assert "seconds before the run is given up (default 3600)" in " ".join(text.split())
    assert common.APP_HELP in text
    p = common.app_command(sub, common.common_parser(), "plain", lambda a: 0, help="h", description="d")
    common.add_operation_flags(p, dry_run=None, timeout=None)
    assert "--dry-run" not in p.format_help() and "--timeout" not in p.format_help()
