"""Free port blocks for isolated platforms (tests, benchmarks): below the ephemeral range, free on every interface."""

from __future__ import annotations

import random
import socket
from contextlib import ExitStack
from pathlib import Path

SPAN = 3  # each port comes with the next SPAN-1 free too: worker UI ports are consecutive from a base


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def _candidates() -> list[int]:
    """Ports below the kernel's ephemeral range, so no outgoing connection grabs one between
    picking it and the service binding it (bind(0) hands out ephemeral ports: that race failed CI)."""
    lo, _hi = _ephemeral_range()
    top = lo - SPAN if lo > 12_000 + SPAN else 30_000
    pool = list(range(10_000, top))
    random.shuffle(pool)
    return pool


def free_ports(n: int) -> list[int]:
    """``n`` ports, each followed by SPAN-1 more, all free right now on every interface."""
    with ExitStack() as stack:
        ports: list[int] = []
        taken: set[int] = set()
        for base in _candidates():
            if len(ports) == n:
                break
            block = range(base, base + SPAN)
            if taken.intersection(block):
                continue
            try:
                for p in block:
                    s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    s.bind(("0.0.0.0", p))
            except OSError:
                continue
            ports.append(base)
            taken.update(block)
        if len(ports) < n:
            raise RuntimeError(f"found only {len(ports)} of {n} free port blocks")
        return ports
