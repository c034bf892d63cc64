"""An app's batch markers on its compacted commits topic (``spark.commit`` writes them in each
batch's transaction): the latest one says which batch of which checkpoint was last committed, which
every driver start, deploy, restore and check reads before anything else. And the app's one
transaction, which an operation ends when a killed driver left it open."""

from __future__ import annotations

import json
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from streamops.app.topics import task_transactional_id, transactional_id
from streamops.exceptions import StreamopsError
from streamops.kafka.admin import watermark_offsets
from streamops.kafka.config import KafkaConfig


class MarkerReadError(StreamopsError):
    """The app's last batch marker could not be read to the end of its commits topic.

    Operator action: check that the broker is up and reachable (`streamops platform status`), then
    start the app again; nothing was written.
    """


def last_committed_batch(kafka: KafkaConfig, commits_topic: str, app: str, *, config: dict | None = None,
                         timeout: float = 30.0) -> int:
    """Batch id of ``app``'s latest committed marker (-1 if none)."""
    marker = last_marker(kafka, commits_topic, app, config=config, timeout=timeout)
    return -1 if marker is None else int(marker["batch_id"])


def last_marker(kafka: KafkaConfig, commits_topic: str, app: str, *, config: dict | None = None,
                timeout: float = 30.0) -> dict | None:
    """``app``'s latest committed marker (None if none)."""
    c = Consumer({
        "bootstrap.servers": kafka.bootstrap, **kafka.librdkafka(), "group.id": f"_streamops-{app}-marker-reader",
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "enable.partition.eof": True,
        **(config or {}),
    })
    ends = Consumer({"bootstrap.servers": kafka.bootstrap, **kafka.librdkafka(), "group.id": f"_streamops-{app}-marker-reader",
                     "isolation.level": "read_uncommitted", **(config or {})})
    try:
        md = c.list_topics(commits_topic, timeout=timeout).topics.get(commits_topic)
        if md is None or md.error is not None or not md.partitions:
            return None  # no commits topic yet: nothing was ever committed
        last = None
        for p in md.partitions:
            low, high = settled_end(c, ends, TopicPartition(commits_topic, p), timeout)
            if high <= low:
                continue
            # markers are tiny and one per batch; the tail holds the latest (plus control records)
            c.assign([TopicPartition(commits_topic, p, max(low, high - 200))])
            deadline = time.monotonic() + timeout
            done = False
            while not done:
                if time.monotonic() > deadline:  # a partial read could miss the latest marker: never guess
                    raise MarkerReadError(f"{app}: could not read {commits_topic} partition {p} up to its end "
                                          f"(offset {high}) in {timeout:.0f} s; is the broker reachable?")
                msgs = c.consume(1000, timeout=1.0)
                for m in msgs:
                    if m.error():
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            done = True
                            continue
                        raise KafkaException(m.error())
                    if m.key() == app.encode():
                        last = json.loads(m.value())  # in offset order: the latest wins
            c.unassign()
        return last
    finally:
        c.close()
        ends.close()


#: how long a marker read waits for a transaction that was open when it looked to be decided
SETTLE_S = 5.0


def settled_end(committed: Consumer, uncommitted: Consumer, tp: TopicPartition, timeout: float,
                settle: float = SETTLE_S) -> tuple[int, int]:
    """(low, end) of ``tp`` for a read_committed reader, once the transactions open when asked are decided.

    Why: a transaction's commit returns before its commit marker is in the partition (the
    coordinator writes it next), and until then a read_committed reader's end (the last stable
    offset) stops before the transaction's records: a marker committed a moment ago would read as
    absent. So the end is asked again until it reaches the partition's high watermark as it was when
    first asked, for up to ``settle`` seconds; a transaction still open after that is undecided (a
    dead driver's, which the next start aborts), and what is committed before it is the answer."""
    _low, high_watermark = watermark_offsets(uncommitted, tp, timeout)
    deadline = time.monotonic() + settle
    while True:
        low, end = watermark_offsets(committed, tp, timeout)
        if end >= high_watermark or time.monotonic() > deadline:
            return low, end
        time.sleep(0.02)


def abort_open_transaction(kafka: KafkaConfig, app: str, *, tasks: int = 0, timeout: float = 60.0) -> None:
    """Abort a transaction a dead driver of ``app`` left open, as a starting driver does; ``tasks``:
    also those of its tasks' writers (``commit_on: executors``: ``streamops-APP-p0`` ... ``-p{tasks-1}``),
    as their next tasks would.

    Until then it holds back every committed record after it from read_committed readers (what an
    operation saves, what it checks). Only while no driver of ``app`` runs: it fences the one that does.
    """
    ids = [transactional_id(app), *(task_transactional_id(app, p) for p in range(tasks))]
    for tid in ids:
        producer = Producer({"bootstrap.servers": kafka.bootstrap, **kafka.librdkafka(),
                             "transactional.id": tid, "enable.idempotence": True})
        producer.init_transactions(timeout)
        producer.flush(timeout)
