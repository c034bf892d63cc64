"""``streamops savepoint|savepoints|restore APP``: checkpoint snapshots, listed, restored (audited)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from streamops.cli.common import (
    add_operation_flags,
    app_command,
    app_ledger,
    emit,
    human_bytes,
    run_operation,
)

if TYPE_CHECKING:
    from streamops.lifecycle.savepoints import SavepointRow


def cmd_savepoint(args: argparse.Namespace) -> int:
    from streamops.lifecycle.savepoints import take

    spec, out = run_operation(args, take)
    emit(args, out, f"{spec.name}: savepoint {out.id} at batch {out.batch_id} ({out.files} files, "
                    f"{human_bytes(out.bytes)}, sha256 {out.sha256[:12]}, {out.seconds} s)"
                    + (f"; removed by retention: {', '.join(out.removed)}" if out.removed else ""))
    return 0


def render_listing(app: str, rows: list[SavepointRow]) -> str:
    """The text table of ``listing``'s rows: the lineage column tells apart two savepoints of the
    same batch number from different runs (batch numbers start again at 0 after a reset)."""
    if not rows:
        return f"{app}: no savepoints"
    lines = [f"{'ID':<40} {'BATCH':>6}  {'LINEAGE':<9} {'TAKEN (UTC)':<19} {'TOOK':>8} {'SIZE':>10}  SHA256"]
    for r in rows:
        lineage = (r.lineage or "?")[:8] + ("*" if r.current else "")
        taken = datetime.fromisoformat(r.created_at).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
        took = "-" if r.seconds is None else f"{r.seconds:.1f} s"
        lines.append(f"{r.id:<40} {r.batch_id:>6}  {lineage:<9} {taken:<19} {took:>8} {human_bytes(r.bytes):>10}  "
                     f"{r.sha256[:12]}" + ("" if r.present else "  (files missing)"))
    lines.append("LINEAGE: the checkpoint each was taken from (a reset starts a new one); "
                 "*: the one the app runs on now")
    return "\n".join(lines)


def cmd_savepoints(args: argparse.Namespace) -> int:
    from streamops.lifecycle.savepoints import listing

    with app_ledger(args) as (settings, spec, ledger):
        rows = listing(settings, spec, ledger)
    emit(args, rows, render_listing(spec.name, rows))
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    from streamops.lifecycle.savepoints import restore

    spec, out = run_operation(args, restore, args.savepoint, dry_run=args.dry_run, timeout=args.timeout)
    head = (f"{spec.name}: {'would restore' if out.dry_run else 'restored'} {out.savepoint} "
            f"(batch {out.batch_id}, state version {out.state_version}, checksum verified)")
    lines = [head, f"  {'TOPIC':<20} {'PART':>4} {'CURRENT':>10} {'RESTORE TO':>10} {'REPROCESS':>10}"]
    lines += [f"  {p['topic']:<20} {p['partition']:>4} {p['current']!s:>10} {p['restore_to']:>10} "
              f"{p['reprocess']:>10}" for p in out.offsets]
    lines.append(f"  records to reprocess: {out.records_to_reprocess}; current checkpoint (batch "
                 f"{out.current_batch}) set aside to {out.aside or out.set_aside_to}; "
                 + ("the app is stopped first and started again" if out.restart else "the app stays stopped"))
    emit(args, out, "\n".join(lines))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    app_command(sub, common, "savepoint", cmd_savepoint, help="snapshot the checkpoint while the app runs",
                description="Copy what the last committed batch needs (offsets, commits, state) with a "
                            "SHA-256 manifest; the app keeps running. Applies the spec's retention.")

    app_command(sub, common, "savepoints", cmd_savepoints, help="list an app's savepoints (newest first)",
                description="Newest first: batch, the checkpoint lineage each was taken from (batch "
                            "numbers start again after a reset), when it was taken and how long it "
                            "took, size and checksum.")

    p = app_command(sub, common, "restore", cmd_restore,
                    help="restore an app to a savepoint (--dry-run: show the plan)",
                    description="Stop at a batch boundary, set the current checkpoint aside, install the "
                                "verified savepoint and start again; the batches after it are reprocessed.")
    p.add_argument("savepoint", help="savepoint id (see `streamops savepoints APP`)")
    add_operation_flags(p, dry_run="print the offsets and state version, change nothing", waits="to wait for each step")
