"""Waking the query for an idle input: ``stream_time.step_clocks`` releases a quiet partition after
a batch, but when the whole input is quiet no batch runs. So the driver, while its query waits,
writes a tick to the app's ticks topic once a watched partition's timeout has passed since it
last moved (its query reads the ticks topic: a batch with the tick runs, and its step releases the
partition). One tick per committed batch at most; never in a batch's transaction (nothing to
commit with it: it is only input)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from streamops import stream_time
from streamops.checkpoints import layout
from streamops.kafka.config import KafkaConfig

log = logging.getLogger(__name__)

#: how often the driver looks for a quiet partition whose timeout passed
IDLE_CHECK_S = 1.0


class IdleWake:
    def __init__(self, kafka: KafkaConfig, ticks_topic: str, timeouts_ms: dict[str, int]) -> None:
        self.kafka, self.topic, self.timeouts_ms = kafka, ticks_topic, timeouts_ms
        self.producer = None
        self.checked = 0.0
        self.woke_after: int | None = None  # the committed batch the last tick followed

    def poll(self, ckpt: Path) -> list[tuple[str, int]]:
        """A tick if a partition is due for release (at most every ``IDLE_CHECK_S``); what was due."""
        if time.monotonic() - self.checked < IDLE_CHECK_S:
            return []
        self.checked = time.monotonic()
        batch = layout.last_committed_batch(ckpt)
        clocks = layout.read_clocks(ckpt, batch) if batch is not None else None
        if clocks is None or batch == self.woke_after:
            return []
        due = stream_time.release_due(clocks.moved, clocks.idle, self.timeouts_ms, int(time.time() * 1000))
        if due:
            self._tick(clocks.watermark)
            self.woke_after = batch
            log.info("input partitions quiet past their idle timeout, a batch releases them: %s",
                     ", ".join(f"{t}[{p}]" for t, p in due))
        return due

    def _tick(self, watermark: int | None) -> None:
        from confluent_kafka import Producer

        if self.producer is None:
            self.producer = Producer({"bootstrap.servers": self.kafka.bootstrap, **self.kafka.librdkafka(),
                                      "enable.idempotence": True})
        self.producer.produce(self.topic, value=str(watermark or 0).encode())
        self.producer.flush(10)

    def close(self) -> None:
        if self.producer is not None:
            self.producer.flush(10)
