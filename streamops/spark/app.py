"""The driver of any declared job: ``python -m streamops.spark.app --app NAME [--parallelism N]``.

The spec entry names the job module (``job: jobs.page_stats``); its ``Job`` class is the whole
app: this module builds its query and records (``job_query``) and runs them (``runner``).
"""

from __future__ import annotations

import argparse
import logging
import sys

from streamops.settings import Settings


def preflight(settings: Settings, spec, query) -> None:
    """Before any Spark session (every driver start) and before deploy changes anything: the job
    must fit its checkpoint (``checkpoints.compat``), and ``check_lineage``."""
    from streamops.checkpoints.compat import gate, shape_of
    from streamops.spark.session import checkpoint_dir

    gate(spec.name, checkpoint_dir(settings, spec), shape_of(query))
    check_lineage(settings, spec)


def check_lineage(settings: Settings, spec) -> None:
    """The last committed batch marker must be about the checkpoint, and the input must still
    hold what the checkpoint read (``checkpoints.lineage``): at every driver start, and at every
    restart of its query (a broker that lost a committed batch while the driver ran)."""
    from streamops.checkpoints import layout, lineage
    from streamops.kafka.admin import end_offsets
    from streamops.kafka.exceptions import TopicNotFoundError
    from streamops.spark.commit import last_marker
    from streamops.spark.session import checkpoint_dir

    ckpt = checkpoint_dir(settings, spec)
    lineage.check(spec.name, ckpt, lambda: last_marker(settings.kafka_bootstrap, spec.commits_topic, spec.name))
    if layout.last_committed_batch(ckpt) is not None:  # the input must still hold what the checkpoint read
        highs: dict[str, dict[int, int]] = {}
        for t in spec.input_topics:
            try:
                highs[t] = {p: hi for p, (_lo, hi) in end_offsets(settings.kafka_bootstrap, t).items()}
            except TopicNotFoundError:
                highs[t] = {}
        lineage.check_input(spec.name, ckpt, highs)


def main(argv: list[str] | None = None) -> int:
    from streamops.checkpoints.compat import IncompatibleCheckpointError
    from streamops.checkpoints.lineage import CheckpointMismatchError
    from streamops.spark.commit import MarkerReadError
    from streamops.spark.job_query import JobQuery
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
        preflight(settings, spec, query)
    except (IncompatibleCheckpointError, CheckpointMismatchError, MarkerReadError) as exc:
        logging.getLogger("streamops.runtime").error("refused to start (%s): %s", type(exc).__name__, exc)
        return exc.exit_code
    return run_app(spec, settings, build=query.build, to_records=query.records, options=options,
                   advance_clocks=query.advance_clocks if query.timed else None)


if __name__ == "__main__":
    sys.exit(main())
