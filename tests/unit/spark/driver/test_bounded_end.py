"""A bounded run's end (``--exit-at-end``, a reprocess) is read from the checkpoint."""

from __future__ import annotations

from streamops.spark.driver.loop import _reached

TARGETS = {"in": {"0": 10, "1": 0}}


def test_reached_when_every_target_partition_is_read_up_to_its_target() -> None:
    assert _reached({("in", 0): 10, ("in", 1): 0}, TARGETS)
    assert _reached({("in", 0): 12, ("in", 1): 3, ("ticks", 0): 5}, TARGETS)  # past it, other topics aside
    assert not _reached({("in", 0): 9, ("in", 1): 0}, TARGETS)


def test_a_partition_never_read_counts_from_zero() -> None:
    """An empty partition (target 0) is reached before any batch; a partition with records is not."""
    assert _reached({("in", 0): 10}, TARGETS)
    assert not _reached({}, TARGETS)
    assert _reached({}, {"in": {"0": 0, "1": 0}})
