"""``streamops deploy|resize|scale-windows|stop APP``: change an app's desired state and wait for it (audited)."""

from __future__ import annotations

import argparse

from streamops.cli.common import (
    add_operation_flags,
    app_command,
    app_context,
    emit,
    int_within,
    progress_printer,
    run_operation,
)


def cmd_deploy(args: argparse.Namespace) -> int:
    from streamops.lifecycle.operations import deploy

    spec, out = run_operation(args, deploy, parallelism=args.parallelism, timeout=args.timeout)
    batch = out.after["batch"]
    where = "no batch yet: nothing to read" if batch is None else f"batch {batch}"
    emit(args, out, f"{spec.name}: running x{out.parallelism} (operation #{out.operation_id}, {where}, "
                    f"{out.seconds} s)")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from streamops.lifecycle.operations import stop

    # stopping must work while the spec file is broken: on the last good one then
    spec, out = run_operation(args, stop, last_good_ok=True, now=args.now, timeout=args.timeout)
    where = "before its first batch" if out.after["batch"] is None else f"at batch {out.after['batch']}"
    emit(args, out, f"{spec.name}: stopped {where} (operation #{out.operation_id}, {out.seconds} s)")
    return 0


def cmd_resize(args: argparse.Namespace) -> int:
    from streamops.lifecycle.operations import resize

    spec, out = run_operation(args, resize, parallelism=args.parallelism, strategy=args.strategy,
                              timeout=args.timeout)
    what = "already at" if out.noop else "resized to"
    emit(args, out, f"{spec.name}: {what} x{out.parallelism} (operation #{out.operation_id}, "
                    f"{out.seconds} s)")
    return 0


def cmd_scale_windows(args: argparse.Namespace) -> int:
    from streamops.lifecycle.operations import resize
    from streamops.lifecycle.windows import WindowsApplied, window_plan
    from streamops.results import extend

    with app_context(args) as ctx:
        spec = ctx.spec
        if args.override is not None:
            spec.check_parallelism(args.override)
        plan = window_plan(spec, ctx.ledger.desired(spec.name), override=args.override)
        if args.dry_run or plan.action == "none":
            emit(args, extend(plan, WindowsApplied, dry_run=args.dry_run),
                 f"{spec.name}: {plan.action} — {plan.reason}" + (" (dry run)" if args.dry_run else ""))
            return 0
        out = resize(ctx, parallelism=plan.target, timeout=args.timeout,
                     progress=progress_printer(args))
    emit(args, extend(plan, WindowsApplied, resize=out),
         f"{spec.name}: resized {plan.reason} (operation #{out.operation_id}, {out.seconds} s)")
    return 0


_positive = int_within(1)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = app_command(sub, common, "deploy", cmd_deploy, help="run an app (returns when its first batch committed)",
                    description="Set the app's desired state to running and wait until a micro-batch "
                                "after the start has committed (or it runs with nothing to read).")
    p.add_argument("--parallelism", type=_positive, help="executor cores (default: the spec's default)")
    add_operation_flags(p, dry_run=None, waits="to wait")

    p = app_command(sub, common, "resize", cmd_resize, help="change a running app's parallelism",
                    description="restart: graceful stop at a batch boundary and relaunch from the same "
                                "checkpoint with the new executor count.")
    p.add_argument("--parallelism", type=_positive, required=True, help="executor cores")
    p.add_argument("--strategy", choices=["restart", "live"], default="restart",
                   help="restart: new driver from the same checkpoint; live: add/remove executors of the running app")
    add_operation_flags(p, dry_run=None, waits="to wait")

    p = app_command(sub, common, "scale-windows", cmd_scale_windows, help="resize a running app to its scale window",
                    description="Apply the spec's scale windows now: resize (restart strategy) when the "
                                "window's parallelism differs from the desired one; a no-op otherwise.")
    p.add_argument("--override", type=_positive, metavar="N", help="use N instead of the schedule")
    add_operation_flags(p, waits="to wait for the resize")

    p = app_command(sub, common, "stop", cmd_stop, help="stop an app at a batch boundary (--now: kill)",
                    description="Set the app's desired state to stopped and wait until its driver exited.")
    p.add_argument("--now", action="store_true", help="kill the driver instead of a graceful stop")
    add_operation_flags(p, dry_run=None, timeout=180.0, waits="to wait")
