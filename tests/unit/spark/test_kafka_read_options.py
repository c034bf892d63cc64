"""The source options ``read_kafka`` adds to a caller's: headers, read_committed and the poll size,
each only where the caller did not set it."""

from __future__ import annotations

from streamops.kafka.config import KafkaConfig
from streamops.spark.kafka_io import MAX_POLL_RECORDS, _with_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


def test_the_defaults_a_read_gets() -> None:
    out = _with_options(dict(BASE), None, KafkaConfig.plaintext("127.0.0.1:9092"))
    assert out == {**BASE, "includeHeaders": "true", "kafka.isolation.level": "read_committed",
                   "kafka.max.poll.records": str(MAX_POLL_RECORDS)}
    assert MAX_POLL_RECORDS > 500  # the Java client's own default, which halved a streaming read's rate


def test_a_callers_poll_size_wins_in_any_case() -> None:
    out = _with_options(dict(BASE), {"kafka.MAX.POLL.RECORDS": 7}, KafkaConfig.plaintext("127.0.0.1:9092"))
    assert out["kafka.MAX.POLL.RECORDS"] == "7"
    assert "kafka.max.poll.records" not in out
