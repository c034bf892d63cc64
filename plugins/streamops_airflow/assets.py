"""Each app's output and DLQ topics as Airflow assets, with their watchers.

Schedule a DAG on an app's output to run after it commits batches::

    from streamops_airflow.assets import output_asset

    with DAG("after_orders", schedule=[output_asset("orders")], ...):
        ...  # context["triggering_asset_events"]: app, first_batch, last_batch, input_records

- ``output_asset(app)``: ``kafka://<bootstrap>/<output topic>``, watched by ``BatchCommitTrigger``
  (the batches committed since the last event, at most one event per the spec's
  ``events.batch_every_s``). The watcher runs while at least one active DAG is scheduled on it.
- ``dlq_asset(app)``: ``kafka://<bootstrap>/<dlq topic>``, watched by the Kafka provider's
  message-queue trigger (``KafkaMessageQueueTrigger``) on the Airflow connection ``streamops_kafka``
  (the platform defines it: ``streamops.platform.components.kafka_connection``). ``dlq_record``
  lets a record through only if the last DLQ digest has not counted it, so a burst starts a few
  runs, not one per record; the DAG ``streamops_dlq_summary`` digests what is new
  (``streamops.observe.dlq.digest_new``). The trigger's polls share one thread in the triggerer,
  hence the short ``DLQ_POLL_TIMEOUT_S`` (docs/operations.md, bench/dlq_watcher.py).

Call these with the same app in every DAG: the asset and its watcher must be defined alike
wherever the asset is used, or the DAG processor replaces one watcher with the other.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from airflow.sdk import Asset, AssetWatcher

#: the Airflow connection to this platform's broker (env AIRFLOW_CONN_STREAMOPS_KAFKA): the DLQ
#: watchers' consumers, and the Kafka provider's operators, sensors and triggers in users' DAGs
KAFKA_CONN_ID = "streamops_kafka"
#: how long one poll of a DLQ watcher's consumer may wait. The provider's trigger polls through
#: asgiref's sync_to_async, whose calls share one thread in the triggerer: with the default 1 s,
#: ten apps' watchers polled each in turn every 10 s, and a watcher (restarted after each event)
#: took that long per step of joining its group (bench/dlq_watcher.py)
DLQ_POLL_TIMEOUT_S = 0.1


@cache
def _settings():
    from streamops.settings import Settings

    return Settings.from_env()


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
    """The app's DLQ topic; an event per DLQ record no digest has counted yet."""
    from airflow.providers.apache.kafka.triggers.msg_queue import KafkaMessageQueueTrigger

    spec = _spec(app, spec)
    trigger = KafkaMessageQueueTrigger(topics=[spec.dlq_topic], kafka_config_id=KAFKA_CONN_ID,
                                       apply_function=f"{__name__}.dlq_record", apply_function_kwargs={"app": app},
                                       poll_timeout=DLQ_POLL_TIMEOUT_S, poll_interval=0)
    return Asset(name=f"streamops.{app}.dlq", uri=_uri(spec.dlq_topic), group="streamops",
                 extra={"app": app, "kind": "dlq"},
                 watchers=[AssetWatcher(name=f"streamops_{app}_dlq", trigger=trigger)])


def dlq_record(message: Any, app: str) -> dict[str, Any] | None:
    """The DLQ watcher's filter (runs in the triggerer): the record's coordinates and reason if no
    digest counted it yet, else None (committed and skipped)."""
    from streamops.observe.dlq import is_new
    from streamops.spark.job_query import H_REASON

    if not is_new(_settings(), app, message.partition(), message.offset()):
        return None
    headers = {k: (v or b"").decode("utf-8", "replace") for k, v in (message.headers() or [])}
    return {"app": app, "topic": message.topic(), "partition": message.partition(), "offset": message.offset(),
            "reason": headers.get(H_REASON)}
