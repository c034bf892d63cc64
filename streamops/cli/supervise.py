"""``streamops supervise``: run the reconcile loop in the foreground (``platform up`` starts it)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import threading

from streamops.cli.common import emit, open_ledger, settings_from


def cmd_supervise(args: argparse.Namespace) -> int:
    from streamops.exceptions import ConfigError
    from streamops.host.locks import acquire
    from streamops.ledger.supervisor_lease import release
    from streamops.lifecycle.supervisor import Supervisor, take_lease
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
    server = None
    lease = None
    sup: Supervisor | None = None
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        # one supervisor per ledger, across hosts: a second one waits (``--once`` is refused)
        lease = take_lease(ledger, settings.supervisor_lease_s, None if args.once else stop)
        if lease is None:  # stopped while it waited
            return 0
        sup = Supervisor(settings, dict(spec_file.specs), ledger, spec_file=spec_file)
        if args.once:
            actions = sup.reconcile_once()
            sup.wait_idle()
            emit(args, {a: {"action": x.kind, "reason": x.reason} for a, x in actions.items()},
                 "\n".join(f"{a}: {x.kind} ({x.reason})" for a, x in actions.items()))
            return 0
        from streamops.observe.metrics import serve

        # the platform's Prometheus endpoint (its URL: `platform status --json`), on the apps it supervises
        server, _thread = serve(settings, lambda: dict(sup.specs))
        sup.run(stop, interval=args.interval, lease=lease, lease_s=settings.supervisor_lease_s)
        return 0
    finally:
        if server is not None:
            server.shutdown()
        if lease is not None:
            with contextlib.suppress(Exception):  # a clean exit hands it on at once; a failed one at expiry
                release(ledger, (sup.lease if sup is not None else None) or lease)
        ledger.close()
        lock.release()


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("supervise", parents=[common], help="reconcile desired vs observed state (loop)",
                       description="Launch, restart (with backoff and a crash-loop limit), stop and resize "
                                   "app drivers so they match the desired state in the ledger.")
    p.add_argument("--once", action="store_true", help="one reconcile pass, then exit")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between passes (default 2)")
    p.set_defaults(func=cmd_supervise)
