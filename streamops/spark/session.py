"""SparkSession for streaming apps: RocksDB state with changelog checkpointing, small shuffles."""

from __future__ import annotations

import os
import sys

from streamops.host import jars
from streamops.settings import Settings
from streamops.spark import pydaemon
from streamops.spark.checkpoint_files import checkpoint_files_conf
from streamops.spark.kubernetes import is_kubernetes, kubernetes_conf
from streamops.spec import AppSpec

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: where the driver's UI serves Spark's own metrics in Prometheus' format (``session_conf``)
SPARK_PROMETHEUS_PATH = "/metrics/prometheus"


def spark_metrics_namespace(app: str) -> str:
    """The root of the names of the app's Spark metrics (``spark.metrics.namespace``; Spark's
    Prometheus servlet turns what is not a letter or digit into ``_``)."""
    return f"streamops.{app}"


def session_conf(spec: AppSpec, settings: Settings, *, parallelism: int | None = None,
                 live: bool = False, master: str | None = None) -> dict[str, str]:
    """The Spark settings every streaming app runs with (also passed to spark-submit as --conf).

    ``live``: the master can resize the running app, so register for the spec's maximum (the
    standalone cap is fixed at registration) and let the driver hold the executor count.
    ``master``: a ``k8s://`` one adds the executor pods' settings (``spark.kubernetes``).
    """
    cores = parallelism or spec.parallelism.default
    extra: dict[str, str] = {}
    if live:
        from streamops.spark.warmup_plugin import plugin_conf

        target, cores = cores, max(cores, spec.parallelism.max)
        # new executors are warmed up before the query uses them; the first ones are only the target's
        extra = {**plugin_conf(), **start_at(target)}
    conf = {
        # executors import the job's module (``jobs.*``) from the checkout
        "spark.executorEnv.PYTHONPATH": str(settings.repo),
        "spark.task.maxFailures": "4",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # state partitions are fixed by the first checkpoint; this only applies to new ones
        "spark.sql.shuffle.partitions": str(spec.state_partitions),
        "spark.sql.streaming.minBatchesToRetain": "100",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.adaptive.enabled": "false",  # AQE does not apply to streaming; keep plans stable
        "spark.executor.cores": "1",
        "spark.cores.max": str(cores),
        "spark.executor.memory": "1g",
        "spark.ui.showConsoleProgress": "false",
        # Spark's own metrics beside the platform's (observe.metrics): per query its rates, latency
        # and state (Dropwizard gauges from each batch's progress, no extra work in a batch), served
        # with the driver's and executors' metrics in Prometheus' format by the driver's UI
        # (driver.report.prometheus_url; the executors' under /metrics/executors/prometheus/)
        "spark.sql.streaming.metricsEnabled": "true",
        "spark.ui.prometheus.enabled": "true",
        "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
        "spark.metrics.conf.*.sink.prometheusServlet.path": SPARK_PROMETHEUS_PATH,
        # named after the app, not the application id each driver gets: a dashboard's query stays
        # the same across restarts and resizes (metrics_streamops_APP_driver_spark_streaming_APP_...)
        "spark.metrics.namespace": spark_metrics_namespace(spec.name),
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        **jars.spark_conf(),  # Spark's own Kafka connector, on the driver and every executor
        **pydaemon.conf(),  # Python workers import the installed pyspark (bytecode), not pyspark.zip
        **checkpoint_files_conf(),  # checkpoint files written without a shell command per file
        **extra,
    }
    if master is not None and is_kubernetes(master):
        conf |= kubernetes_conf(spec, settings)
    if spec.commit_on == "executors":  # the tasks' transactional writer, beside the connector's Kafka client
        from streamops.spark.kafka_writer import writer_conf

        conf = writer_conf(conf)
    return conf


def start_at(executors: int) -> dict[str, str]:
    """Settings that make the cluster launch ``executors`` at the start, not ``spark.cores.max``.

    A standalone master launches executors up to the app's cap as soon as it registers, long
    before the driver can ask for fewer: a driver at 1 of 4 started three executor JVMs only to
    remove them. With dynamic allocation on, the master starts the app at none and Spark's
    allocation manager asks for ``initialExecutors``. With min = max = initial and no idle
    timeout it never asks for another number or removes an executor, so the driver alone holds
    the size afterwards (``driver.live.ExecutorScaler``).
    """
    n = str(executors)
    return {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.initialExecutors": n,
        "spark.dynamicAllocation.minExecutors": n,
        "spark.dynamicAllocation.maxExecutors": n,
        "spark.dynamicAllocation.executorIdleTimeout": "3650d",
        "spark.dynamicAllocation.shuffleTracking.enabled": "true",
    }


def build_session(spec: AppSpec, settings: Settings, *, master: str | None = None,
                  parallelism: int | None = None, extra: dict[str, str] | None = None):
    """Get or create the app's SparkSession (master: spec, then the platform's standalone master)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from streamops.app.control import advertised_locally, supports_live

    master = master or spec.spark_master or settings.spark_master_url
    if advertised_locally(master):
        os.environ.setdefault("SPARK_LOCAL_IP", settings.host)
    from streamops.spark.security import use_for_driver

    use_for_driver(settings, master)  # the cluster's secret, from a file: not on the JVM's command line
    builder = SparkSession.builder.appName(f"streamops:{spec.name}").master(master)
    conf = session_conf(spec, settings, parallelism=parallelism, live=supports_live(master), master=master)
    for key, value in {**conf, **(extra or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
