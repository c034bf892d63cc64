"""The platform probe's document (the ``PlatformProbeOperator``'s XCom) keeps its keys, in their
order, whatever type carries it: pinned here as literal lists, written from the dict ``probe``
returned before it was typed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamops.platform import health
from streamops.settings import Settings

pytestmark = pytest.mark.unit

PROBE = ["kafka", "spark"]
KAFKA = ["bootstrap", "healthy"]
SPARK = ["master", "healthy", "alive_workers", "cores"]


def _doc(result: Any) -> dict[str, Any]:
    return result.to_dict() if hasattr(result, "to_dict") else result


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
    out = _doc(health.probe(settings))
    assert list(out) == PROBE and list(out["kafka"]) == KAFKA and list(out["spark"]) == SPARK
    assert out == {"kafka": {"bootstrap": "b:9092", "healthy": True},
                   "spark": {"master": settings.spark_master_url, "healthy": healthy, "alive_workers": workers,
                             "cores": cores}}
    assert json.loads(json.dumps(out)) == out
