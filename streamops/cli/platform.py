"""``streamops platform up|status|down``."""

from __future__ import annotations

import argparse

from streamops.cli.common import emit, progress_printer, settings_from


def _groups(value: str | None) -> list[str] | None:
    from streamops.platform.components import GROUPS

    if not value:
        return None
    groups = [g.strip() for g in value.split(",") if g.strip()]
    bad = [g for g in groups if g not in GROUPS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown group(s) {bad}; choose from {', '.join(GROUPS)}")
    return groups


def status_table(rows: list[dict]) -> str:
    lines = [f"{'COMPONENT':<22} {'PID':>7}  {'PORTS':<18} {'STATE':<10} SINCE"]
    for r in rows:
        state = "healthy" if r["healthy"] else ("unhealthy" if r["running"] else "stopped")
        ports = ",".join(str(p) for p in r["ports"]) or "-"
        lines.append(f"{r['name']:<22} {r['pid'] or '-':>7}  {ports:<18} {state:<10} {r['since'] or '-'}")
    return "\n".join(lines)


# -- platform ----------------------------------------------------------------------------------
def cmd_platform_up(args: argparse.Namespace) -> int:
    from streamops.platform import external, manager
    from streamops.settings import Settings

    settings = settings_from(args)
    chosen = external.parse(args.external or [])
    if chosen:  # saved once everything is up: a refused service changes nothing
        settings = Settings.model_validate({**settings.model_dump(), **chosen})
    rows = [s.to_dict() for s in manager.up(settings, only=args.only, progress=progress_printer(args))]
    if chosen:
        external.save(settings.state_dir, chosen)
    info = {
        "state_dir": str(settings.state_dir),
        "airflow_url": settings.airflow_url,
        "airflow_user": "admin",
        "airflow_password_file": str(manager.password_file(settings)),
        "kafka_bootstrap": settings.kafka_bootstrap,
        "spark_master": settings.spark_master_url,
        "spark_ui": f"http://{settings.host}:{settings.spark_ui_port}",
        "metrics": settings.metrics_url,
        "streams_view": f"{settings.airflow_url}/plugin/streams",
        "components": rows,
        "external": [{"kind": e.kind, "at": e.at, "setting": e.setting} for e in external.services(settings)],
    }
    groups = set(args.only or ("kafka", "spark", "airflow"))
    text = [f"streamops platform is up (state dir {settings.state_dir})"]
    if "airflow" in groups:
        text.append(f"  Airflow UI    {settings.airflow_url}  (user admin; password in "
                    f"{manager.password_file(settings)})")
        text.append(f"  Streams view  {info['streams_view']}")
    if "spark" in groups:
        text.append(f"  Spark master  {settings.spark_master_url}  (UI {info['spark_ui']})")
    if "supervisor" in groups or not args.only:
        text.append(f"  Metrics       {settings.metrics_url}  (Prometheus)")
    if "kafka" in groups:
        from streamops.kafka.security import kafka_config

        kafka = info["kafka_security"] = kafka_config(settings).describe()
        secured = (f" ({kafka['security_protocol']}, {kafka['sasl_mechanism']} user {kafka['sasl_username']}; "
                   f"client properties in {kafka['defaults']})") if kafka["sasl_mechanism"] else ""
        text.append(f"  Kafka         {settings.kafka_bootstrap}{secured}")
    text += [f"  external      {e.kind} at {e.at} ({e.setting})" for e in external.services(settings)]
    text += ["", status_table(rows), "", "Stop it with: streamops platform down"]
    emit(args, info, "\n".join(text))
    return 0


def cmd_platform_status(args: argparse.Namespace) -> int:
    from streamops.platform import external, manager

    settings = settings_from(args)
    rows = [s.to_dict() for s in manager.status(settings, only=args.only)]
    down = [r["name"] for r in rows if not r["running"]]
    unhealthy = [r["name"] for r in rows if r["running"] and not r["healthy"]]
    outside = [{"kind": e.kind, "at": e.at, "setting": e.setting, "healthy": problem is None, "problem": problem}
               for e, problem in external.reachable(settings, settings.airflow_db_url)
               if not args.only or e.kind in args.only or e.kind not in ("kafka", "spark")]
    unhealthy += [f"external {e['kind']}" for e in outside if not e["healthy"]]
    kafka_up = any(r["name"] == "kafka" and r["healthy"] for r in rows) or any(
        e["kind"] == "kafka" and e["healthy"] for e in outside)
    notes = _replication_notes(settings) if kafka_up else []
    summary = ("all components healthy" if not down and not unhealthy else
               "; ".join(part for part in (f"not running: {', '.join(down)}" if down else "",
                                           f"unhealthy: {', '.join(unhealthy)}" if unhealthy else "") if part)
               + " (start them with `streamops platform up`)")
    lines = [f"external {e['kind']:<10} {e['at']} ({e['setting']}): "
             + ("answers" if e["healthy"] else e["problem"]) for e in outside] + [f"note: {n}" for n in notes]
    lease = _supervisor_lease(settings) if not args.only or "supervisor" in args.only else None
    if lease is not None:
        lines.append(f"supervisor lease: {lease['holder']}, term {lease['term']}, "
                     + ("lapsed" if lease["expired"] else f"until {lease['expires_at'][11:19]} UTC"))
    emit(args, {"components": rows, "external": outside, "notes": notes, "healthy": not down and not unhealthy,
                "supervisor_lease": lease, "down": down,
                "unhealthy": unhealthy, "metrics": settings.metrics_url,
                "streams_view": f"{settings.airflow_url}/plugin/streams"},
         "\n".join([status_table(rows), *lines]) + "\n\n" + summary + f"\nMetrics: {settings.metrics_url}")
    return 0 if not down and not unhealthy else 1  # scripts and health checks can rely on it


def _supervisor_lease(settings) -> dict | None:
    """Who holds the ledger's supervisor lease (``ledger.supervisor_lease``); None: nobody yet, or
    the ledger does not answer (the components' rows say why)."""
    from sqlalchemy.exc import SQLAlchemyError

    from streamops.ledger import Ledger, supervisor_lease
    from streamops.ledger.store import sqlite_file

    url = settings.ledger_db_url
    if (path := sqlite_file(url)) is not None and not path.exists():
        return None  # no ledger yet: status makes none
    try:
        ledger = Ledger(url)  # read only: no migration
        try:
            lease = supervisor_lease.current(ledger)
        finally:
            ledger.close()
    except SQLAlchemyError:
        return None
    if lease is None:
        return None
    return {"holder": lease.holder, "term": lease.term, "acquired_at": lease.acquired_at.isoformat(),
            "expires_at": lease.expires_at.isoformat(), "expired": lease.expired}


def _replication_notes(settings) -> list[str]:
    """``streamops status``'s replication notes for every app of the spec file (its topics that
    exist with another replication factor than the platform gives new ones); a note, not unhealthy."""
    from streamops.exceptions import StreamopsError
    from streamops.observe.status import replication_notes
    from streamops.spec import default_spec_path, load_specs

    try:
        specs = load_specs(default_spec_path(settings.repo))
    except StreamopsError as exc:
        return [f"replication unknown: {str(exc).splitlines()[0][:200]}"]
    return replication_notes(settings, specs.values())


def cmd_platform_down(args: argparse.Namespace) -> int:
    from streamops.platform import manager

    stopped = manager.down(settings_from(args), only=args.only, timeout=args.timeout)
    lines = [
        f"stopped {s['name']} (pid {s['pid']}{', killed after timeout' if s['killed'] else ''})"
        for s in stopped if s["was_running"]
    ] or ["nothing was running"]
    emit(args, {"stopped": stopped}, "\n".join(lines))
    return 0


def cmd_platform_kafka_tool(args: argparse.Namespace) -> int:
    """Kafka's own command-line tool from the pinned jars; ``--bootstrap-server`` defaults to the
    platform's broker. Its exit status is the tool's."""
    import os
    import subprocess

    from streamops.kafka.security import kafka_config
    from streamops.platform import kafka_broker

    settings = settings_from(args)
    rest = list(args.tool_args)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if args.tool == "storage":  # the broker's own storage: no client, no client configuration
        return subprocess.run(kafka_broker.tool_argv(args.tool, rest), env=dict(os.environ), check=False).returncode
    kafka = kafka_config(settings)
    if "--bootstrap-server" not in rest:
        rest = ["--bootstrap-server", kafka.bootstrap, *rest]
    flag = kafka_broker.CONFIG_FLAGS.get(args.tool)
    if flag is None or flag in rest:  # a tool without one, or a config file of the caller's
        return subprocess.run(kafka_broker.tool_argv(args.tool, rest), env=dict(os.environ), check=False).returncode
    # the platform's client security, resolved into a file of mode 0600 that lives as long as the tool
    with kafka.command_config(settings.state_dir / "tmp") as path:
        first = [flag, str(path)] if path is not None else []  # before a subcommand (transactions)
        return subprocess.run(kafka_broker.tool_argv(args.tool, [*first, *rest]), env=dict(os.environ),
                              check=False).returncode


def cmd_platform_kafka_config(args: argparse.Namespace) -> int:
    """The Kafka client configuration every client of the platform uses (of APP's clients with APP),
    where it comes from, and its renderings; every secret masked."""
    from streamops.kafka.security import kafka_config

    settings = settings_from(args)
    spec = None
    if args.app:
        from streamops.app.outputs import load_live_spec

        spec = load_live_spec(settings, args.app)
    info = kafka_config(settings, spec).describe(renderings=True)
    text = [f"Kafka clients of {info['app'] or 'the platform'} at {info['bootstrap']}: {info['security_protocol']}"
            + (f", {info['sasl_mechanism']} user {info['sasl_username']}" if info["sasl_mechanism"] else ""),
            f"  defaults: {info['defaults'] or 'none (PLAINTEXT)'}"]
    if info["app_overrides"]:
        text.append(f"  overrides of apps.{info['app']}.kafka: {', '.join(info['app_overrides'])}")
    for title, key in (("properties", "properties"), ("librdkafka (Python clients)", "librdkafka"),
                       ("Spark's Kafka source and sink", "spark")):
        text.append(f"  {title}:")
        text += [f"    {k}={v}" for k, v in sorted(info[key].items())] or ["    (none)"]
    emit(args, info, "\n".join(text))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p_platform = sub.add_parser("platform", help="the embedded platform: broker, Spark, Airflow")
    psub = p_platform.add_subparsers(dest="action", metavar="ACTION", required=True)
    only_help = "only these component groups, comma-separated: kafka,spark,airflow,supervisor (default: all)"
    p = psub.add_parser("up", parents=[common], help="start everything not yet running; wait until healthy")
    p.add_argument("--only", type=_groups, help=only_help)
    p.add_argument("--kafka-security", choices=("plaintext", "sasl_ssl"),
                   help="the embedded broker's client listener: sasl_ssl (SCRAM-SHA-512 users and TLS "
                   "certificates generated at the first start) or plaintext (default: STREAMOPS_KAFKA_SECURITY, "
                   "else as it last ran)")
    p.add_argument("--external", action="append", metavar="KIND=VALUE",
                   help="a service the platform uses but does not start, repeatable: kafka=BOOTSTRAP, "
                   "spark=MASTER_URL, ledger=DB_URL, airflow-db=DB_URL (KIND=embedded: the platform's own "
                   "again); checked before anything starts, then kept in the state dir's settings.env for "
                   "every later command (the STREAMOPS_* variables win over it)")
    p.set_defaults(func=cmd_platform_up)
    p = psub.add_parser("status", parents=[common], help="pid, ports, health and start time per component; "
                        "exits 1 unless every component (of --only) runs and is healthy")
    p.add_argument("--only", type=_groups, help=only_help)
    p.set_defaults(func=cmd_platform_status)
    p = psub.add_parser("down", parents=[common], help="stop what 'up' started (SIGTERM, wait, SIGKILL)")
    p.add_argument("--only", type=_groups, help=only_help)
    p.add_argument("--timeout", type=float, default=20.0, help="seconds to wait after SIGTERM (default 20)")
    p.set_defaults(func=cmd_platform_down)
    from streamops.platform.kafka_broker import TOOLS

    p = psub.add_parser("kafka-tool", parents=[common],
                        help="run one of Kafka's own tools (kafka-NAME.sh) from the pinned jars, e.g. "
                        "`kafka-tool consumer-groups --describe --group APP`")
    p.add_argument("tool", choices=sorted(TOOLS), help="the tool, as in kafka-NAME.sh")
    p.add_argument("tool_args", nargs=argparse.REMAINDER, help="its arguments (--bootstrap-server defaults to "
                   "the platform's broker)")
    p.set_defaults(func=cmd_platform_kafka_tool)
    p = psub.add_parser("kafka-config", parents=[common],
                        help="the Kafka client configuration the platform's clients use (APP's with APP): where it "
                        "comes from and how librdkafka and Spark get it, secrets masked")
    p.add_argument("app", nargs="?", help="an app: its spec's kafka: overrides merged over the platform's defaults")
    p.set_defaults(func=cmd_platform_kafka_config)
