"""``streamops compact|rebuild-state APP``: state maintenance (audited, --dry-run, --json)."""

from __future__ import annotations

import argparse

from streamops.cli.common import (
    add_operation_flags,
    app_command,
    emit,
    human_bytes,
    int_within,
    run_operation,
)


def cmd_compact(args: argparse.Namespace) -> int:
    from streamops.lifecycle.maintenance import compact

    spec, out = run_operation(args, compact, dry_run=args.dry_run)
    chains = out.chains_before
    longest = max((c["changelogs"] for c in chains.values()), default=0)
    lines = [(f"{spec.name}: {'would compact' if out.dry_run else 'compacted'} at batch {out.batch_id} "
              f"(state version {out.state_version}; app {'running' if out.running else 'stopped'})")]
    lines += [f"  state {k}: snapshot {c['snapshot']} + {c['changelogs']} changelogs -> snapshot "
              f"{out.state_version} + 0" for k, c in sorted(chains.items())]
    lines.append(f"  snapshots to install: {', '.join(out.install_snapshots) or 'none (already there)'}; "
                 f"files to delete: {out.delete_files} ({human_bytes(out.delete_bytes)}); longest chain before: "
                 f"{longest} changelogs")
    lines.append(f"  savepoints beyond retention: {', '.join(out.savepoints_beyond_retention) or 'none'}")
    if not out.dry_run:
        lines.append(f"  checkpoint {human_bytes(out.bytes_before)} -> {human_bytes(out.bytes_after)}; state "
                     f"restore {out.restore_seconds_before} s -> {out.restore_seconds_after} s; took {out.seconds} s "
                     f"(operation #{out.operation_id})")
    emit(args, out, "\n".join(lines))
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    from streamops.lifecycle.maintenance import rebuild_state

    spec, out = run_operation(args, rebuild_state, state_partitions=args.state_partitions, dry_run=args.dry_run,
                              stop_first=args.stop_first, timeout=args.timeout)
    lines = [(f"{spec.name}: {'would rebuild' if out.dry_run else 'rebuilt'} the state from "
              f"{out.changelog_topic} ({out.changelog_keys} keys, as of batch marker {out.marker_batch}): "
              f"{out.state_partitions_before} -> {out.state_partitions_after} state partitions"),
             f"  {'TOPIC':<20} {'PART':>4} {'CHECKPOINT':>10} {'START AT':>10}"]
    lines += [f"  {o['topic']:<20} {o['partition']:>4} {o['checkpoint']!s:>10} {o['start_at']:>10}"
              for o in out.offsets]
    lines += [f"  - {a}" for a in out.actions]
    if out.aside:
        lines.append(f"  previous checkpoint kept at {out.aside} (operation #{out.operation_id}, {out.seconds} s)")
    if out.spec_note:
        lines.append(f"  note: {out.spec_note}")
    emit(args, out, "\n".join(lines))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = app_command(sub, common, "compact", cmd_compact,
                    help="consolidate an app's state and drop what nothing needs",
                    description="Install one snapshot of the state at the last committed batch (so a restore "
                                "reads one snapshot instead of a changelog chain), delete checkpoint files no "
                                "retained batch needs and savepoints beyond retention. Safe while the app runs. "
                                "It never touches savepoints within retention or files of later batches.")
    add_operation_flags(p, timeout=None)

    p = app_command(sub, common, "rebuild-state", cmd_rebuild,
                    help="rebuild an app's checkpoint from its changelog topic",
                    description="Build a new checkpoint whose state is the changelog topic's latest value per "
                                "key and whose input offsets are those that state reflects, optionally with "
                                "another number of state partitions. The old checkpoint is set aside, never "
                                "deleted. Output topics are not touched.")
    p.add_argument("--from-changelog", action="store_true", required=True,
                   help="the source of the state (the only one for now; required so the command says it)")
    p.add_argument("--state-partitions", type=int_within(1, 200), help="state partitions of the new checkpoint "
                   "(default: as now)")
    add_operation_flags(p, stop_first=True)
