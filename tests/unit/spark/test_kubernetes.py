"""The settings a driver adds on a ``k8s://`` master are the ones docs/production.md shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamops.exceptions import ConfigError
from streamops.settings import Settings
from streamops.spark.kubernetes import POD_IP, POD_NAME, kubernetes_conf, pod_prefix
from streamops.spark.session import session_conf
from streamops.spec import AppSpec

REPO = Path(__file__).resolve().parents[3]
PAGE = REPO / "docs" / "production.md"
SPEC = AppSpec.model_validate({"name": "user_activity", "job": "jobs.user_activity", "input_topics": ["in"],
                               "output_topic": "out", "parallelism": {"default": 2, "min": 1, "max": 4}})
DOCS_POD = {POD_IP: "10.42.0.17", POD_NAME: "streamops-supervisor-6d5f7b9c4-x2k8q"}


def _documented() -> list[tuple[str, str]]:
    block = re.search(r"<!-- rendered: kubernetes_conf -->\n```properties\n(.*?)```\n<!-- /rendered -->",
                      PAGE.read_text(), re.DOTALL)
    assert block, f"{PAGE} has no rendered kubernetes_conf block"
    return [tuple(line.split(" ", 1)) for line in block.group(1).splitlines()]


def _settings(**more) -> Settings:
    return Settings(**{"home": Path("/opt/streamops/state"), "spark_image": "streamops:0.1.0",
                       "spark_master": "k8s://https://kubernetes.default.svc:443", **more})


def test_the_rendering_is_the_one_the_production_page_documents() -> None:
    assert list(kubernetes_conf(SPEC, _settings(), DOCS_POD).items()) == _documented()


def test_a_driver_on_kubernetes_gets_them_over_the_common_settings_and_a_standalone_one_does_not() -> None:
    s = _settings()
    on_k8s = session_conf(SPEC, s, parallelism=2, live=True, master=s.spark_master_url)
    assert on_k8s["spark.kubernetes.container.image"] == "streamops:0.1.0"
    assert on_k8s["spark.dynamicAllocation.initialExecutors"] == "2"  # live resize: executor pods, pinned
    assert on_k8s["spark.kubernetes.executor.volumes.persistentVolumeClaim.streamops-state.mount.path"] == \
        "/opt/streamops/state"
    standalone = session_conf(SPEC, s, parallelism=2, live=True, master="spark://m:7077")
    assert not [k for k in standalone if k.startswith("spark.kubernetes.")]
    assert "spark.submit.deployMode" not in standalone


def test_without_an_image_a_kubernetes_driver_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match="STREAMOPS_SPARK_IMAGE"):
        kubernetes_conf(SPEC, _settings(spark_image=None), {})


def test_outside_a_pod_the_driver_address_is_left_to_spark_and_names_are_rfc_1123() -> None:
    conf = kubernetes_conf(SPEC, _settings(k8s_namespace="data-eng"), {})
    assert conf["spark.kubernetes.namespace"] == "data-eng"
    assert not {"spark.driver.host", "spark.kubernetes.driver.pod.name"} & set(conf)
    assert pod_prefix("Orders_Total.v2") == "streamops-orders-total-v2"
    with pytest.raises(ValueError, match="k8s_namespace"):
        _settings(k8s_namespace="Not_A_Namespace")
