"""Is each component actually serving? Checks speak each service's own protocol."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from streamops.platform.components import Component
from streamops.results import Result
from streamops.settings import Settings

if TYPE_CHECKING:
    from streamops.kafka.config import KafkaConfig


def _get_json(url: str, timeout: float = 2.0) -> Any | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.loads(resp.read().decode())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def kafka_healthy(kafka: KafkaConfig, timeout: float = 3.0) -> bool:
    """A metadata round trip over the Kafka protocol, as a client made with ``kafka``."""
    from confluent_kafka.admin import AdminClient

    try:
        md = AdminClient({"bootstrap.servers": kafka.bootstrap, "socket.timeout.ms": int(timeout * 1000),
                          "log_level": 0, **kafka.librdkafka()}).list_topics(
            timeout=timeout
        )
        return bool(md.brokers)
    except Exception:  # noqa: BLE001 - any client error means "not healthy yet"
        return False


def spark_master_state(settings: Settings) -> dict[str, Any] | None:
    """The standalone master's JSON status (workers, apps), or None if it does not answer."""
    return _get_json(f"http://{settings.host}:{settings.spark_ui_port}/json/")


def airflow_health(settings: Settings) -> dict[str, Any] | None:
    return _get_json(f"{settings.airflow_url}/api/v2/monitor/health")


def check_all(settings: Settings, comps: list[Component], kafka: KafkaConfig | None) -> dict[str, bool]:
    """Health of each named component; shared endpoints are fetched once per call. ``kafka``: the
    platform's client configuration, when the broker is among ``comps``."""
    out: dict[str, bool] = {}
    names = {c.name for c in comps}
    groups = {c.group for c in comps}
    if "kafka" in names:
        if kafka is None:
            raise ValueError("the broker's health needs the platform's Kafka client configuration")
        out["kafka"] = kafka_healthy(kafka)
    if "spark" in groups:
        master = spark_master_state(settings)
        alive = master is not None and master.get("status") == "ALIVE"
        worker_ports = set()
        for w in (master or {}).get("workers", []):
            if w.get("state") == "ALIVE":
                addr = str(w.get("webuiaddress", ""))
                worker_ports.add(addr.rsplit(":", 1)[-1])
        for c in comps:
            if c.name == "spark-master":
                out[c.name] = alive
            elif c.name.startswith("spark-worker-"):
                out[c.name] = alive and str(c.port) in worker_ports
    if "airflow" in groups:
        health = airflow_health(settings)
        for c in comps:
            if c.group != "airflow":
                continue
            if health is None:
                out[c.name] = False
            elif c.name == "airflow-api-server":
                out[c.name] = health.get("metadatabase", {}).get("status") == "healthy"
            else:
                key = c.name.removeprefix("airflow-").replace("-", "_")
                out[c.name] = (health.get(key) or {}).get("status") == "healthy"
    if "supervisor" in names:
        out["supervisor"] = supervisor_healthy(settings)
    return out


def supervisor_healthy(settings: Settings, max_age: float = 15.0) -> bool:
    """Its reconcile loop wrote a heartbeat recently."""
    import json
    import time

    try:
        beat = json.loads((settings.state_dir / "supervisor.json").read_text())["heartbeat"]
    except (FileNotFoundError, ValueError, KeyError):
        return False
    return time.time() - beat < max_age


@dataclass(frozen=True)
class KafkaProbe(Result):
    """The broker at ``bootstrap`` answered a metadata request."""

    bootstrap: str
    healthy: bool


@dataclass(frozen=True)
class SparkProbe(Result):
    """The Spark master at ``master`` is ALIVE with at least one ALIVE worker (their cores)."""

    master: str
    healthy: bool
    alive_workers: int
    cores: int


@dataclass(frozen=True)
class PlatformProbe(Result):
    """``probe``'s answer: one part per service of the data plane, named as the service."""

    kafka: KafkaProbe
    spark: SparkProbe

    def unhealthy(self, services: Iterable[str] = ("kafka", "spark")) -> list[str]:
        """Those of ``services`` (kafka, spark) that did not answer as healthy, in that order."""
        parts: dict[str, KafkaProbe | SparkProbe] = {"kafka": self.kafka, "spark": self.spark}
        return [name for name in services if not parts[name].healthy]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return cls(kafka=KafkaProbe.from_dict(data["kafka"]), spark=SparkProbe.from_dict(data["spark"]))


def probe(settings: Settings) -> PlatformProbe:
    """Reachability of the data plane (broker and Spark master), wherever they run.

    Unlike ``check_all`` this needs no pid files, so it works against external services
    (``STREAMOPS_BOOTSTRAP_SERVERS`` / ``STREAMOPS_SPARK_MASTER``) as well as embedded ones.
    """
    from streamops.kafka.security import kafka_config

    kafka = kafka_config(settings)  # a bad client configuration is its error (exit 2), not "unhealthy"
    master = spark_master_state(settings)
    workers = [w for w in (master or {}).get("workers", []) if w.get("state") == "ALIVE"]
    return PlatformProbe(
        kafka=KafkaProbe(bootstrap=kafka.bootstrap, healthy=kafka_healthy(kafka)),
        spark=SparkProbe(
            master=settings.spark_master_url,
            healthy=master is not None and master.get("status") == "ALIVE" and bool(workers),
            alive_workers=len(workers),
            cores=sum(int(w.get("cores", 0)) for w in workers),
        ),
    )
