"""Output, changelog and DLQ record encoding (``streamops.spark.query.records``)."""

from __future__ import annotations


def test_an_oversized_dlq_copy_is_cut_to_fit_one_kafka_message() -> None:
    import json

    from streamops.app.topics import H_TRUNCATED
    from streamops.spark.query.records import DLQ_MAX_BYTES, dlq_entry, dlq_record

    small = dlq_record("in.dlq", b"k", b"not json", "invalid_json", "in", 2, 17, 5)
    assert small.value == b"not json" and H_TRUNCATED not in dict(small.headers)
    big = dlq_record("in.dlq", b"k" * 10, b"x" * (3 * DLQ_MAX_BYTES), "invalid_json", "in", 2, 18, 5)
    assert big.value == b"x" * DLQ_MAX_BYTES and big.key == b"k" * 10
    assert json.loads(dict(big.headers)[H_TRUNCATED]) == {"key_bytes": 10, "value_bytes": 3 * DLQ_MAX_BYTES}
    assert dlq_entry(list(big.headers)) == (("in", 2, 18), "invalid_json")  # still found where it came from
