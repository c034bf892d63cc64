"""Helpers every subcommand shares: settings from flags/env, the app and the ledger an operation
works on, --json output, progress lines, and the arguments several commands spell alike."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from streamops.exceptions import StreamopsError, UsageError
from streamops.results import plain
from streamops.settings import Settings

if TYPE_CHECKING:
    from streamops.app.context import AppContext
    from streamops.kafka.config import KafkaConfig
    from streamops.ledger import Ledger
    from streamops.spec import AppSpec

#: the help of the APP argument of every command on one app
APP_HELP = "app name from include/streams.yaml"


class CouldNotRun(StreamopsError):
    """A comparing command (``check``, ``verify``) could not compare at all.

    Exit 2, as ``diff`` does when in trouble, so that 1 always means "differences found".
    Operator action: the message says what was missing (a service, a committed batch, a topic).
    """

    exit_code = 2


@contextmanager
def comparing() -> Iterator[None]:
    """Any failure inside is "could not run" (exit 2), never "differences found" (exit 1)."""
    try:
        yield
    except UsageError:
        raise
    except StreamopsError as exc:
        raise CouldNotRun(f"could not run: {exc}") from exc
    except Exception as exc:  # a broker or Spark error: still "could not run"
        raise CouldNotRun(f"could not run: {type(exc).__name__}: {str(exc).splitlines()[0][:500] if str(exc) else ''}") from exc


def error_payload(exc: StreamopsError) -> dict[str, Any]:
    """What ``--json`` prints on stdout for a refused or failed command."""
    return {"error": str(exc), "kind": type(exc).__name__, "exit_code": exc.exit_code}


def settings_from(args: argparse.Namespace) -> Settings:
    # --kafka-security (platform up) overrides the setting
    return Settings.from_env(home=getattr(args, "home", None), kafka_security=getattr(args, "kafka_security", None))


def load_app(args: argparse.Namespace, *, last_good_ok: bool = False) -> tuple[Settings, AppSpec, KafkaConfig]:
    """(settings, spec, the app's Kafka client configuration) for ``args.app``, without the ledger;
    unknown app -> usage error listing the known ones; a bad Kafka configuration -> ``ConfigError``
    naming the property. ``last_good_ok``: on the last good spec file if the file does not load."""
    from streamops.app.outputs import load_live_spec
    from streamops.kafka.security import kafka_config

    settings = settings_from(args)
    spec = load_live_spec(settings, args.app, last_good_ok=last_good_ok)
    return settings, spec, kafka_config(settings, spec)


def open_ledger(settings: Settings) -> Ledger:
    """The ledger of ``settings``, imported here so that commands without one start faster."""
    from streamops.ledger import Ledger

    return Ledger.open(settings.ledger_db_url)


@contextmanager
def app_context(args: argparse.Namespace, *, last_good_ok: bool = False) -> Iterator[AppContext]:
    """The one context a command on ``args.app`` works with (``streamops.app.context``; its Kafka
    clients are made with ``ctx.kafka``); the ledger is closed on the way out whatever happens (the
    output is printed after, from what the operation returned)."""
    from streamops.app.context import open_app

    with open_app(settings_from(args), args.app, last_good_ok=last_good_ok) as ctx:
        yield ctx


@contextmanager
def app_ledger(args: argparse.Namespace, *, last_good_ok: bool = False) -> Iterator[tuple[Settings, AppSpec, Ledger]]:
    """``app_context`` as the (settings, spec, ledger) the operations not yet on ``AppContext`` take."""
    with app_context(args, last_good_ok=last_good_ok) as ctx:
        yield ctx.settings, ctx.spec, ctx.ledger


def run_operation(args: argparse.Namespace, operation: Callable[..., Any], *params: Any, last_good_ok: bool = False,
                  **options: Any) -> tuple[AppSpec, Any]:
    """(spec, result) of ``operation(ctx, *params, progress=..., **options)`` on ``args.app``: the
    calling convention of the audited operations, whose progress lines go where ``progress_printer``
    sends them; the ledger is closed before the caller prints the result."""
    with app_context(args, last_good_ok=last_good_ok) as ctx:
        return ctx.spec, operation(ctx, *params, progress=progress_printer(args), **options)


def emit(args: argparse.Namespace, payload: Any, text: str) -> None:
    """Print JSON (with --json: a ``Result`` as its ``to_dict``) or the human text, on stdout."""
    if getattr(args, "json", False):
        print(json.dumps(plain(payload), indent=2, default=str))
    else:
        print(text)


def emit_report(args: argparse.Namespace, report: Any, text: str) -> int:
    """Print a checking command's report (``report.to_dict()`` with --json, else ``text``) and give
    its exit code: 0 when everything holds, 1 on any difference, so scripts can branch on it."""
    emit(args, report.to_dict(), text)
    return 0 if report.ok else 1


def human_bytes(n: float) -> str:
    """A size as operators read it in a table (``12 B``, ``3.4 MiB``)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def progress_printer(args: argparse.Namespace) -> Callable[[str], None]:
    """Progress goes to stderr under --json so stdout stays one JSON document."""
    stream = sys.stderr if getattr(args, "json", False) else sys.stdout
    return lambda msg: print(msg, file=stream, flush=True)


def common_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    common.add_argument("--home", metavar="DIR", help="state dir (default $STREAMOPS_HOME, else .streamops in the checkout)")
    return common


def int_within(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` (to ``high``); argparse makes a refusal a usage error (exit 2)."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if high is None and n < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {n}")
        if high is not None and not low <= n <= high:
            raise argparse.ArgumentTypeError(f"must be within {low}..{high}, got {n}")
        return n

    return parse


def app_command(sub: argparse._SubParsersAction, common: argparse.ArgumentParser, name: str,
                func: Callable[[argparse.Namespace], int], *, help: str, description: str) -> argparse.ArgumentParser:
    """A subcommand on one app: the common flags, then APP, then what the caller adds."""
    p = sub.add_parser(name, parents=[common], help=help, description=description)
    p.add_argument("app", help=APP_HELP)
    p.set_defaults(func=func)
    return p


def add_operation_flags(p: argparse.ArgumentParser, *, stop_first: bool = False,
                        dry_run: str | None = "print the plan, change nothing", timeout: float | None = 300.0,
                        waits: str = "to wait for stop/start") -> None:
    """--stop-first, --dry-run and --timeout, in this order (their order in --help), as the audited
    operations all spell them; ``None`` leaves one out, ``waits`` says what the timeout bounds."""
    if stop_first:
        p.add_argument("--stop-first", action="store_true", help="stop a running app first and start it after")
    if dry_run is not None:
        p.add_argument("--dry-run", action="store_true", help=dry_run)
    if timeout is not None:
        p.add_argument("--timeout", type=float, default=timeout, help=f"seconds {waits} (default {timeout:g})")
