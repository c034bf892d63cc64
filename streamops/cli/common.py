"""Helpers every subcommand shares: settings from flags/env, --json output, progress lines."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from streamops.settings import Settings


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings.from_env(home=getattr(args, "home", None))


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
    common.add_argument("--home", metavar="DIR", help="state dir (default $STREAMOPS_HOME or ./.streamops)")
    return common
