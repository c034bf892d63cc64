"""``streamops check APP``: compare the app's state, changelog, output and DLQ with the truth."""

from __future__ import annotations

import argparse

from streamops.cli.common import app_command, comparing, emit_report, load_app, progress_printer


def cmd_check(args: argparse.Namespace) -> int:
    from streamops.reset.targets import parse_datetime
    from streamops.state.check import render, run_check

    settings, spec, kafka = load_app(args)
    try:
        since = None if args.since is None else int(parse_datetime(args.since).timestamp() * 1000)
    except ValueError as exc:
        from streamops.exceptions import UsageError

        raise UsageError(f"--since: {exc}") from None
    with comparing():
        if args.wait:
            from streamops.observe.status import wait_caught_up

            left = wait_caught_up(settings, spec, kafka, args.wait, progress=progress_printer(args))
            if left:
                progress_printer(args)(f"{spec.name}: {left} input records not committed after {args.wait:.0f} s; "
                                       f"comparing up to the last committed batch")
        report = run_check(spec, settings, kafka, since_ms=since, progress=progress_printer(args))
    return emit_report(args, report, render(report))


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = app_command(
        sub, common, "check", cmd_check,
        help="truth oracle: fold the input in plain Python, compare state/changelog/output/DLQ",
        description="Exit 0 when state store, changelog, output and DLQ all equal the plain-Python "
                    "fold of the input up to the last committed batch; exit 1 on any difference, 2 when it "
                    "could not compare (as diff does).",
    )
    p.add_argument("--since", metavar="ISO8601",
                   help="fold only input records with a timestamp at or after this instant (after a reset "
                        "to a datetime); a checkpoint made by reset is folded from its start offsets anyway")
    p.add_argument("--wait", type=float, metavar="SECONDS", default=0,
                   help="first wait (at most SECONDS) until the running app has committed the input "
                        "present now, e.g. right after `streamops produce`")
