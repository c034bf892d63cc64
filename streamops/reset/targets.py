"""Where a reset moves each input partition, as Kafka's application reset tool decides it.

Pure: the caller looks up watermarks, the checkpoint's current offsets and (for a datetime)
``offsets_for_times``; this module turns one reset target into a per-partition move and
refuses anything ambiguous before a file is touched.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

TP = tuple[str, int]
KINDS = ("to_earliest", "to_latest", "to_datetime", "by_duration", "to_offsets", "shift_by")


def _given(v: Any) -> bool:
    return v is not None and v is not False  # --shift-by 0 is given

_ISO_DURATION = re.compile(
    r"^P(?:(?P<weeks>\d+(?:\.\d+)?)W)?(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$")


def parse_iso_duration(text: str) -> timedelta:
    """'PT1H', 'P1DT30M', 'P2W', 'PT90S' -> timedelta. Years and months are refused: they have no
    fixed length, and a reset must know exactly how far back it goes."""
    value = text.strip().upper()
    m = _ISO_DURATION.match(value)
    if not m or value in ("P", "PT") or value.endswith("T"):
        hint = " (years and months have no fixed length: use days, e.g. P30D)" if re.match(r"^P\d+[YM]", value) else ""
        raise ValueError(f"not an ISO 8601 duration: {text!r}; use e.g. PT1H, P1DT12H, PT30M, P7D{hint}")
    parts = {k: float(v) for k, v in m.groupdict().items() if v is not None}
    return timedelta(**parts)


def parse_datetime(text: str) -> datetime:
    """ISO 8601; without a zone it means UTC (said in the plan, so nobody is surprised)."""
    try:
        dt = datetime.fromisoformat(text.strip())  # 3.11 reads a trailing Z
    except ValueError:
        raise ValueError(f"not an ISO 8601 date-time: {text!r}; use e.g. 2026-11-23T08:00:00Z") from None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


class ResetTarget(BaseModel):
    """Exactly one way to choose the new input offsets (the reset tool's scenarios)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    to_earliest: bool = False
    to_latest: bool = False
    to_datetime: datetime | None = None
    by_duration: str | None = None
    to_offsets: dict[str, dict[str, int]] | None = None
    shift_by: int | None = None

    @field_validator("to_datetime", mode="before")
    @classmethod
    def _datetime(cls, v: Any) -> Any:
        return parse_datetime(v) if isinstance(v, str) else v

    @field_validator("by_duration")
    @classmethod
    def _duration(cls, v: str | None) -> str | None:
        if v is not None and parse_iso_duration(v) <= timedelta(0):
            raise ValueError(f"--by-duration must be positive, got {v!r}")
        return v

    @field_validator("to_offsets")
    @classmethod
    def _offsets(cls, v: dict | None) -> dict | None:
        if v is None:
            return v
        if not v:
            raise ValueError("the offsets file names no topic; expected {topic: {partition: offset}}")
        for topic, parts in v.items():
            for p, o in parts.items():
                if not str(p).isdigit():
                    raise ValueError(f"{topic}: partition {p!r} is not a partition number")
                if int(o) < 0:
                    raise ValueError(f"{topic}[{p}]: offset {o} is negative")
        return v

    @model_validator(mode="after")
    def _exactly_one(self) -> ResetTarget:
        chosen = [k for k in KINDS if _given(getattr(self, k))]
        if len(chosen) != 1:
            flags = ", ".join("--" + k.replace("_", "-") for k in chosen) or "none"
            raise ValueError("give exactly one of --to-earliest, --to-latest, --to-datetime, --by-duration, "
                             f"--to-offsets, --shift-by (got {flags})")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if _given(getattr(self, k)))

    def timestamp_ms(self, now: datetime | None = None) -> int | None:
        """The instant a datetime / duration reset goes back to (None for the other kinds)."""
        if self.to_datetime is not None:
            return int(self.to_datetime.timestamp() * 1000)
        if self.by_duration is not None:
            at = (now or datetime.now(UTC)) - parse_iso_duration(self.by_duration)
            return int(at.timestamp() * 1000)
        return None

    def describe(self) -> str:
        k = self.kind
        if k in ("to_earliest", "to_latest"):
            return k.replace("_", "-")
        if k == "to_datetime":
            return f"to-datetime {self.to_datetime.isoformat()}"
        if k == "by_duration":
            return f"by-duration {self.by_duration}"
        if k == "shift_by":
            return f"shift-by {self.shift_by:+d}"
        return "to-offsets"

    def params(self) -> dict[str, Any]:
        """JSON-able, for the ledger."""
        return {k: (v.isoformat() if isinstance(v, datetime) else v)
                for k, v in self.model_dump().items() if _given(v)}


@dataclass(frozen=True)
class PartitionMove:
    topic: str
    partition: int
    current: int | None  # next offset the checkpoint reads (None: no checkpoint / partition not in it)
    target: int
    low: int
    high: int
    clamped: bool = False  # the asked-for offset was outside [low, high]

    @property
    def reprocess(self) -> int:
        """Records read again: from the target up to where the checkpoint already was."""
        return max(0, (self.current if self.current is not None else self.low) - self.target)

    @property
    def skip(self) -> int:
        """Records never processed: from where the checkpoint was up to the target."""
        return max(0, self.target - (self.current if self.current is not None else self.low))

    @property
    def to_process(self) -> int:
        """Records the app reads after the reset (up to today's end of the partition)."""
        return max(0, self.high - self.target)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "reprocess": self.reprocess, "skip": self.skip, "to_process": self.to_process}


def resolve(target: ResetTarget, *, watermarks: dict[TP, tuple[int, int]], current: dict[TP, int | None],
            times: dict[TP, int | None] | None = None) -> list[PartitionMove]:
    """One move per input partition (``watermarks`` lists them all).

    ``times``: for a datetime/duration target, ``offsets_for_times`` per partition (None: no
    record at or after that instant, so the partition moves to its end)."""
    topics = {t for t, _p in watermarks}
    if target.to_offsets is not None:
        unknown = sorted(set(target.to_offsets) - topics)
        if unknown:
            raise ValueError(f"the offsets file names {', '.join(unknown)}, not an input of this app "
                             f"(inputs: {', '.join(sorted(topics))})")
        for topic, parts in target.to_offsets.items():
            missing = sorted(int(p) for p in parts if (topic, int(p)) not in watermarks)
            if missing:
                have = sorted(p for t, p in watermarks if t == topic)
                raise ValueError(f"{topic} has no partition {', '.join(map(str, missing))} (partitions: {have})")
    if target.kind in ("to_datetime", "by_duration") and times is None:
        raise ValueError("a datetime reset needs offsets_for_times per partition")
    moves = []
    for tp in sorted(watermarks):
        lo, hi = watermarks[tp]
        now = current.get(tp)
        base = now if now is not None else lo
        if target.to_earliest:
            want = lo
        elif target.to_latest:
            want = hi
        elif target.shift_by is not None:
            want = base + target.shift_by
        elif target.to_offsets is not None:
            given = target.to_offsets.get(tp[0], {})
            want = int(given[str(tp[1])]) if str(tp[1]) in given else base
        else:
            found = times.get(tp)
            want = hi if found is None or found < 0 else found
        bounded = min(max(want, lo), hi)
        moves.append(PartitionMove(tp[0], tp[1], now, bounded, lo, hi, clamped=bounded != want))
    return moves


def make_target(**fields: Any) -> ResetTarget:
    """A ``ResetTarget`` from CLI / DAG params; invalid params are a usage error naming the flag."""
    from pydantic import ValidationError

    from streamops.exceptions import UsageError

    try:
        return ResetTarget(**{k: v for k, v in fields.items() if _given(v)})
    except ValidationError as exc:
        problems = "; ".join((f"--{str(e['loc'][0]).replace('_', '-')}: " if e["loc"] else "")
                             + str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        raise UsageError(problems) from None
