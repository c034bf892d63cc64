"""Telling a recreated topic partition from the one it replaced.

Offsets mean something only within one life of a partition: deleted and created again, it starts
at 0 with other records. Kafka's topic ids would say so, but the embedded broker reports the
all-zero id for every topic. So a partition's *origin* is recorded instead: its log start offset
and the timestamp of the record there. Retention moves the log start forward; a recreation moves
it back, or keeps it with another first record, or leaves the partition shorter than what was
already read from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamops.kafka.config import KafkaConfig

#: {topic: {partition: [log start offset, high watermark, timestamp of the first record or None]}}
Origins = dict[str, dict[str, list]]


def origins(kafka: KafkaConfig | str, topics: Iterable[str]) -> Origins:
    """Each partition's origin now (reads one record per non-empty partition)."""
    from streamops.kafka.admin import end_offsets
    from streamops.kafka.read import read_topic

    out: Origins = {}
    for topic in sorted(set(topics)):
        marks = end_offsets(kafka, topic)
        firsts = {m.partition(): m.timestamp()[1] for m in
                  read_topic(kafka, topic, end={p: lo + 1 for p, (lo, _hi) in marks.items()})}
        out[topic] = {str(p): [lo, hi, firsts.get(p)] for p, (lo, hi) in marks.items()}
    return out


def recreated(recorded: Origins, current: Origins, read_until: dict[str, dict[str, int]]) -> dict[str, list[str]]:
    """Partitions that are not the ones ``recorded`` (or whose records up to ``read_until`` are
    gone): {topic: [partition, ...]}. Pure."""
    out: dict[str, list[str]] = {}
    for topic, parts in current.items():
        for p, (low, high, first_ts) in parts.items():
            before = recorded.get(topic, {}).get(p)
            shorter = high < int(read_until.get(topic, {}).get(p, 0))
            moved_back = before is not None and low < before[0]
            other_first = (before is not None and low == before[0] and before[2] is not None
                           and first_ts is not None and first_ts != before[2])
            if shorter or moved_back or other_first:
                out.setdefault(topic, []).append(p)
    return out
