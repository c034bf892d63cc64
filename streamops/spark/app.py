"""The driver of any declared job: ``python -m streamops.spark.app --app NAME [--parallelism N]``.

The spec entry names the job module (``job: jobs.page_stats``); its ``Job`` class is the whole
app: this module builds its query and records (``query.plan``) and runs them (``runner``).
"""

from __future__ import annotations

import argparse
import logging
import sys

from streamops.settings import Settings


def main(argv: list[str] | None = None) -> int:
    from streamops.app.marker import MarkerReadError
    from streamops.app.preflight import preflight
    from streamops.checkpoints.compat import IncompatibleCheckpointError
    from streamops.checkpoints.lineage import CheckpointMismatchError
    from streamops.spark.query.plan import JobQuery
    from streamops.spark.runner import add_run_arguments, run_app, run_setup

    ap = argparse.ArgumentParser(prog="python -m streamops.spark.app", description=__doc__.splitlines()[0])
    ap.add_argument("--app", required=True, help="the spec entry to run")
    add_run_arguments(ap)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = Settings.from_env()
    spec, options = run_setup(settings, args.app, args)  # the live output version, overrides, reprocess
    query = JobQuery.for_spec(spec, settings.repo)
    try:
        preflight(settings, spec, query.job_cls)
    except (IncompatibleCheckpointError, CheckpointMismatchError, MarkerReadError) as exc:
        logging.getLogger("streamops.runtime").error("refused to start (%s): %s", type(exc).__name__, exc)
        return exc.exit_code
    return run_app(spec, settings, build=query.build, to_records=query.records, options=options,
                   advance_clocks=query.advance_clocks if query.timed else None)


if __name__ == "__main__":
    sys.exit(main())
