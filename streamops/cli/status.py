"""``streamops status [APP]``: desired vs observed, lag, last batch, last operations."""

from __future__ import annotations

import argparse

from streamops.cli.common import emit, open_ledger, settings_from


def cmd_status(args: argparse.Namespace) -> int:
    from streamops.exceptions import ConfigError
    from streamops.observe.status import app_status, render
    from streamops.spec import get_app
    from streamops.specfile import open_spec_file

    settings = settings_from(args)
    # status works when things are broken: a spec file that does not load shows the last good
    # one's apps, and the error as a note (the supervisor runs on the same last good file)
    spec_file = open_spec_file(settings.repo, settings.state_dir)
    if not spec_file.specs:
        raise ConfigError(spec_file.error or "no app specs")
    specs = spec_file.specs
    chosen = [get_app(specs, args.app)] if args.app else list(specs.values())
    ledger = open_ledger(settings)
    try:
        states = [app_status(settings, spec, ledger, detail=True, kafka_lag=not args.no_lag).cli_dict()
                  for spec in chosen]
        for st in states if spec_file.error else ():
            st["notes"].append(f"the spec file is refused, shown on the last good one: {spec_file.error}")
    finally:
        ledger.close()
    emit(args, states if not args.app else states[0], "\n".join(render(s) for s in states))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("status", parents=[common], help="desired vs observed state, lag, last batch, operations",
                       description="Status of one app (or all in include/streams.yaml).")
    p.add_argument("app", nargs="?", help="app name (default: all)")
    p.add_argument("--no-lag", action="store_true", help="skip asking the broker for end offsets")
    p.set_defaults(func=cmd_status)
