"""The driver of any declared job: ``python -m streamops.spark.driver --app NAME [--parallelism N]``.

The spec entry names the job module (``job: jobs.page_stats``); its ``Job`` class is the whole
app: this module builds its query and records (``query.plan``) and runs them (``loop.run_app``),
after the checks every start makes (``app.preflight``). The package's only way in: the launcher
(``lifecycle.driver``) starts it as a process by module name (``__main__`` calls ``main``);
nothing outside the package imports it.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from streamops.settings import Settings
from streamops.spark.driver import loop
from streamops.spec import AppSpec

PROG = "python -m streamops.spark.driver"


def main(argv: list[str] | None = None) -> int:
    from streamops.app.marker import MarkerReadError
    from streamops.app.preflight import preflight
    from streamops.checkpoints.compat import IncompatibleCheckpointError
    from streamops.checkpoints.lineage import CheckpointMismatchError
    from streamops.kafka.security import kafka_config
    from streamops.spark.query.plan import JobQuery

    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--app", required=True, help="the spec entry to run")
    add_run_arguments(ap)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = Settings.from_env()
    spec, options = run_setup(settings, args.app, args)  # the live output version, overrides, reprocess
    # every Kafka client of this driver is the app's (its spec's kafka overrides), built once here
    kafka = kafka_config(settings, spec)
    query = JobQuery.for_spec(spec, settings.repo)
    try:
        preflight(settings, spec, query.job_cls, kafka)
    except (IncompatibleCheckpointError, CheckpointMismatchError, MarkerReadError) as exc:
        logging.getLogger("streamops.runtime").error("refused to start (%s): %s", type(exc).__name__, exc)
        return exc.exit_code
    return loop.run_app(spec, settings, kafka, build=query.build, to_records=query.records, options=options,
                        advance_clocks=query.advance_clocks if query.timed else None,
                        encode_spec=query.encode_spec, worker_modules=query.worker_modules())


def add_run_arguments(ap) -> None:
    """The options every job's driver takes (see ``run_setup``)."""
    ap.add_argument("--master", help="Spark master (default: spec, then the platform's)")
    ap.add_argument("--parallelism", type=int)
    ap.add_argument("--max-offsets-per-trigger", type=int, help="override the spec's rate limit")
    ap.add_argument("--trigger-interval", help="override the spec's trigger interval, e.g. '1 second'")
    ap.add_argument("--commit-on", choices=("driver", "executors"),
                    help="override the spec's commit_on: where a batch's records are made and committed")
    ap.add_argument("--exit-at-end", action="store_true",
                    help="stop once the input present at start is committed (benchmarks, tests)")
    ap.add_argument("--reprocess", metavar="FILE",
                    help="a bounded run written by `streamops reprocess` (range, output version)")


def run_setup(settings: Settings, app: str, args) -> tuple[AppSpec, loop.RunOptions]:
    """The spec a job runs (the ledger's output version, overrides, or a reprocess's own identity)
    and its run options, from ``add_run_arguments``' options."""
    from streamops.app.outputs import load_live_spec, reprocess_spec

    spec = load_live_spec(settings, app)
    overrides = {"max_offsets_per_trigger": args.max_offsets_per_trigger, "trigger_interval": args.trigger_interval,
                 "commit_on": getattr(args, "commit_on", None)}
    spec = spec.model_validate({**spec.model_dump(), **{k: v for k, v in overrides.items() if v is not None}})
    options = loop.RunOptions(master=args.master, parallelism=args.parallelism, exit_at_end=args.exit_at_end)
    if args.reprocess:
        run = json.loads(Path(args.reprocess).read_text())
        spec = reprocess_spec(spec, run["output_version"])
        options.starting_offsets, options.stop_at = run["start"], run["stop"]
    return spec, options
