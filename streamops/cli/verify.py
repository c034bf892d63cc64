"""``streamops verify APP``: changelog and output vs the state store, plus data-quality suites."""

from __future__ import annotations

import argparse

from streamops.cli.common import app_command, comparing, emit_report, load_app, progress_printer


def cmd_verify(args: argparse.Namespace) -> int:
    from streamops.state.verify.report import render
    from streamops.state.verify.run import verify

    settings, spec, kafka = load_app(args)
    with comparing():
        report = verify(spec, settings, kafka, progress=progress_printer(args), record=not args.no_record,
                        html=not args.no_html)
    return emit_report(args, report, render(report))


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = app_command(
        sub, common, "verify", cmd_verify,
        help="changelog verification: state store vs changelog and output topics, with GX suites",
        description="Compare the state store at the last committed batch with the changelog's and the "
                    "output topic's latest value per key, validate the state and the result with the Great "
                    "Expectations suites in include/expectations/, write an HTML report and record the "
                    "outcome in the ledger. For a job that expires state, output keys no state explains any "
                    "more (closed windows) are checked for form only and counted: 'output keys: N compared, "
                    "M expired (well-formed), K malformed'; over no compared key it says 'nothing to compare'. "
                    "Exit 0 when everything holds, 1 on any violation, 2 when it could not compare (as diff does).",
    )
    p.add_argument("--no-html", action="store_true", help="skip the HTML report (the suites still run)")
    p.add_argument("--no-record", action="store_true", help="do not record the outcome in the ledger")
