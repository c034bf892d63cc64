"""The platform probe's document (the ``PlatformProbeOperator``'s XCom) keeps its keys, in their
order, now that a typed result carries it (``health.PlatformProbe``): pinned here as literal lists,
written from the dict ``probe`` returned before it was typed."""

from __future__ import annotations

import json

import pytest

from streamops.platform import health
from streamops.settings import Settings

pytestmark = pytest.mark.unit

PROBE = ["kafka", "spark"]
KAFKA = ["bootstrap", "healthy"]
SPARK = ["master", "healthy", "alive_workers", "cores"]


@pytest.mark.parametrize(("master", "healthy", "workers", "cores"), [
    (None, False, 0, 0),
    ({"status": "ALIVE", "workers": []}, False, 0, 0),
    ({"status": "ALIVE", "workers": [{"state": "ALIVE", "cores": 2}, {"state": "DEAD", "cores": 4},
                                     {"state": "ALIVE", "cores": "1"}]}, True, 2, 3),
])
def test_the_probes_document(tmp_path, monkeypatch, master, healthy, workers, cores) -> None:
    monkeypatch.setattr(health, "kafka_healthy", lambda kafka, timeout=3.0: True)
    monkeypatch.setattr(health, "spark_master_state", lambda settings: master)
    settings = Settings(home=tmp_path, bootstrap_servers="b:9092")
    report = health.probe(settings)
    assert (report.kafka.healthy, report.spark.healthy, report.spark.alive_workers) == (True, healthy, workers)
    assert report.unhealthy() == ([] if healthy else ["spark"]) and report.unhealthy(["kafka"]) == []
    out = report.to_dict()
    assert list(out) == PROBE and list(out["kafka"]) == KAFKA and list(out["spark"]) == SPARK
    assert out == {"kafka": {"bootstrap": "b:9092", "healthy": True},
                   "spark": {"master": settings.spark_master_url, "healthy": healthy, "alive_workers": workers,
                             "cores": cores}}
    assert json.loads(json.dumps(out)) == out
    assert health.PlatformProbe.from_dict(json.loads(json.dumps(out))) == report


def test_unhealthy_names_the_services_in_the_order_asked() -> None:
    report = health.PlatformProbe(health.KafkaProbe("b:9092", False), health.SparkProbe("spark://h:7077", False, 0, 0))
    assert report.unhealthy() == ["kafka", "spark"] and report.unhealthy(("spark", "kafka")) == ["spark", "kafka"]
