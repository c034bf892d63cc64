"""``streamops supervise``: run the reconcile loop in the foreground (``platform up`` starts it)."""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from streamops.cli.common import emit, open_ledger, settings_from


def cmd_supervise(args: argparse.Namespace) -> int:
    from streamops.exceptions import ConfigError
    from streamops.host.locks import acquire
    from streamops.lifecycle.supervisor import Supervisor
    from streamops.specfile import open_spec_file

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_from(args)
    spec_file = open_spec_file(settings.repo, settings.state_dir)
    if spec_file.error and not spec_file.specs:  # no last good spec to run on either
        raise ConfigError(spec_file.error)
    if spec_file.error:
        logging.getLogger("streamops.supervisor").error(
            "spec file refused; running on the last good one (%s): %s", spec_file.keep, spec_file.error)
    # one supervisor per state dir: two would launch and stop the same drivers against each other
    lock = acquire(settings.state_dir / "supervisor.lock", f"the supervisor of {settings.state_dir}",
                   refused="Only one supervisor may run per state dir: `streamops platform status` shows it; "
                           "`streamops platform down --only supervisor` stops it.")
    ledger = open_ledger(settings)
    sup = Supervisor(settings, dict(spec_file.specs), ledger, spec_file=spec_file)
    server = None
    try:
        if args.once:
            actions = sup.reconcile_once()
            sup.wait_idle()
            emit(args, {a: {"action": x.kind, "reason": x.reason} for a, x in actions.items()},
                 "\n".join(f"{a}: {x.kind} ({x.reason})" for a, x in actions.items()))
            return 0
        from streamops.observe.metrics import serve

        # the platform's Prometheus endpoint (its URL: `platform status --json`), on the apps it supervises
        server, _thread = serve(settings, lambda: dict(sup.specs))
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        sup.run(stop, interval=args.interval)
        return 0
    finally:
        if server is not None:
            server.shutdown()
        ledger.close()
        lock.release()


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("supervise", parents=[common], help="reconcile desired vs observed state (loop)",
                       description="Launch, restart (with backoff and a crash-loop limit), stop and resize "
                                   "app drivers so they match the desired state in the ledger.")
    p.add_argument("--once", action="store_true", help="one reconcile pass, then exit")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between passes (default 2)")
    p.set_defaults(func=cmd_supervise)
