"""The checkpoint's ``clocks/N`` files (jobs with stream time): read back as written, the newest at
or before a batch, and no more than ``CLOCKS_RETAINED`` kept (one per batch, for ever otherwise)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamops.checkpoints import layout

pytestmark = pytest.mark.unit


def test_clocks_read_back_and_only_the_last_ones_are_kept(tmp_path: Path) -> None:
    parts = [("in", 0), ("in", 1)]
    assert layout.read_clocks(tmp_path, 5) is None
    for b in range(layout.CLOCKS_RETAINED + 20):
        layout.write_clocks(tmp_path, layout.Clocks(b, {("in", 0): 1000 + b}, None), parts)
    last = layout.CLOCKS_RETAINED + 19
    got = layout.read_clocks(tmp_path, last)
    assert got == layout.Clocks(last, {("in", 0): 1000 + last}, None)  # partition 1 has shown nothing
    assert sorted(int(p.name) for p in (tmp_path / "clocks").iterdir()) == list(range(20, last + 1))
    (tmp_path / "clocks" / "50").unlink()  # a batch without its file reads the one before it
    assert layout.read_clocks(tmp_path, 50).batch_id == 49
    assert layout.read_clocks(tmp_path, 10) is None  # older than any kept


def test_idleness_reads_back_from_the_file_and_from_the_marker(tmp_path: Path) -> None:
    """Released partitions, when each partition last moved and the raises go with the clocks: into the
    next batch's file, and through the marker into a checkpoint rebuild-state seeds."""
    clocks = layout.Clocks(7, {("in", 0): 5000, ("prices", 0): 4000}, 4000, idle={("prices", 0): 1_700_000_000_000},
                           moved={("in", 0): (12, 1_700_000_001_000), ("prices", 0): (3, 1_699_999_000_000)},
                           raises={("prices", 0): [(1, 2500), (3, 3900)]})
    layout.write_clocks(tmp_path, clocks, [("in", 0), ("prices", 0)])
    assert layout.read_clocks(tmp_path, 7) == clocks
    marker = layout.clocks_marker(clocks, 3999)
    assert marker["spark_watermark"] == 3999
    assert layout.marker_clocks(marker, 7) == clocks
    plain = layout.Clocks(7, {("in", 0): 5000}, None)  # no idleness: the marker is as it always was
    assert layout.clocks_marker(plain, None) == {"clocks": [["in", 0, 5000]], "watermark": None, "spark_watermark": None}
