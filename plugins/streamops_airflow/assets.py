"""Each app's output and DLQ topics as Airflow assets, with their watchers.

Schedule a DAG on an app's output to run after it commits batches::

    from streamops_airflow.assets import output_asset

    with DAG("after_orders", schedule=[output_asset("orders")], ...):
        ...  # context["triggering_asset_events"]: app, first_batch, last_batch, input_records

- ``output_asset(app)``: ``kafka://<bootstrap>/<output topic>``, watched by ``BatchCommitTrigger``
  (the batches committed since the last event, at most one event per the spec's
  ``events.batch_every_s``). The watcher runs while at least one active DAG is scheduled on it.
- ``dlq_asset(app)``: ``kafka://<bootstrap>/<dlq topic>``, watched by ``DlqRecordsTrigger``: an
  event when the topic holds records the last DLQ digest has not counted, at most one per 10 s, so
  a burst starts a few runs, not one per record; the DAG ``streamops_dlq_summary`` digests what is
  new (``streamops.observe.dlq.digest_new``). (Not the Kafka provider's message-queue trigger:
  it polls, commits and filters record by record in a thread all its watchers share, so after a
  burst it crawls through records a digest already counted, and a new one waits behind them;
  docs/operations.md, bench/dlq_watcher.py.)

Call these with the same app in every DAG: the asset and its watcher must be defined alike
wherever the asset is used, or the DAG processor replaces one watcher with the other.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from airflow.sdk import Asset, AssetWatcher

#: the Airflow connection to this platform's broker (env AIRFLOW_CONN_STREAMOPS_KAFKA), for the
#: Kafka provider's operators, sensors and triggers in users' DAGs
KAFKA_CONN_ID = "streamops_kafka"


@cache
def _settings():
    from streamops_airflow.hooks import StreamopsHook

    return StreamopsHook().settings


def _spec(app: str, spec: Any = None):
    from streamops.exceptions import UsageError
    from streamops.specfile import open_spec_file

    if spec is not None:
        return spec
    settings = _settings()
    specs = open_spec_file(settings.repo, settings.state_dir).specs
    if app not in specs:
        raise UsageError(f"unknown app {app!r}: the spec file has {', '.join(sorted(specs)) or 'no app'}")
    return specs[app]


def _uri(topic: str) -> str:
    return f"kafka://{_settings().kafka_bootstrap.split(',')[0]}/{topic}"


def output_asset(app: str, *, spec: Any = None) -> Asset:
    """The app's output topic; an event per batch commit (rate-limited), see the module docstring.
    ``spec``: the app's spec when the caller has it (the DAG file), else it is read from the spec file."""
    from streamops_airflow.triggers import BatchCommitTrigger

    spec = _spec(app, spec)
    return Asset(name=f"streamops.{app}.output", uri=_uri(spec.output_topic), group="streamops",
                 extra={"app": app, "kind": "output"},
                 watchers=[AssetWatcher(name=f"streamops_{app}_batches", trigger=BatchCommitTrigger(app=app))])


def dlq_asset(app: str, *, spec: Any = None) -> Asset:
    """The app's DLQ topic; an event when records no digest has counted reach it."""
    from streamops_airflow.triggers import DlqRecordsTrigger

    spec = _spec(app, spec)
    return Asset(name=f"streamops.{app}.dlq", uri=_uri(spec.dlq_topic), group="streamops",
                 extra={"app": app, "kind": "dlq"},
                 watchers=[AssetWatcher(name=f"streamops_{app}_dlq", trigger=DlqRecordsTrigger(app=app))])
