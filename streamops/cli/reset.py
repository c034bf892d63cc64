"""``streamops reset|undo|reprocess|promote APP``: the application reset tool (offsets, state, changelog;
--dry-run), undoing an operation from its journal, bounded backfills into a versioned output, and
switching the live output."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from streamops.cli.common import (
    add_operation_flags,
    app_command,
    app_context,
    emit,
    progress_printer,
    run_operation,
)
from streamops.exceptions import UsageError

if TYPE_CHECKING:
    from streamops.app.context import AppContext
    from streamops.lifecycle.undo import UndoResult
    from streamops.reset.tool import ResetResult


def _offsets_file(path: str) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"--to-offsets: no such file {path}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"--to-offsets: {path} is not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise UsageError(f"--to-offsets: {path} must hold {{topic: {{partition: offset}}}}")
    return data


def _table(offsets: list[dict]) -> list[str]:
    lines = [f"  {'TOPIC':<24} {'PART':>4} {'CURRENT':>10} {'NEW':>10} {'REPROCESS':>10} {'SKIP':>8} {'TO PROCESS':>10}"]
    for o in offsets:
        lines.append(f"  {o['topic']:<24} {o['partition']:>4} {o['current']!s:>10} {o['target']:>10} "
                     f"{o['reprocess']:>10} {o['skip']:>8} {o['to_process']:>10}" + ("  (clamped)" if o["clamped"] else ""))
    return lines


def _finish(args: argparse.Namespace, out: ResetResult | UndoResult, lines: list[str], done: Callable[[], str]) -> int:
    """Print what reset and undo end alike with: their steps, then "dry run" or ``done()`` (called only
    after a real run: a dry run has no operation, so what it reads is None)."""
    lines += [f"  - {a}" for a in out.actions]
    lines.append("  dry run: nothing changed" if out.dry_run else done())
    emit(args, out, "\n".join(lines))
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    from streamops.reset import tool
    from streamops.reset.targets import make_target

    with app_context(args) as ctx:
        spec = ctx.spec
        if args.undo is not None:
            if args.state != "wipe" or args.force or args.output_version:
                raise UsageError("--undo takes no --state, --force or --output-version: it puts back what the "
                                 "reset replaced")
            return _undo(args, ctx, args.undo)
        target = make_target(to_earliest=args.to_earliest, to_latest=args.to_latest, to_datetime=args.to_datetime,
                             by_duration=args.by_duration, shift_by=args.shift_by,
                             to_offsets=_offsets_file(args.to_offsets) if args.to_offsets else None)
        out = tool.reset(ctx, target, state=args.state, force=args.force,
                         output_version=args.output_version, dry_run=args.dry_run, stop_first=args.stop_first,
                         timeout=args.timeout, progress=progress_printer(args))
    lines = [(f"{spec.name}: {'plan for' if out.dry_run else 'done:'} reset {out.target} "
             f"(state {out.state}; app {'running' if out.running else 'stopped'}; checkpoint at batch "
             f"{out.batch_id})"), *_table(out.offsets),
             (f"  records to reprocess {out.records_to_reprocess}, to skip {out.records_to_skip}, "
             f"to process from the new offsets {out.records_to_process}")]
    return _finish(args, out, lines, lambda: f"  previous checkpoint and topic copies kept at {out.aside}; undo "
                   f"with `streamops undo {spec.name} {out.operation_id}` ({out.seconds} s)")


def _undo(args: argparse.Namespace, ctx: AppContext, op_id: int) -> int:
    from streamops.lifecycle.undo import undo

    spec = ctx.spec
    out = undo(ctx, op_id, dry_run=args.dry_run, stop_first=args.stop_first,
               timeout=args.timeout, progress=progress_printer(args))
    lines = [(f"{spec.name}: {'would undo' if out.dry_run else 'undid'} {out.kind} #{out.undo} "
              f"({out.outcome}; {json.dumps(out.params)}): batch {out.current_batch} -> "
              f"{out.restore_batch}"),
             f"  its steps: {', '.join(out.steps) or 'none'}"]
    lines += [f"  {o['topic']}[{o['partition']}] {o['current']} -> {o['restore_to']}" for o in out.offsets]
    return _finish(args, out, lines, lambda: f"  done in {out.seconds} s (operation #{out.operation_id}; undo "
                   f"it with `streamops undo {spec.name} {out.operation_id}`)")


def cmd_undo(args: argparse.Namespace) -> int:
    with app_context(args) as ctx:
        return _undo(args, ctx, args.op_id)


def cmd_reprocess(args: argparse.Namespace) -> int:
    from streamops.reset.reprocess import reprocess
    from streamops.reset.reprocess_results import ReprocessResult

    spec, out = run_operation(args, reprocess, frm=args.frm, to=args.to, output_version=args.output_version,
                              dry_run=args.dry_run, master=args.master, parallelism=args.parallelism,
                              timeout=args.timeout)
    lines = [(f"{spec.name}: {'would reprocess' if out.dry_run else 'reprocessed'} {out.records} records "
             f"[{out.frm} .. {out.to}) into {out.output_topic} (as {out.run_as}; the live app writes "
             f"{out.live_output_topic}), batches of up to {out.max_offsets_per_trigger or 'all'} records"),
             f"  {'TOPIC':<24} {'PART':>4} {'FROM':>10} {'TO':>10} {'RECORDS':>10}"]
    lines += [f"  {o['topic']:<24} {o['partition']:>4} {o['from']:>10} {o['to']:>10} {o['records']:>10}"
              for o in out.offsets]
    lines += [f"  warning: {w}" for w in out.warnings]
    if isinstance(out, ReprocessResult):  # not a dry run
        lines.append(f"  {out.seconds} s, {out.records_per_second} records/s, {out.batches} as last batch "
                     f"(operation #{out.operation_id}); promote with `streamops promote {spec.name} "
                     f"--output-version {out.output_version}`")
    emit(args, out, "\n".join(lines))
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    from streamops.reset.reprocess import promote

    spec, out = run_operation(args, promote, args.output_version, dry_run=args.dry_run, timeout=args.timeout)
    verb = "already writes" if out.noop else "would write" if out.dry_run else "now writes"
    lines = [(f"{spec.name} {verb} {out.output_topic_after} ({out.records_in_topic} records there; before: "
             f"{out.output_topic_before})"), *[f"  - {a}" for a in out.actions]]
    emit(args, out, "\n".join(lines))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = app_command(
        sub, common, "reset", cmd_reset, help="reset an app's input offsets and state (the application reset tool)",
        description="Move the app's input offsets (exactly one target) and wipe its state (default) or keep it. "
                    "The changelog is recreated to match a wiped state; outputs are untouched unless "
                    "--output-version starts a new one. The old checkpoint and copies of the changelog and output "
                    "are kept aside, and --undo OP puts them back. --dry-run prints the plan and changes nothing.")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="every input partition from its first record")
    to.add_argument("--to-latest", action="store_true", help="skip everything there is now")
    to.add_argument("--to-datetime", metavar="ISO8601", help="first record at or after this time (no zone: UTC)")
    to.add_argument("--by-duration", metavar="DURATION", help="back from now by an ISO 8601 duration, e.g. PT1H, P1D")
    to.add_argument("--to-offsets", metavar="FILE", help="JSON {topic: {partition: offset}}; unlisted partitions "
                    "stay where they are")
    to.add_argument("--shift-by", type=int, metavar="N", help="move every partition by N records (negative: back)")
    to.add_argument("--undo", type=int, metavar="OP_ID", help="put back what reset OP_ID replaced "
                    "(the same as `streamops undo APP OP_ID`)")
    p.add_argument("--state", choices=("wipe", "keep"), default="wipe",
                   help="wipe (default): start from empty state; keep: keep it (needs --force: double counts)")
    p.add_argument("--force", action="store_true", help="allow --state keep")
    p.add_argument("--output-version", metavar="vN", help="write the output to <output>.vN from now on")
    add_operation_flags(p, stop_first=True)

    p = app_command(
        sub, common, "undo", cmd_undo,
        help="reverse a reset, restore, rebuild-state, promote or undo, even a failed one",
        description="Put back what operation OP_ID did, step by step from its journal in the ledger: the "
                    "checkpoint it set aside, the changelog and output it saved, the output version, the batch "
                    "marker; an app that ran before it runs again. Works for operations that succeeded, failed "
                    "half way or whose process was killed. The undo is itself an operation that can be undone. "
                    "--dry-run prints the plan and changes nothing.")
    p.add_argument("op_id", type=int, metavar="OP_ID", help="the operation (`streamops status APP` lists them)")
    add_operation_flags(p, stop_first=True)

    p = app_command(
        sub, common, "reprocess", cmd_reprocess,
        help="reprocess an input range into a versioned output, beside the live app",
        description="Run the app's job over [--from, --to) under its own checkpoint and identity (the live app "
                    "keeps running) into <output>.vN, with versioned changelog and DLQ topics; it stops by itself "
                    "at the end of the range. A rerun starts over and gives the same output per key.")
    p.add_argument("--from", dest="frm", required=True, metavar="T1",
                   help="earliest, an ISO 8601 date-time (no zone: UTC), or JSON offsets {topic: {partition: offset}}")
    p.add_argument("--to", required=True, metavar="T2", help="latest, an ISO 8601 date-time or JSON offsets (exclusive)")
    p.add_argument("--output-version", metavar="vN", help="the version to write (default: the one after the live one)")
    p.add_argument("--master", help="Spark master for the run (default: the spec's, then the platform's)")
    p.add_argument("--parallelism", type=int, help="executors/cores for the run (default: the spec's minimum)")
    add_operation_flags(p, dry_run="print the range per partition, change nothing", timeout=3600.0,
                        waits="before the run is given up")

    p = app_command(sub, common, "promote", cmd_promote, help="make an output version the one the live app writes",
                    description="Record in the ledger that the app writes <output>.vN (v1: the spec's own topic) "
                                "and restart a running app at a batch boundary so its next batch writes there.")
    p.add_argument("--output-version", required=True, metavar="vN", help="e.g. v2; v1 is the spec's own topic")
    add_operation_flags(p)
