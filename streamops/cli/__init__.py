"""``streamops`` command line: one subcommand per operation, ``--json`` everywhere.

Exit codes: 0 ok, 1 operation failed, 2 usage error (unknown command/option, invalid value);
``check`` and ``verify``: 1 differences found, 2 could not compare. With ``--json`` an error is
also printed on stdout as ``{"error", "kind", "exit_code"}``. 141 (128 + SIGPIPE), with no
traceback: the reader of stdout closed the pipe (``streamops status | head``).
Each command module exposes ``register(subparsers, common)``; add new ones to ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
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
    try:
        try:
            code = _main(argv)
        except SystemExit:  # argparse's --help, --version and usage errors: their text is buffered too
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except BrokenPipeError:
        # The reader went away (`streamops status | head`): stop quietly, like any Unix tool. Point
        # stdout at /dev/null so the interpreter's final flush of what is still buffered cannot
        # raise again ("Exception ignored ... BrokenPipeError"). Exit 141 = 128 + SIGPIPE, the
        # status of `cat`/`grep` killed by SIGPIPE: without `set -o pipefail` a shell ignores it,
        # with pipefail a script learns that not all of the output was read (0 would hide that).
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is no real file (captured in tests): nothing to redirect
            pass
        return 141


def _main(argv: Sequence[str] | None) -> int:
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
