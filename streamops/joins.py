"""Several inputs per key in event-time order, and the joins built on it: a stream joined to a
table as of each stream event's time (the temporal, or versioned-table, join) and two streams
joined within a time bound (the interval join).

Why an order at all: a key's records from several topics (or partitions) have no order Kafka
keeps, so "the price in force when the order was placed" depended on how the input was cut into
batches. Here a key's events are processed in a fixed order, identical in Spark and in
``check``'s fold whatever the cut: by **event time**, ties broken by the input's **role** (a
table before a stream, a left input before a right one), then by the topic's position in
``inputs``, then partition, then offset.

How: the job's events wait in its state (``buffer``) until the watermark has passed them by more
than ``grace_ms``, which no event still to come can precede (one that would is ``late``); then
they are processed in that order (``Job.fire_timers_by = "watermark"``: timers fire only by the
watermark, ``streamops.stream_time``). So the state holds the grace period's events plus what the
join needs: for a table join only the version in force (later versions are still buffered), for
an interval join the events within the bound.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from streamops.job import Job, JobDeclarationError
from streamops.stream_time import Timed

State = dict[str, Any]


def _descending(entry: list) -> tuple:
    return (-entry[0], -entry[1], -entry[2], -entry[3])


class OrderedJob(Job[Any, State]):
    """A job whose events are processed per key in event-time order (module docstring): declare
    ``inputs`` (topic -> role), ``parse``, ``key``, ``timestamp``, ``grace_ms`` and ``process``."""

    fire_timers_by = "watermark"
    grace_ms: ClassVar[int | None] = 0
    #: topic -> role, in tie-break order within a role
    inputs: ClassVar[Mapping[str, str]]
    #: the roles in tie-break order (the first goes first at equal event time)
    roles: ClassVar[tuple[str, ...]]

    def start(self, key: str) -> State:
        """What the job keeps besides the buffer, for a new key."""
        return {}

    def process(self, key: str, state: State, role: str, event: Any, ts: int) -> State:
        """``state`` after one event, in event-time order."""
        raise NotImplementedError

    def released(self, key: str, state: State, upto: int) -> State:
        """After every event up to ``upto`` was processed: drop what no later event needs."""
        return state

    # the job ------------------------------------------------------------------------------------
    @classmethod
    def check_declaration(cls) -> None:
        inputs = getattr(cls, "inputs", None)
        if not isinstance(inputs, Mapping) or not inputs:
            raise JobDeclarationError(f"{cls.__name__}.inputs must map each input topic to its role, one of "
                                      f"{', '.join(cls.roles)}")
        bad = {t: r for t, r in inputs.items() if r not in cls.roles}
        if bad:
            raise JobDeclarationError(f"{cls.__name__}.inputs: roles must be one of {', '.join(cls.roles)}, got {bad}")
        if not cls.overrides("timestamp"):
            raise JobDeclarationError(f"{cls.__name__} does not define timestamp(event): events are ordered by it")

    def initial(self, key: str) -> State:
        return {"buffer": [], **self.start(key)}

    def _rank(self, topic: str) -> int:
        role = self.inputs[topic]
        return self.roles.index(role) * 1000 + list(self.inputs).index(topic)

    # the buffer is sorted latest first, so that releasing pops from its end
    def update(self, key: str, state: State, events: Sequence[Any]) -> State:
        buffer = list(state["buffer"])
        for item in events:
            if not isinstance(item, Timed):
                raise TypeError(f"{type(self).__name__}.update takes stream_time.Timed items (fire_timers_by = "
                                f"'watermark'), got {type(item).__name__}")
            topic, partition, offset = item.where
            if topic not in self.inputs:
                raise JobDeclarationError(f"{type(self).__name__}: an event from {topic!r}, which inputs does not "
                                          f"name ({', '.join(self.inputs)})")
            entry = [item.ts, self._rank(topic), partition, offset, item.event]
            bisect.insort(buffer, entry, key=_descending)
        return {**state, "buffer": buffer}

    def timers(self, key: str, state: State) -> Iterable[int]:
        # the earliest buffered event is released once the watermark is past it by more than grace
        return [state["buffer"][-1][0] + (self.grace_ms or 0) + 1] if state["buffer"] else []

    def on_timer(self, key: str, state: State, ts: int) -> State:
        """Processes the buffered events up to ``ts - grace - 1``, in order. (Changes ``state`` in
        place: the platform never uses a state again that it handed to ``on_timer`` or ``update``.)"""
        upto = ts - (self.grace_ms or 0) - 1
        buffer = state["buffer"]
        topics = list(self.inputs)
        while buffer and buffer[-1][0] <= upto:
            ets, rank, _p, _o, event = buffer.pop()
            state = self.process(key, state, self.inputs[topics[rank % 1000]], event, ets)
        return self.released(key, state, upto)


class TableJoin(OrderedJob):
    """Each event of the ``stream`` input joined with the ``table`` input's latest event for the key
    as of the stream event's time. Declare ``inputs = {"orders": "stream", "prices": "table"}``,
    ``join`` and ``output_key``. The state keeps the version in force and the buffer."""

    roles = ("table", "stream")

    def join(self, key: str, event: Any, table: Any | None) -> Any:
        """The output value for a stream event given the table's event in force (None: none yet);
        None writes nothing."""
        raise NotImplementedError

    def output_key(self, key: str, event: Any) -> str:
        raise NotImplementedError

    def start(self, key: str) -> State:
        return {"table": None, "out": {}}

    def process(self, key: str, state: State, role: str, event: Any, ts: int) -> State:
        if role == "table":
            return {**state, "table": [ts, event]}
        value = self.join(key, event, None if state["table"] is None else state["table"][1])
        if value is not None:
            state["out"][self.output_key(key, event)] = value  # in place: see OrderedJob.on_timer
        return state

    def emit(self, key: str, state: State) -> Mapping[str, Any]:
        return state["out"]

    def expire(self, key: str, state: State) -> State | None:
        """Written joins leave the state; the version in force and the buffer stay (a key with
        neither is deleted: its state is the initial one)."""
        if state["table"] is None and not state["buffer"]:
            return None
        return {**state, "out": {}}


class IntervalJoin(OrderedJob):
    """Each ``left`` event joined with every ``right`` event of the key whose time is within
    ``[left - before_ms, left + after_ms]``. Declare ``inputs = {"orders": "left", "payments":
    "right"}``, the bounds, ``join`` and ``output_key``. The state keeps each side's events until
    no later event can fall within their bound."""

    roles = ("left", "right")
    before_ms: ClassVar[int] = 0
    after_ms: ClassVar[int] = 0

    def join(self, key: str, left: Any, right: Any) -> Any:
        raise NotImplementedError

    def output_key(self, key: str, left: Any, right: Any) -> str:
        raise NotImplementedError

    @classmethod
    def check_declaration(cls) -> None:
        super().check_declaration()
        if not all(isinstance(b, int) and b >= 0 for b in (cls.before_ms, cls.after_ms)):
            raise JobDeclarationError(f"{cls.__name__}: before_ms and after_ms are whole milliseconds >= 0")

    def start(self, key: str) -> State:
        return {"left": [], "right": [], "out": {}}

    def process(self, key: str, state: State, role: str, event: Any, ts: int) -> State:
        out = state["out"]  # changed in place: see OrderedJob.on_timer
        if role == "left":  # rights so far are at or before it
            for rts, right in state["right"]:
                if rts >= ts - self.before_ms:
                    out[self.output_key(key, event, right)] = self.join(key, event, right)
            state["left"].append([ts, event])
            return state
        for lts, left in state["left"]:  # lefts so far are at or before it
            if ts <= lts + self.after_ms:
                out[self.output_key(key, left, event)] = self.join(key, left, event)
        state["right"].append([ts, event])
        return state

    def released(self, key: str, state: State, upto: int) -> State:
        # every later event is after ``upto``: a left matches it only within after_ms, a right
        # only within before_ms
        return {**state, "left": [e for e in state["left"] if e[0] + self.after_ms > upto],
                "right": [e for e in state["right"] if e[0] + self.before_ms > upto]}

    def emit(self, key: str, state: State) -> Mapping[str, Any]:
        return state["out"]

    def expire(self, key: str, state: State) -> State | None:
        if not (state["buffer"] or state["left"] or state["right"]):
            return None
        return {**state, "out": {}}
