"""Shared helpers for benchmarks: free ports, isolated settings, summary tables."""

from __future__ import annotations

import contextlib
import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path

from streamops.platform.ports import free_ports
from streamops.settings import Settings, default_repo


def isolated_settings(home: Path) -> Settings:
    p = free_ports(9)
    return Settings(repo=default_repo(), home=home, kafka_port=p[0], spark_master_port=p[1],
                    spark_ui_port=p[2], spark_worker_ui_port=p[3],
                    airflow_port=p[4], airflow_worker_log_port=p[5], airflow_trigger_log_port=p[6],
                    kafka_controller_port=p[7], metrics_port=p[8])


def summary(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A Markdown table (pastes straight into docs/benchmarks.md)."""
    cells = [[str(c) for c in r] for r in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    return "\n".join([fmt(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *(fmt(r) for r in cells[1:])])


def driver_module(checkout: Path | None) -> str:
    """The module that runs an app's driver in ``checkout`` (None: this tree): ``streamops.spark.driver``,
    or ``streamops.spark.app`` in a revision from before the driver package (issue 38)."""
    if checkout is None or (checkout / "streamops" / "spark" / "driver" / "__main__.py").exists():
        return "streamops.spark.driver"
    return "streamops.spark.app"


@contextlib.contextmanager
def baseline_tree(rev: str, into: Path, *, jars: bool = False) -> Iterator[Path | None]:
    """A git worktree of ``rev`` at ``into`` for the block (removed after it); None for ``rev`` ''.
    ``jars``: with this checkout's ``.jars`` linked in (the pinned jars: the same files), for a
    driver that finds its jars by its own checkout."""
    if not rev:
        yield None
        return
    repo = Path(__file__).resolve().parent.parent
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "-q", str(into), rev], check=True)
    if jars:
        (into / ".jars").symlink_to(repo / ".jars")
    try:
        yield into
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(into)], check=False)
