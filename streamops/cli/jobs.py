"""``streamops app lint APP`` and ``streamops new-app NAME``: write and check a job before it runs."""

from __future__ import annotations

import argparse
import re
import sys

from streamops.cli.common import emit, emit_report, progress_printer, settings_from
from streamops.exceptions import UsageError


def cmd_lint(args: argparse.Namespace) -> int:
    from streamops.job import JobDeclarationError, find_job
    from streamops.spec import default_spec_path, get_app, import_job, load_specs
    from streamops.state.lint import LintCheck, LintReport, lint, render
    from streamops.state.sample import file_records, sample_records

    settings = settings_from(args)
    spec = get_app(load_specs(default_spec_path(settings.repo)), args.app)
    try:
        job_cls = find_job(import_job(spec, settings.repo))
    except JobDeclarationError as exc:
        report = LintReport(spec.job, 0, [LintCheck("declaration", False, str(exc))])
        return emit_report(args, report, render(report))
    if args.from_file:  # plain lines keyed by the job's key, as `produce --from-file` keys them; record lines as given
        records = file_records(job_cls, spec.name, spec.input_topics, spec.input_partitions, args.from_file)
    elif not job_cls.can_generate():
        raise UsageError(f"{spec.name}'s job declares no generate(): give a sample with --from-file F.jsonl")
    else:
        try:
            records = sample_records(job_cls, spec.input_topics, spec.input_partitions,
                                     list(job_cls().generate(args.events, args.seed)))
        except JobDeclarationError as exc:
            report = LintReport(job_cls.__name__, 0, [LintCheck("generate", False, str(exc))])
            return emit_report(args, report, render(report))
    spark = None
    if not args.no_spark:
        from streamops.state.seed import seed_session

        progress_printer(args)("starting a local Spark ...")
        spark = seed_session(settings, name="streamops-lint")
    try:
        report = lint(job_cls, records, spark=spark, state_partitions=min(spec.state_partitions, 2),
                      progress=progress_printer(args), idle_timeouts=spec.idle_timeouts,
                      partitions=[(t, p) for t in spec.input_topics for p in range(spec.input_partitions)])
    finally:
        if spark is not None:
            spark.stop()
    return emit_report(args, report, render(report))


_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")


def cmd_new_app(args: argparse.Namespace) -> int:
    from streamops.scaffold import scaffold
    from streamops.spec import default_spec_path, load_specs

    name = args.name
    if not _NAME.match(name):
        raise UsageError(f"app name {name!r}: use lower case letters, digits and _ (a Python module name)")
    settings = settings_from(args)
    if name in load_specs(default_spec_path(settings.repo)):
        raise UsageError(f"{name!r} is already an app in {default_spec_path(settings.repo)}")
    made = scaffold(settings.repo, name, dry_run=args.dry_run)
    text = ("would write:\n" if args.dry_run else "wrote:\n") + "\n".join(f"  {p}" for p in made.files) + (
        f"\nnext: `streamops app lint {name}`, then `streamops produce {name} --events 1000` and "
        f"`streamops deploy {name}` (docs/writing-a-job.md)" if not args.dry_run else "")
    emit(args, {"app": name, "dry_run": args.dry_run, "files": [str(p) for p in made.files]}, text)
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p_app = sub.add_parser("app", help="work on an app's job: lint")
    asub = p_app.add_subparsers(dest="app_command", metavar="SUBCOMMAND", required=True)
    p = asub.add_parser("lint", parents=[common], help="check a job without a cluster (local Spark on a sample)",
                        description="Check APP's job on a sample for every input topic: the declaration, "
                                    "parse, the state serde, update over split batches, one key in one partition "
                                    "when the job depends on order, then the Spark query against the plain-Python "
                                    "fold and a seeded checkpoint. Exit 0 when all pass, 1 otherwise.")
    p.add_argument("app", metavar="APP")
    p.add_argument("--events", type=int, default=2000, help="sample size from the job's generate() (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.add_argument("--from-file", metavar="[TOPIC=]F.jsonl", action="append",
                   help="the sample from a file instead (repeatable). A plain line is a value, keyed by the job's "
                        "key() so one key stays in one partition, as order-dependent jobs (screen) need of their "
                        "real input too; TOPIC= for an app with several input topics. A line "
                        '{"topic", "partition", "key", "timestamp", "value"} (all but value optional) is a record '
                        "as given: its partition kept (else placed by its key), its timestamp the Kafka timestamp. "
                        "Each partition's records are read in file order (docs/writing-a-job.md, section 3)")
    p.add_argument("--no-spark", action="store_true", help="only the checks without Spark (seconds, not a minute)")
    p.set_defaults(func=cmd_lint)
    p = sub.add_parser("new-app", parents=[common], help="scaffold a job file, its spec entry and a unit test",
                       description="Write jobs/NAME.py (a working job to edit), append NAME to "
                                   "include/streams.yaml and write tests/unit/jobs/test_NAME.py, which passes.")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--dry-run", action="store_true", help="print the files it would write, write nothing")
    p.set_defaults(func=cmd_new_app)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(1)
