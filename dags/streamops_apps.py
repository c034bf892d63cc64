"""App operations as DAGs, generated from ``include/streams.yaml``.

One DAG per operation (deploy, resize, stop, restore, rebuild-state, reset, promote) whose trigger form validates the app (enum of the
specs' apps), the parallelism (integer range) and the strategy (enum) before a run is created;
the app's own limits are checked again by the core before anything changes. One scale-window
DAG per app, scheduled at its windows' starts and ends, with a manual ``override``, and one
savepoint DAG per app on the spec's savepoint schedule, compaction and verification DAGs per
app on the spec's maintenance schedules, and a watch DAG per app whose task fails on an alert. Waiting for
convergence is deferred to the triggerer: no worker slot is held while an app converges.

Every DAG is active from its first parse (``is_paused_upon_creation=False``): a run triggered
through the REST API runs, and the schedules in the spec run. An app whose spec says
``schedules: paused`` gets its scheduled DAGs without a schedule (manual runs only) on the next
parse; the reprocess DAG keeps its interval timetable (backfills need it; its scheduled runs skip).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from airflow.sdk import DAG, AssetAny, Param, task
from airflow.timetables.interval import CronDataIntervalTimetable
from airflow.timetables.trigger import MultipleCronTriggerTimetable
from streamops_airflow.assets import dlq_asset, output_asset
from streamops_airflow.operators import (
    CompactOperator,
    DeployAppOperator,
    DlqSummaryOperator,
    PromoteOperator,
    RebuildStateOperator,
    ReprocessOperator,
    ResetOperator,
    ResizeAppOperator,
    RestoreOperator,
    SavepointOperator,
    ScaleWindowsOperator,
    StopAppOperator,
    VerifyOperator,
    WatchAppOperator,
)

from streamops.exceptions import ConfigError
from streamops.settings import Settings
from streamops.spec import AppSpec
from streamops.specfile import open_spec_file

# re-read on every parse: an app added to include/streams.yaml gets its DAGs within a parse
# interval, a removed one loses them. A file that does not load keeps the DAGs of the last good
# one (a broken edit must not take every operation DAG away); the parse log says why.
_SETTINGS = Settings.from_env()
_SPEC_FILE = open_spec_file(_SETTINGS.repo, _SETTINGS.state_dir)
if _SPEC_FILE.error:
    if not _SPEC_FILE.specs:
        raise ConfigError(_SPEC_FILE.error)
    logging.getLogger(__name__).error("spec file refused; the DAGs of the last good one stay: %s", _SPEC_FILE.error)
SPECS = _SPEC_FILE.specs
APPS = sorted(SPECS)
MAX_PARALLELISM = max(s.parallelism.max for s in SPECS.values())
COMMON = {
    "start_date": datetime(2026, 1, 1),
    "catchup": False,
    "max_active_runs": 1,
    "render_template_as_native_obj": True,
    # active from the first parse: REST-triggered runs and the specs' schedules run without a
    # manual unpause (a paused DAG leaves API-triggered runs queued for ever)
    "is_paused_upon_creation": False,
    "default_args": {"retries": 0, "retry_delay": timedelta(seconds=30)},
}
#: DAGs on the wall clock: no start_date, so a DAG's first run is its next tick. With a start_date
#: in the past and catchup off, Airflow runs the latest past tick the moment the DAG becomes
#: active: `make run` would start a compaction, a savepoint and a verification beside the deploy.
ON_THE_CLOCK = {**COMMON, "start_date": None}
TIMEOUT = Param(600, type="integer", minimum=30, maximum=7200, title="Timeout (s)",
                description="How long to wait for the app to converge before the task fails.")
#: every operation that changes something defaults to showing its plan only
DRY_RUN = Param(True, type="boolean", title="Dry run", description="Only show the plan.")
STOP_FIRST = Param(False, type="boolean", title="Stop first",
                   description="Stop a running app at a batch boundary first and start it after.")


def app_param() -> Param:
    """Required and empty: a run is refused until someone chooses the app (the first app of the
    spec as a default made a Trigger pressed without looking stop or resize it). The Streams page's
    forms fill in the app they show."""
    return Param(type="string", enum=APPS, title="App", description="An app from include/streams.yaml.")


def parallelism_param(default: int | None, *, nullable: bool, description: str) -> Param:
    types = ["null", "integer"] if nullable else "integer"
    return Param(default, type=types, minimum=1, maximum=MAX_PARALLELISM, title="Parallelism",
                 description=description)


def operation_dag(dag_id: str, *, doc_md: str, params: dict[str, Param],
                  tags: tuple[str, ...] = ("streamops", "operations")) -> DAG:
    """A DAG that runs one operation on an app when triggered: its form asks for the app first, then
    ``params``, then how long to wait."""
    return DAG(dag_id=dag_id, schedule=None, tags=list(tags), doc_md=doc_md,
               params={"app": app_param(), **params, "timeout": TIMEOUT}, **COMMON)


def app_dag(dag_id: str, schedule: str, spec: AppSpec, *, tag: str, doc_md: str,
            params: dict[str, Param] | None = None) -> DAG:
    """A DAG of one app on the wall clock (``ON_THE_CLOCK``) at ``schedule`` (the spec's, off while
    the spec's schedules are paused)."""
    return DAG(dag_id=dag_id, schedule=spec.scheduled(schedule), tags=["streamops", tag, spec.name], doc_md=doc_md,
               params=params or {}, **ON_THE_CLOCK)


def from_form(*names: str) -> dict[str, str]:
    """An operation DAG's operator arguments: each of ``names`` and ``timeout_s`` from the run's form."""
    return {**{name: f"{{{{ params.{name} }}}}" for name in names}, "timeout_s": "{{ params.timeout }}"}


def strategy_param() -> Param:
    return Param("restart", type="string", enum=["restart", "live"], title="Strategy",
                 description="restart: graceful stop, new driver from the same checkpoint; "
                             "live: add/remove executors of the running app (standalone or k8s master).")


with operation_dag(
    "streamops_deploy",
    doc_md="Deploy (run) an app; succeeds once its first batch after the start has committed.",
    params={"parallelism": parallelism_param(None, nullable=True,
                                             description="Executor cores; empty: the spec's default.")},
):
    DeployAppOperator(task_id="deploy", **from_form("app", "parallelism"))

with operation_dag(
    "streamops_resize",
    doc_md="Resize a running app; no-op when already at that size. Refused outside the app's limits.",
    params={"parallelism": parallelism_param(1, nullable=False, description="New executor cores."),
            "strategy": strategy_param()},
):
    ResizeAppOperator(task_id="resize", **from_form("app", "parallelism", "strategy"))

with operation_dag(
    "streamops_stop",
    doc_md="Stop an app at a batch boundary (`now`: kill the driver; the batch in flight is replayed).",
    params={"now": Param(False, type="boolean", title="Kill now")},
):
    StopAppOperator(task_id="stop", **from_form("app", "now"))

with operation_dag(
    "streamops_restore",
    doc_md="Restore an app to a savepoint (`streamops savepoints APP` lists them). Defaults to a dry run: "
           "the plan (offsets per partition, state version) is in the task log and its return value.",
    params={"savepoint": Param("", type="string", minLength=1, title="Savepoint id"),
            "dry_run": DRY_RUN},
):
    RestoreOperator(task_id="restore", **from_form("app", "savepoint", "dry_run"))

with operation_dag(
    "streamops_rebuild_state",
    tags=("streamops", "maintenance"),
    doc_md="Rebuild an app's checkpoint from its changelog topic (as Kafka Streams restores a store), "
           "optionally into another number of state partitions. Defaults to a dry run: the plan (start offsets "
           "per partition, state partitions before/after) is in the task log and its return value.",
    params={"state_partitions": Param(None, type=["null", "integer"], minimum=1, maximum=200,
                                      title="State partitions", description="Empty: as now."),
            "stop_first": STOP_FIRST,
            "dry_run": DRY_RUN},
):
    RebuildStateOperator(task_id="rebuild_state", **from_form("app", "state_partitions", "stop_first", "dry_run"))

with operation_dag(
    "streamops_reset",
    doc_md="Reset an app (as Kafka's application reset tool): move its input offsets and wipe (or, with force, "
           "keep) its state; the changelog is recreated to match, the output is untouched unless an output "
           "version starts a new one. `undo` with the reset's operation id puts everything back. Defaults to a "
           "dry run: the plan (per partition current -> new offset, records to reprocess, actions) is in the "
           "task log and its return value.",
    params={"target": Param("earliest", type="string", enum=list(ResetOperator.TARGETS), title="Reset to",
                            description="earliest | latest | datetime | duration | shift_by | offsets | undo"),
            "value": Param(None, type=["null", "string"], title="Value",
                           description="datetime: ISO 8601 (no zone: UTC); duration: ISO 8601 back from now "
                                       "(PT1H); shift_by: N; offsets: JSON {topic: {partition: offset}}; "
                                       "undo: the reset's operation id"),
            "state": Param("wipe", type="string", enum=["wipe", "keep"], title="State"),
            "force": Param(False, type="boolean", title="Force", description="Needed for state=keep."),
            "output_version": Param(None, type=["null", "string"], pattern=r"^v\d{1,6}$", title="Output version",
                                    description="e.g. v2: write <output>.v2 from now on"),
            "stop_first": STOP_FIRST,
            "dry_run": DRY_RUN},
):
    ResetOperator(task_id="reset", **from_form("app", "target", "value", "state", "force", "output_version",
                                               "stop_first", "dry_run"))

with operation_dag(
    "streamops_promote",
    doc_md="Switch an app's live output to a reprocessed version (e.g. `v2` after `streamops_reprocess__APP`); "
           "`v1` goes back to the spec's own topic. A running app is restarted at a batch boundary so its next "
           "batch writes there. Defaults to a dry run: the plan is in the task log and its return value.",
    params={"output_version": Param("v2", type="string", pattern=r"^v\d{1,6}$", title="Output version",
                                    description="v1: the spec's output topic; vN: <output>.vN"),
            "dry_run": DRY_RUN},
):
    PromoteOperator(task_id="promote", **from_form("app", "output_version", "dry_run"))

for _name, _spec in SPECS.items():
    with DAG(
        dag_id=f"streamops_reprocess__{_name}",
        # time-based intervals, so a backfill of a date range makes one run per interval; the runs
        # the scheduler makes by itself are skipped (only manual and backfill runs reprocess)
        schedule=CronDataIntervalTimetable(_spec.reprocess.interval, timezone="UTC"),
        tags=["streamops", "reprocess", _name],
        doc_md=f"Reprocess a range of `{_name}`'s input into a versioned output while the app runs. Each run "
               f"covers its data interval (`{_spec.reprocess.interval}` UTC), unless from/to are given, so "
               f"`airflow backfill create --dag-id streamops_reprocess__{_name} --from-date .. --to-date ..` "
               f"reprocesses the range interval by interval (consecutive intervals continue one state). "
               f"Then `streamops promote {_name} --output-version vN` switches the app's output.",
        params={"from": Param(None, type=["null", "string"], title="From",
                              description="Empty: the data interval's start. Else an ISO 8601 time, earliest, "
                                          "or JSON offsets."),
                "to": Param(None, type=["null", "string"], title="To",
                            description="Empty: the data interval's end. Else an ISO 8601 time, latest, or JSON "
                                        "offsets."),
                "output_version": Param(_spec.reprocess.output_version, type=["null", "string"],
                                        pattern=r"^v\d{1,6}$", title="Output version"),
                "master": Param(None, type=["null", "string"], title="Spark master",
                                description="Empty: the spec's, then the platform's."),
                "dry_run": Param(False, type="boolean", title="Dry run", description="Only show the range.")},
        **COMMON,
    ):
        ReprocessOperator(task_id="reprocess", app=_name, frm="{{ params['from'] }}", to="{{ params.to }}",
                          output_version="{{ params.output_version }}", master="{{ params.master }}",
                          dry_run="{{ params.dry_run }}")

for _name, _spec in SPECS.items():
    with app_dag(
        f"streamops_compact__{_name}", _spec.maintenance.compact_schedule, _spec, tag="maintenance",
        doc_md=f"Compact `{_name}`'s state (schedule `{_spec.maintenance.compact_schedule}` UTC) while it runs: "
               "one snapshot at the last committed batch, checkpoint files no retained batch needs and savepoints "
               "beyond retention deleted; bytes and state restore time before/after in the log.",
        params={"dry_run": Param(False, type="boolean", title="Dry run", description="Only show the plan.")},
    ):
        CompactOperator(task_id="compact", app=_name, dry_run="{{ params.dry_run }}")

    with app_dag(
        f"streamops_verify__{_name}", _spec.maintenance.verify_schedule, _spec, tag="maintenance",
        doc_md=f"Verify `{_name}` (schedule `{_spec.maintenance.verify_schedule}` UTC): the state store at the "
               "last committed batch against the changelog and output topics, plus the data-quality suite in "
               "`include/expectations/`. Fails with a summary on any violation; the HTML report's path is logged.",
    ):
        VerifyOperator(task_id="verify", app=_name)


    with DAG(
        dag_id=f"streamops_watch__{_name}",
        # one run after the other, each watching an hour in the triggerer (no worker slot)
        schedule=_spec.scheduled("@continuous"),
        tags=["streamops", "alerts", _name],
        doc_md=f"Alerts for `{_name}`: the task fails when the app crash-loops, a verification fails, its lag "
               f"passes {_spec.alerts.max_lag_seconds} s or its DLQ rate {_spec.alerts.max_dlq_per_minute} "
               f"records/min (the spec's `alerts`). Each condition fails one run when it starts; hang your "
               f"notification on this DAG's failures (`on_failure_callback`, email).",
        params={},
        **{**COMMON, "start_date": datetime(2026, 1, 1)},
    ):
        WatchAppOperator(task_id="watch", app=_name)

    with app_dag(
        f"streamops_savepoint__{_name}", _spec.savepoints.schedule, _spec, tag="savepoints",
        doc_md=f"Savepoint `{_name}` while it runs (schedule `{_spec.savepoints.schedule}` UTC), keeping "
               f"{_spec.savepoints.retain_count} and at most {_spec.savepoints.retain_age}.",
    ):
        SavepointOperator(task_id="savepoint", app=_name)

    _crons = sorted({c for w in _spec.scale_windows for c in (w.start, w.end)})
    with DAG(
        dag_id=f"streamops_scale_windows__{_name}",
        schedule=(MultipleCronTriggerTimetable(*_crons, timezone="UTC")
                  if _crons and _spec.schedules == "active" else None),
        tags=["streamops", "scale-windows", _name],
        doc_md=f"Resize `{_name}` to its scale window at each window start and end (UTC): "
               + (", ".join(f"{w.name}: {w.start} → {w.end} at {w.parallelism}" for w in _spec.scale_windows)
                  or "no windows in the spec (manual runs only)")
               + ". A no-op when already at size or not running. `override` replaces the schedule.",
        params={"override": Param(None, type=["null", "integer"], minimum=_spec.parallelism.min,
                                  maximum=_spec.parallelism.max, title="Override parallelism",
                                  description="Empty: follow the schedule."),
                "strategy": strategy_param(), "timeout": TIMEOUT},
        **ON_THE_CLOCK,
    ):
        ScaleWindowsOperator(task_id="scale", app=_name, override="{{ params.override }}",
                             strategy="{{ params.strategy }}", timeout_s="{{ params.timeout }}")


# -- assets (streamops_airflow.assets) -------------------------------------------------------------
_DLQ_ASSETS = [dlq_asset(n, spec=s) for n, s in sorted(SPECS.items()) if s.scheduled("@once") is not None]
with DAG(
    dag_id="streamops_dlq_summary",
    # any app's DLQ asset: its watcher sees records no digest has counted; events that come while a
    # run is queued join that run
    schedule=AssetAny(*_DLQ_ASSETS) if _DLQ_ASSETS else None,
    tags=["streamops", "alerts", "assets"],
    doc_md="Digest the DLQ records written since the last digest, per app: counts by reason, offset ranges and "
           "the newest few (headers decoded, values cut short), in the task log and its return value. Runs when "
           "a new record reaches an app's DLQ topic (an asset watcher); a manual run digests every app, or `app`.",
    params={"app": Param(None, type=["null", "string"], enum=[None, *APPS], title="App",
                         description="Empty: every app.")},
    **COMMON,
):
    DlqSummaryOperator(task_id="summarize", apps="{{ params.app }}")

with DAG(
    dag_id="streamops_output_batches",
    schedule=AssetAny(*[output_asset(n, spec=s) for n, s in sorted(SPECS.items())]) if SPECS else None,
    tags=["streamops", "assets", "example"],
    doc_md="An example of a DAG downstream of the apps' output: it runs when an app has committed batches "
           "(the output asset's event, at most one per the spec's `events.batch_every_s`) and logs what the "
           "events say. Paused at creation: the watchers run only while a DAG is scheduled on the assets. "
           "Schedule your own DAGs on `streamops_airflow.assets.output_asset(APP)`.",
    params={},
    **{**COMMON, "is_paused_upon_creation": True},
):
    @task(task_id="batches")
    def batches(triggering_asset_events=None) -> list[dict]:
        """Each event's payload: app, first_batch, last_batch, batches, input_records, committed_at_ms."""
        out = []
        for asset, evs in (triggering_asset_events or {}).items():
            for ev in evs:
                payload = (ev.extra or {}).get("payload") or {}
                logging.getLogger(__name__).info("%s: %s", asset.name, payload)
                out.append(payload)
        return out

    batches()
