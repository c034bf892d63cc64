"""The Spark settings a driver registers with."""

from __future__ import annotations

from pathlib import Path

from streamops.settings import Settings
from streamops.spark.session import session_conf
from streamops.spec import AppSpec


def _spec() -> AppSpec:
    return AppSpec.model_validate({"name": "a", "job": "jobs.a", "input_topics": ["in"], "output_topic": "out",
                                   "parallelism": {"default": 1, "min": 1, "max": 4}})


def test_a_live_resizable_driver_registers_for_its_cap_but_is_started_at_its_target(tmp_path: Path) -> None:
    conf = session_conf(_spec(), Settings(home=tmp_path), parallelism=2, live=True)
    assert conf["spark.cores.max"] == "4"  # the standalone cap is fixed at registration
    # ... while the master launches only the 2 asked for, and nothing else changes that number
    assert conf["spark.dynamicAllocation.enabled"] == "true"
    assert {conf[f"spark.dynamicAllocation.{k}Executors"] for k in ("initial", "min", "max")} == {"2"}
    assert conf["spark.dynamicAllocation.executorIdleTimeout"] == "3650d"


def test_a_driver_that_cannot_resize_live_registers_for_what_it_runs(tmp_path: Path) -> None:
    conf = session_conf(_spec(), Settings(home=tmp_path), parallelism=2, live=False)
    assert conf["spark.cores.max"] == "2" and "spark.dynamicAllocation.enabled" not in conf


def test_every_driver_starts_its_python_workers_through_the_bytecode_daemon(tmp_path: Path) -> None:
    for live in (True, False):
        conf = session_conf(_spec(), Settings(home=tmp_path), parallelism=1, live=live)
        assert conf["spark.python.daemon.module"] == "streamops.spark.pydaemon"
        assert conf["spark.python.unix.domain.socket.enabled"] == "true"


def test_spark_metrics_are_named_after_the_app_not_the_application_id(tmp_path: Path) -> None:
    """A dashboard's query on Spark's own metrics survives a driver's restart (a new application id)."""
    conf = session_conf(_spec(), Settings(home=tmp_path), parallelism=1)
    assert conf["spark.metrics.namespace"] == "streamops.a"
    assert conf["spark.sql.streaming.metricsEnabled"] == "true"


def test_a_driver_binds_to_the_platforms_host_only_for_a_master_on_this_machine() -> None:
    from streamops.app.control import advertised_locally

    assert advertised_locally("local[2]") and advertised_locally("spark://127.0.0.1:7077")
    assert advertised_locally("spark://localhost:7077,localhost:7078")
    # executors elsewhere call the driver back: not at a loopback address
    assert not advertised_locally("spark://spark-master:7077")
    assert not advertised_locally("spark://10.0.0.5:7077")
    assert not advertised_locally("k8s://https://kubernetes.default.svc:443")


def test_the_driver_process_gets_no_loopback_address_for_a_master_elsewhere(tmp_path: Path, monkeypatch) -> None:
    from streamops.lifecycle.driver import driver_env

    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    assert driver_env(Settings(home=tmp_path))["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert "SPARK_LOCAL_IP" not in driver_env(Settings(home=tmp_path, spark_master="spark://spark-master:7077"))
    assert "SPARK_LOCAL_IP" not in driver_env(Settings(home=tmp_path), "spark://spark-master:7077")
