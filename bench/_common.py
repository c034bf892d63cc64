"""Shared helpers for benchmarks: free ports, isolated settings, summary tables."""

from __future__ import annotations

import socket
import statistics
from contextlib import ExitStack
from pathlib import Path

from streamops.settings import Settings, default_repo


def free_ports(n: int) -> list[int]:
    with ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < n:
            s = stack.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
            if all(abs(p - q) > 1 for q in ports):
                ports.append(p)
        return ports


def isolated_settings(home: Path) -> Settings:
    p = free_ports(8)
    return Settings(repo=default_repo(), home=home, kafka_port=p[0], spark_master_port=p[1],
                    spark_ui_port=p[2], spark_rest_port=p[3], spark_worker_ui_port=p[4],
                    airflow_port=p[5], airflow_worker_log_port=p[6], airflow_trigger_log_port=p[7])


def summary(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A Markdown table (pastes straight into docs/benchmarks.md)."""
    cells = [[str(c) for c in r] for r in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    return "\n".join([fmt(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *(fmt(r) for r in cells[1:])])
