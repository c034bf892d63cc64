"""What a sample's stream time does to an app's watermark, for ``app lint``: which input partition
holds the watermark, how far it lags the newest stream time, and what the spec's ``idle_timeouts``
change (``stream_time.step_clocks``). A partition with no event in the sample (a quiet price topic,
a partition no key hashes to) holds the watermark at none: no timer, window or join closes by it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streamops import stream_time
from streamops.job import Job, Record, Reject, key_or_reject
from streamops.state.oracle import fold_input
from streamops.stream_time import Partition


@dataclass(frozen=True)
class SampleWatermark:
    watermark: int | None
    newest: int | None
    #: the partition with the smallest stream time (the first showing no event, if one shows none)
    holder: Partition | None
    #: the holder shows no event in the sample
    holder_empty: bool
    #: with the holder released by an idle timeout: the watermark, and the outputs that adds
    released_watermark: int | None = None
    released_outputs: int = 0
    idle_timeouts: Mapping[str, str] | None = None

    def describe(self) -> str:
        if self.holder is None:
            return "no input partition"
        where = f"{self.holder[0]}[{self.holder[1]}]"
        if self.holder_empty:
            text = f"none: {where} shows no event, so no timer, window or join closes by the watermark"
        else:
            text = (f"{stream_time.utc(self.watermark or 0)}, {stream_time.span((self.newest or 0) - (self.watermark or 0))}"
                    f" behind the newest stream time, held by {where}")
        timeout = (self.idle_timeouts or {}).get(self.holder[0])
        if timeout is None:
            hint = (f"; a partition that stays quiet holds it for good (idle_timeouts: {{{self.holder[0]}: ...}} "
                    f"releases it, docs/writing-a-job.md, \"Idle inputs\")") if self.holder_empty else ""
            return f"watermark {text}{hint}"
        released = "none" if self.released_watermark is None else stream_time.utc(self.released_watermark)
        return (f"watermark {text}; with idle_timeouts {self.holder[0]}: {timeout}, once {where} is quiet that "
                f"long the watermark is {released} and {self.released_outputs} more output "
                f"record(s) are written (results then depend on when records arrive)")


def sample_watermark(job_cls: type[Job], records: Sequence[Record], partitions: Sequence[Partition],
                     idle_timeouts: Mapping[str, str] | None = None) -> SampleWatermark:
    """The sample's watermark over every partition of the app's inputs (``partitions``)."""
    job = job_cls()
    clocks: dict[Partition, int] = {}  # each partition's stream time: its largest accepted event time
    for r in records:
        parsed = job.parse(r)
        ts = None if isinstance(parsed, Reject) else stream_time.event_time(job, parsed, r.timestamp_ms)
        if ts is not None and not isinstance(key_or_reject(job, parsed), Reject):
            stream_time.advance(clocks, (r.topic, r.partition), ts)
    if not partitions:
        return SampleWatermark(None, None, None, False, idle_timeouts=idle_timeouts)
    empty = [p for p in partitions if p not in clocks]
    holder = empty[0] if empty else min(partitions, key=lambda p: (clocks[p], p))
    watermark = None if empty else clocks[holder]
    newest = max(clocks.values()) if clocks else None
    out = SampleWatermark(watermark, newest, holder, bool(empty), idle_timeouts=idle_timeouts)
    if (idle_timeouts or {}).get(holder[0]) is None:
        return out
    others = [clocks.get(p) for p in partitions if p != holder]
    released = None if not others or any(st is None for st in others) else min(others)
    base = fold_input(job_cls, records, partitions, watermark=watermark)
    more = fold_input(job_cls, records, partitions, watermark=released)
    return SampleWatermark(watermark, newest, holder, bool(empty), released, len(more.output) - len(base.output),
                           idle_timeouts)
