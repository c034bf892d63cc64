"""The platform's Prometheus metrics (``prometheus-client``), computed at each scrape from what the
Streams view reads (``observe.status``, ``observe.streams``) and the ledger; served by the supervisor on
``Settings.metrics_url`` (``serve``). Names follow Prometheus' conventions (base units, ``_total``
for counters) with the labels this field uses: ``app``, ``topic``, ``partition``.

docs/operations.md, "Metrics", lists them; ``include/grafana/streamops.json`` is a dashboard on them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from streamops.settings import Settings

if TYPE_CHECKING:
    from streamops.ledger import Ledger
    from streamops.observe.streams import ResizePause
    from streamops.observe.watermark import WatermarkStatus

log = logging.getLogger(__name__)

HEALTHS = ("healthy", "starting", "stale", "failed", "crash-loop", "stopped", "not deployed")
#: the ledger's operation kind of the supervisor giving up on a crash-looping app (``lifecycle.supervisor``)
GIVE_UP = "give-up"


def _gauge(name: str, doc: str, labels: tuple[str, ...] = ("app",)) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"streamops_{name}", doc, labels=list(labels))


def _gauges() -> dict[str, GaugeMetricFamily]:
    """The gauges a scrape fills, by a short key (yielded in this order)."""
    return {
        "up": _gauge("app_up", "1 if the app's health is healthy"),
        "health": _gauge("app_health", "1 for the app's health, 0 for the others", ("app", "health")),
        "desired": _gauge("app_parallelism_desired", "executors the ledger's desired state asks for"),
        "observed": _gauge("app_executors", "executors the driver has"),
        "lag": _gauge("app_lag_records", "records behind after the last batch (Spark's latest offset - end offset)",
                      ("app", "topic", "partition")),
        "lag_total": _gauge("app_lag_records_total_partitions", "records behind over all input partitions"),
        "lag_s": _gauge("app_lag_seconds", "the lag at the last batch's processing rate"),
        "in": _gauge("app_input_records_per_second", "the last batch's input rate"),
        "done": _gauge("app_processed_records_per_second", "the last batch's processing rate"),
        "dur": _gauge("app_batch_duration_seconds", "the last batch's duration (trigger execution)"),
        "age": _gauge("app_last_batch_age_seconds", "seconds since the last batch"),
        "hb": _gauge("app_heartbeat_age_seconds", "seconds since the driver's last heartbeat"),
        "rows": _gauge("app_state_rows", "rows in the app's state store"),
        "bytes": _gauge("app_state_bytes", "memory the app's state store uses"),
        "batch": _gauge("app_last_batch_id", "the last batch's id"),
        "read": _gauge("app_batch_input_records", "records the last batch read per input partition (skew)",
                       ("app", "topic", "partition")),
        "crash": _gauge("app_crash_loop", "1 while the supervisor has given up on the app (crash loop)"),
        "dlq": _gauge("app_dlq_records_per_minute", "records sent to the DLQ per minute over the last 5 minutes",
                      ("app", "reason")),
        "wm": _gauge("app_watermark_seconds", "jobs with stream time: the watermark as of the last committed "
                                              "batch (epoch seconds)"),
        "wm_lag": _gauge("app_watermark_lag_seconds", "jobs with stream time: how far the watermark lags the "
                                                      "newest stream time over the input partitions"),
        "wm_holder": _gauge("app_watermark_holder_since_seconds", "jobs with stream time: the input partition "
                                                                  "that holds the watermark (the smallest stream "
                                                                  "time, or one with no event yet), since when "
                                                                  "(epoch seconds)", ("app", "topic", "partition")),
        "wm_idle": _gauge("app_watermark_idle_since_seconds", "jobs with stream time: input partitions an "
                                                              "idleness timeout released, since when (epoch "
                                                              "seconds)", ("app", "topic", "partition")),
        "e2e": _gauge("app_end_to_end_latency_seconds", "the last batch: from the newest Kafka timestamp "
                                                        "among the records it read to its commit"),
        "e2e_max": _gauge("app_end_to_end_latency_max_seconds", "the last batch: from the oldest Kafka "
                                                                "timestamp among the records it read to its commit"),
        "hot": _gauge("app_hot_key_records", "records of the last batch's hottest keys (keys with a large "
                                             "share of the batch; Spark's approx_top_k)", ("app", "key")),
        "sp": _gauge("app_batch_state_partition_records", "records the last batch gave each state partition "
                                                          "(skew; apps with up to 32 state partitions)", ("app", "partition")),
        "pause": _gauge("app_last_resize_pause_seconds", "the last resize: the longest time without a batch "
                                                         "commit from 5 s before its request to 20 s after it "
                                                         "converged", ("app", "strategy")),
    }


def _add_row(g: dict[str, GaugeMetricFamily], name: str, row: Any) -> None:
    """The gauges of the app's Streams row (``status.stream_row``): health, executors, lag, rates, state."""
    g["up"].add_metric([name], 1.0 if row.health == "healthy" else 0.0)
    for h in HEALTHS:
        g["health"].add_metric([name, h], 1.0 if row.health == h else 0.0)
    g["crash"].add_metric([name], 1.0 if row.crash_loop else 0.0)
    for key, value in (("desired", row.desired_parallelism), ("observed", row.executors),
                       ("lag_total", row.lag_records), ("lag_s", row.lag_seconds),
                       ("in", row.input_rate), ("done", row.processing_rate),
                       ("age", row.last_batch_age_s), ("hb", row.heartbeat_age_s),
                       ("rows", row.state_rows), ("bytes", row.state_bytes), ("batch", row.last_batch_id),
                       ("dur", None if row.last_batch_duration_ms is None
                        else row.last_batch_duration_ms / 1000)):
        if value is not None:
            g[key].add_metric([name], float(value))


def _add_last_batch(g: dict[str, GaugeMetricFamily], name: str, last: Any) -> None:
    """The gauges of the app's last batch (``streams.last_point``): lag and records read per input
    partition, hot keys, records per state partition, end-to-end latency."""
    for tp, n in sorted(last.lag.items()):
        topic, _, part = tp.rpartition("/")
        g["lag"].add_metric([name, topic, part], float(n))
    for tp, n in sorted(last.read.items()):
        topic, _, part = tp.rpartition("/")
        g["read"].add_metric([name, topic, part], float(n))
    for key, n in last.hot_keys:
        g["hot"].add_metric([name, key], float(n))
    for i, n in enumerate(last.state_partition_records):
        g["sp"].add_metric([name, str(i)], float(n))
    for key, record_ms in (("e2e", last.newest_ms), ("e2e_max", last.oldest_ms)):
        if (latency := last.latency_s(record_ms)) is not None:
            g[key].add_metric([name], latency)


def _add_dlq_rates(dlq: GaugeMetricFamily, settings: Settings, name: str) -> None:
    """Records the app sent to the DLQ per minute and reason over the last 5 minutes."""
    from streamops.observe.streams import dlq_per_minute, recent

    now_ms = int(time.time() * 1000)
    recent_points = recent(settings, name, since_ms=now_ms - 300_000)
    for reason, rate in sorted(dlq_per_minute(recent_points, now_ms=now_ms).items()):
        dlq.add_metric([name, reason], rate)


def _add_operations(ops: CounterMetricFamily, give_ups: CounterMetricFamily, name: str,
                    counts: dict[tuple[str, str], int]) -> None:
    """The app's operations in the ledger by kind and outcome, and the supervisor's give-ups."""
    for (kind, outcome), n in sorted(counts.items()):
        ops.add_metric([name, kind, outcome], float(n))
    give_ups.add_metric([name], float(sum(n for (kind, _o), n in counts.items() if kind == GIVE_UP)))


class PlatformCollector(Collector):
    """One scrape: every app's row and last batch, the ledger's operation counts."""

    def __init__(self, settings: Settings, specs: Callable[[], dict[str, Any]]) -> None:
        self.settings, self.specs = settings, specs
        self._pauses: dict[str, ResizePause] = {}  # app -> its last resize's pause, once final

    def collect(self) -> Iterator[Any]:
        from streamops.ledger import Ledger

        g = _gauges()
        ops = CounterMetricFamily("streamops_operations", "operations in the ledger by kind and outcome",
                                  labels=["app", "kind", "outcome"])
        give_ups = CounterMetricFamily("streamops_app_crash_loop_give_ups",
                                       "times the supervisor gave up on the app (crash loop)", labels=["app"])
        try:
            ledger = Ledger.open(self.settings.ledger_db_url)
        except Exception as exc:  # noqa: BLE001 - a scrape must answer; the ledger's outage is its own alert
            log.warning("metrics: ledger unavailable (%s)", str(exc).splitlines()[0][:200])
            return
        try:
            for name, spec in sorted(self.specs().items()):
                self._collect_app(g, name, spec, ledger)
                _add_operations(ops, give_ups, name, ledger.operation_counts(name))
        finally:
            ledger.close()
        yield from g.values()
        yield ops
        yield give_ups

    def _collect_app(self, g: dict[str, GaugeMetricFamily], name: str, spec: Any, ledger: Ledger) -> None:
        """One app's gauges: its Streams row, its last batch, its last resize's pause, its DLQ rate
        and its watermark."""
        from streamops.observe.status import stream_row
        from streamops.observe.streams import last_point

        last = last_point(self.settings, name)
        row = stream_row(self.settings, spec, ledger, last=last)
        _add_row(g, name, row)
        if last is not None:
            _add_last_batch(g, name, last)
        pause = self._pause(name, ledger)
        if pause is not None:
            g["pause"].add_metric([name, pause.strategy], pause.seconds)
        _add_dlq_rates(g["dlq"], self.settings, name)
        if row.watermark is not None:
            _add_watermark(g, name, row.watermark)

    def _pause(self, app: str, ledger: Ledger) -> ResizePause | None:
        """The app's last resize pause (``streams.last_resize_pause``), kept once its window has
        closed: a scrape then reads no progress for it again."""
        from streamops.observe.streams import last_resize, last_resize_pause

        done = self._pauses.get(app)
        if done is not None:
            op = last_resize(ledger, app)
            if op is not None and int(op["id"]) == done.operation_id:
                return done
        pause = last_resize_pause(self.settings, app, ledger)
        if pause is not None and pause.final:
            self._pauses[app] = pause
        return pause


def _add_watermark(g: dict[str, GaugeMetricFamily], name: str, wm: WatermarkStatus) -> None:
    """A stream-time app's watermark, its lag, its holder since when, its idle partitions
    (``observe.watermark``): a value not known yet is left out."""
    if wm.watermark_ms is not None:
        g["wm"].add_metric([name], wm.watermark_ms / 1000)
    if wm.lag_ms is not None:
        g["wm_lag"].add_metric([name], wm.lag_ms / 1000)
    if wm.holder is not None and wm.holder.since_ms is not None:
        g["wm_holder"].add_metric([name, wm.holder.topic, str(wm.holder.partition)], wm.holder.since_ms / 1000)
    for idle in wm.idle:
        g["wm_idle"].add_metric([name, idle.topic, str(idle.partition)], idle.since_ms / 1000)


def registry(settings: Settings, specs: Callable[[], dict[str, Any]]):
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(PlatformCollector(settings, specs))
    return reg


def serve(settings: Settings, specs: Callable[[], dict[str, Any]]) -> tuple[Any, threading.Thread]:
    """Serve ``/metrics`` on ``settings.metrics_port`` in a daemon thread; returns (server, thread)."""
    from prometheus_client import start_http_server

    return start_http_server(settings.metrics_port, addr=settings.host, registry=registry(settings, specs))
