"""After a rewind, records tied to an input record already emitted are not written again."""

from __future__ import annotations

from streamops.spark.commit import OutRecord, already_emitted, merge_max


def _dlq(topic: str, partition: int, offset: int) -> OutRecord:
    return OutRecord("dlq", b"k", b"v", (("streamops.source.topic", topic.encode()),
                                         ("streamops.source.partition", str(partition).encode()),
                                         ("streamops.source.offset", str(offset).encode())))


def test_already_emitted_compares_the_input_offset() -> None:
    until = {"in": {"0": 100, "1": 5}}
    assert already_emitted(_dlq("in", 0, 99), until)
    assert not already_emitted(_dlq("in", 0, 100), until)
    assert not already_emitted(_dlq("in", 2, 0), until)  # partition never emitted
    assert not already_emitted(_dlq("other", 0, 0), until)
    assert not already_emitted(OutRecord("out", b"k", b"v", (("streamops.batch_id", b"3"),)), until)  # upserts
    assert not already_emitted(_dlq("in", 0, 1), {})


def test_merge_max_keeps_the_furthest_offset_per_partition() -> None:
    assert merge_max({"in": {"0": 10, "1": 7}}, {"in": {"0": 8, "2": 3}, "b": {"0": 1}}) == \
        {"in": {"0": 10, "1": 7, "2": 3}, "b": {"0": 1}}


def test_a_recreated_input_partition_is_told_from_the_one_it_replaced() -> None:
    from streamops.kafka.identity import recreated

    recorded = {"in": {"0": [0, 900, 1000], "1": [0, 900, 1000], "2": [50, 900, 1000], "3": [0, 0, None]}}
    read = {"in": {"0": 900, "1": 900, "2": 900, "3": 0}}
    same = {"in": {"0": [0, 950, 1000], "1": [120, 990, 5000], "2": [50, 999, 1000], "3": [0, 10, 7000]}}
    assert recreated(recorded, same, read) == {}  # more records; retention moved 1's start forward
    again = {"in": {"0": [0, 300, 1000],  # shorter than what was read: whatever its first record
                    "1": [0, 2000, 9000],  # as long, but another first record
                    "2": [0, 2000, 1000],  # the log start moved back
                    "3": [0, 10, 7000]}}
    assert recreated(recorded, again, read) == {"in": ["0", "1", "2"]}
    assert recreated({}, {"in": {"0": [0, 5, 1]}}, {}) == {}  # nothing recorded yet: nothing to tell
