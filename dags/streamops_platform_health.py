"""Platform health: is the data plane (Kafka broker, Spark master and workers) reachable?"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag
from streamops_airflow.operators import PlatformProbeOperator


@dag(
    dag_id="streamops_platform_health",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    is_paused_upon_creation=False,  # triggerable through the REST API from the first start
    tags=["streamops", "platform"],
    default_args={"retries": 1, "retry_delay": timedelta(seconds=10)},
    doc_md=__doc__ + "\n\nTrigger it from the UI to check the broker and the Spark cluster.",
)
def streamops_platform_health() -> None:
    PlatformProbeOperator(task_id="probe")


streamops_platform_health()
