"""Helpers every subcommand shares: settings from flags/env, --json output, progress lines."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from streamops.exceptions import StreamopsError, UsageError
from streamops.settings import Settings


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
    from streamops.kafka.security import register

    # --kafka-security (platform up) overrides the setting; this process's Kafka clients use them
    return register(Settings.from_env(home=getattr(args, "home", None),
                                      kafka_security=getattr(args, "kafka_security", None)))


def emit(args: argparse.Namespace, payload: Any, text: str) -> None:
    """Print JSON (with --json) or the human text, on stdout."""
    if getattr(args, "json", False):
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(text)


def progress_printer(args: argparse.Namespace) -> Callable[[str], None]:
    """Progress goes to stderr under --json so stdout stays one JSON document."""
    stream = sys.stderr if getattr(args, "json", False) else sys.stdout
    return lambda msg: print(msg, file=stream, flush=True)


def common_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    common.add_argument("--home", metavar="DIR", help="state dir (default $STREAMOPS_HOME, else .streamops in the checkout)")
    return common
