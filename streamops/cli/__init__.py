"""``streamops`` command line: one subcommand per operation, ``--json`` everywhere.

Exit codes: 0 ok, 1 operation failed, 2 usage error (unknown command/option, invalid value);
``check`` and ``verify``: 1 differences found, 2 could not compare. With ``--json`` an error is
also printed on stdout as ``{"error", "kind", "exit_code"}``.
Each command module exposes ``register(subparsers, common)``; add new ones to ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence

from streamops import __version__
from streamops.cli.common import common_parser, emit, error_payload
from streamops.exceptions import StreamopsError

#: modules under streamops.cli that register subcommands, in help order
COMMANDS = ["platform", "produce", "check", "verify", "status", "apps", "jobs", "savepoints", "maintenance", "reset",
            "supervise"]


def cmd_version(args: argparse.Namespace) -> int:
    emit(args, {"version": __version__}, f"streamops {__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    common = common_parser()
    parser = argparse.ArgumentParser(
        prog="streamops",
        description="Operate PySpark Structured Streaming apps over Kafka, Kafka-Streams style.",
    )
    parser.add_argument("--version", action="version", version=f"streamops {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"streamops.cli.{name}").register(sub, common)
    p = sub.add_parser("version", parents=[common], help="print the version")
    p.set_defaults(func=cmd_version)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except StreamopsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if getattr(args, "json", False):  # stdout stays one JSON document, errors included
            print(json.dumps(error_payload(exc), indent=2, default=str))
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
