"""The platform's health as a task: the first task of a DAG that needs the broker and Spark."""

from __future__ import annotations

from typing import Any

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator


class PlatformProbeOperator(BaseOperator):
    """Fail the task unless the Kafka broker and the Spark master (with workers) answer."""

    template_fields = ("require",)

    def __init__(self, *, require: tuple[str, ...] = ("kafka", "spark"), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.require = require

    def execute(self, context: Any) -> dict[str, Any]:
        from streamops.platform.health import probe
        from streamops_airflow.hooks import StreamopsHook

        unknown = set(self.require) - {"kafka", "spark"}
        if unknown:
            raise AirflowException(f"require: unknown services {sorted(unknown)}; use kafka and/or spark")
        report = probe(StreamopsHook().settings)
        doc = report.to_dict()  # the task's XCom
        self.log.info("platform probe: %s", doc)
        down = report.unhealthy(self.require)
        if down:
            raise AirflowException(f"not healthy: {', '.join(down)} ({doc})")
        return doc
