"""``streamops check APP``: compare the app's state, changelog, output and DLQ with the truth."""

from __future__ import annotations

import argparse

from streamops.cli.common import emit, progress_printer, settings_from


def load_app(args: argparse.Namespace):
    """(settings, spec) for ``args.app``; unknown app -> usage error listing the known ones."""
    from streamops.spec import default_spec_path, get_app, load_specs

    settings = settings_from(args)
    return settings, get_app(load_specs(default_spec_path(settings.repo)), args.app)


def cmd_check(args: argparse.Namespace) -> int:
    from streamops.state.check import render, run_check

    settings, spec = load_app(args)
    report = run_check(spec, settings, progress=progress_printer(args))
    emit(args, report.to_dict(), render(report))
    return 0 if report.ok else 1


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "check", parents=[common],
        help="truth oracle: fold the input in plain Python, compare state/changelog/output/DLQ",
        description="Exit 0 when state store, changelog, output and DLQ all equal the plain-Python "
                    "fold of the input up to the last committed batch; exit 1 on any difference.",
    )
    p.add_argument("app", help="app name from include/streams.yaml")
    p.set_defaults(func=cmd_check)
