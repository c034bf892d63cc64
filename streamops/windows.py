"""Event-time windows as a job: tumbling, hopping, sliding and session windows with a grace period,
emitted when a window closes ("suppress until the window closes"), on every update, or when a
window's value differs from the one before it (emit on change).

A ``WindowedJob`` declares ``parse``, ``key``, its ``windows`` and a small aggregation (``zero``,
``add``, ``merge`` for sessions, ``result``); the windowing is the job's ``update``, ``timers``,
``on_timer``, ``emit`` and ``expire`` here, on stream time (``streamops.stream_time``):

- a window ``[start, end)`` closes once stream time reaches ``end + grace_ms``; an event for it after
  that is ``late`` (the platform's rule), so a closed window never changes;
- a session is the events of a key with gaps below ``gap_ms``, ``[first event, last event + 1)``
  (the ``start, end`` that ``result`` and ``window_key`` get); it closes once stream time reaches
  ``last event + gap_ms + grace_ms``, also when its key gets no more events (a timer);
- sliding windows (``Sliding(size_ms)``) are Kafka Streams' and Flink SQL's ``RANGE`` windows: one
  window per event, ``(ts - size_ms, ts]``, i.e. ``[ts - size_ms + 1, ts + 1)``, aggregating the
  key's events in it; it closes once stream time reaches ``ts + grace_ms + 1`` (an event at ``ts``
  is still not late at ``ts + grace_ms``).

docs/writing-a-job.md's table says the same; tests/unit/time/test_window_docs.py checks both
against what the code does.

The state is JSON: ``{"open": [[start, end, acc], ...], "closed": [[start, end, acc, value], ...]}``
(sliding windows add ``"recent"``, emit on change ``"last"``) plus the job's own fields
(``initial_fields``), so every operation (savepoints, rebuild-state, verify) carries the windows,
their timers and what the job keeps beside them.

Why emit on change compares a window with the key's previous window *as they close*: a closed
window never changes and windows close in an order the input alone fixes, so what is written, and
``"last"`` in the state, do not depend on the batch cut. Comparing what was written after each
batch (open windows) would depend on it, and so would the state that remembers it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from streamops.job import Job, JobDeclarationError, JsonSerde


@dataclass(frozen=True)
class Tumbling:
    size_ms: int

    def assign(self, ts: int) -> list[tuple[int, int]]:
        start = ts - ts % self.size_ms
        return [(start, start + self.size_ms)]


@dataclass(frozen=True)
class Hopping:
    size_ms: int
    advance_ms: int

    def assign(self, ts: int) -> list[tuple[int, int]]:
        last = ts - ts % self.advance_ms
        out = []
        start = last
        while start > ts - self.size_ms:
            out.append((start, start + self.size_ms))
            start -= self.advance_ms
        return out[::-1]


@dataclass(frozen=True)
class Sliding:
    size_ms: int


@dataclass(frozen=True)
class Session:
    gap_ms: int


Windows = Tumbling | Hopping | Sliding | Session
State = dict[str, Any]
#: the state's own keys; the job's fields (``initial_fields``) take any other name
WINDOW_FIELDS = ("open", "closed", "recent", "last")
_JSON = JsonSerde()


class WindowedJob(Job[Any, State]):
    """Subclass: declare ``parse``, ``key``, ``timestamp``, ``windows``, ``grace_ms`` and the
    aggregation; ``emit_on`` chooses when a window's result is written. Optional: fields of the
    job's own beside the windows (``initial_fields``) and ``on_close``, the value of each window as
    it closes, which may read and change them (docs/writing-a-job.md, "Fields beside the windows")."""

    windows: ClassVar[Windows]
    #: "close": one output record per window, once it closes; "update": rewritten after every batch
    #: that changed it (tumbling and hopping windows only: sessions merge, sliding ones are per event);
    #: "change": a window's value once it closes, only when it differs from the value of the key's
    #: window that closed before it (None values are never written)
    emit_on: ClassVar[Literal["close", "update", "change"]] = "close"
    grace_ms: ClassVar[int | None] = 0

    # the aggregation ----------------------------------------------------------------------------
    def zero(self) -> Any:
        raise NotImplementedError

    def add(self, acc: Any, event: Any) -> Any:
        """``acc`` with ``event`` added (``acc`` may be changed in place and returned)."""
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        """Session windows: two sessions' accumulators as one (a bridging event joins them)."""
        raise NotImplementedError

    def result(self, key: str, start: int, end: int, acc: Any) -> Any:
        """The window's output value (JSON)."""
        return acc

    def window_key(self, key: str, start: int, end: int) -> str:
        return f"{key}@{start}"

    # beside the windows --------------------------------------------------------------------------
    def initial_fields(self, key: str) -> dict[str, Any]:
        """The job's own fields of a new key's state, beside its windows (JSON values; any name but
        ``open``, ``closed``, ``recent``, ``last``). ``update``, ``on_timer`` and ``expire`` keep them."""
        return {}

    def on_close(self, key: str, state: State, start: int, end: int, acc: Any) -> Any:
        """A window as it closes (a key's windows in the order they close): the value written for it.
        It may change the job's own fields in ``state`` (in place), which the next window then sees.
        Default: ``result``."""
        return self.result(key, start, end, acc)

    # the job -------------------------------------------------------------------------------------
    @classmethod
    def check_declaration(cls) -> None:
        w = getattr(cls, "windows", None)
        name = cls.__name__
        if not isinstance(w, (Tumbling, Hopping, Sliding, Session)):
            raise JobDeclarationError(f"{name}.windows must be Tumbling, Hopping, Sliding or Session")
        if any(not isinstance(v, int) or isinstance(v, bool) or v <= 0
               for v in (getattr(w, f) for f in w.__dataclass_fields__)):
            raise JobDeclarationError(f"{name}.windows: sizes are whole milliseconds > 0, got {w}")
        if isinstance(w, Hopping) and w.advance_ms > w.size_ms:
            raise JobDeclarationError(f"{name}.windows: a hop ({w.advance_ms} ms) longer than the window "
                                      f"({w.size_ms} ms) leaves events in no window")
        if cls.emit_on not in ("close", "update", "change"):
            raise JobDeclarationError(f"{name}.emit_on must be 'close', 'update' or 'change', got {cls.emit_on!r}")
        if isinstance(w, (Session, Sliding)) and cls.emit_on == "update":
            raise JobDeclarationError(f"{name}: {type(w).__name__} windows are emitted when they close (sessions "
                                      f"merge, sliding windows are one per event); set emit_on = 'close' or "
                                      f"'change'")
        if cls.overrides("initial", WindowedJob):
            raise JobDeclarationError(f"{name} defines initial: a windowed job's state holds its windows; declare "
                                      f"the fields it keeps beside them in initial_fields(key)")
        missing = [m for m in ("timestamp", "zero", "add") if not cls.overrides(m, WindowedJob)]
        if isinstance(w, Session) and not cls.overrides("merge", WindowedJob):
            missing.append("merge")
        if missing:
            raise JobDeclarationError(f"{name} does not define {', '.join(missing)} (a windowed job declares its "
                                      f"events' time and the aggregation: timestamp, zero, add, and merge for "
                                      f"sessions)")

    def initial(self, key: str) -> State:
        state: State = {"open": [], "closed": []}
        if isinstance(self.windows, Sliding):
            state["recent"] = []
        if self.emit_on == "change":
            state["last"] = None  # the value of the key's window that closed last
        own = self.initial_fields(key)
        if own:
            clash = sorted(set(own) & set(WINDOW_FIELDS))
            if clash:
                raise JobDeclarationError(f"{type(self).__name__}.initial_fields names {clash}: "
                                          f"{', '.join(WINDOW_FIELDS)} are the windows' own; choose other names")
            state.update(own)
        return state

    def update(self, key: str, state: State, events: Sequence[Any]) -> State:
        new = state  # changed in place (``Job.update``: the platform never uses it again)
        w = self.windows
        for e in events:
            ts = self.timestamp(e)
            if isinstance(w, Session):
                new["open"] = self._add_to_session(new["open"], ts, e)
            elif isinstance(w, Sliding):
                self._add_sliding(new, ts, e)
            else:
                for start, end in w.assign(ts):
                    i = _find(new["open"], start)
                    if i is None:
                        bisect.insort(new["open"], [start, end, self.zero()], key=lambda x: x[0])
                        i = _find(new["open"], start)
                    new["open"][i][2] = self.add(new["open"][i][2], e)
        return new

    def _add_to_session(self, opened: list, ts: int, e: Any) -> list:
        """Sessions are ``[first ts, last ts, acc]``; an event within ``gap_ms`` of one joins it (and
        merges the sessions it bridges)."""
        gap = self.windows.gap_ms  # type: ignore[union-attr]
        near = [w for w in opened if w[0] - gap < ts < w[1] + gap]
        acc, start, end = self.add(self.zero(), e), ts, ts
        for w in near:
            acc, start, end = self.merge(w[2], acc), min(start, w[0]), max(end, w[1])
        return sorted([*(w for w in opened if not (w[0] - gap < ts < w[1] + gap)), [start, end, acc]],
                      key=lambda x: x[0])

    def _add_sliding(self, new: State, ts: int, e: Any) -> None:
        """Sliding windows are ``[ts - size, ts, acc]`` for ``(ts - size, ts]``; the key's recent
        events (``[ts, event]``) give a new window its earlier events."""
        size = self.windows.size_ms  # type: ignore[union-attr]
        for w in new["open"]:
            if w[0] < ts <= w[1]:
                w[2] = self.add(w[2], e)
        if _find(new["open"], ts - size) is None:
            acc = self.zero()
            for t, ev in new["recent"]:
                if ts - size < t <= ts:
                    acc = self.add(acc, ev)
            bisect.insort(new["open"], [ts - size, ts, self.add(acc, e)], key=lambda x: x[0])
        bisect.insort(new["recent"], [ts, e], key=lambda x: x[0])

    def timers(self, key: str, state: State) -> Iterable[int]:
        after = self._close_after()
        return [w[1] + after for w in state["open"]]

    def _close_after(self) -> int:
        """A window closes this long after its end (``w[1]``): when no event that is not late can
        change it any more."""
        grace = self.grace_ms or 0
        if isinstance(self.windows, Session):
            return self.windows.gap_ms + grace
        if isinstance(self.windows, Sliding):
            return grace + 1
        return grace

    def on_timer(self, key: str, state: State, ts: int) -> State:
        last = ts - self._close_after()  # windows ending at or before it close
        done = [w for w in state["open"] if w[1] <= last]
        new = {**state, "open": [w for w in state["open"] if w[1] > last], "closed": [*state["closed"]]}
        change = self.emit_on == "change"
        for w in done:  # oldest first: ends are distinct, and ``open`` is sorted by start
            value = self.on_close(key, new, *self._bounds(w), w[2])
            if change:  # compared as the changelog reads it back
                value = None if value is None else _JSON.loads(_JSON.dumps(value))
                if value is not None and value != new.get("last"):
                    new["closed"].append([w[0], w[1], w[2], value])
                new["last"] = value
            else:
                new["closed"].append([w[0], w[1], w[2], value])
        if "recent" in state:  # an event at t is in no window that can still open after t + size + grace
            keep = self.windows.size_ms + (self.grace_ms or 0)  # type: ignore[union-attr]
            new["recent"] = [r for r in state["recent"] if r[0] + keep > ts]
        return new

    def emit(self, key: str, state: State) -> Mapping[str, Any]:
        """The closed windows' values (``on_close``'s; ``result`` of an entry written before it was
        kept), and with ``emit_on = "update"`` the open windows' results."""
        out = {self.window_key(key, *self._bounds(w)): w[3] if len(w) > 3 else self.result(key, *self._bounds(w), w[2])
               for w in state["closed"]}
        if self.emit_on == "update":
            out.update({self.window_key(key, *self._bounds(w)): self.result(key, *self._bounds(w), w[2])
                        for w in state["open"]})
        return out

    def _bounds(self, w: list) -> tuple[int, int]:
        """The window's [start, end) as output: sessions end after their last event, sliding
        windows are (ts - size, ts], i.e. [ts - size + 1, ts + 1)."""
        if isinstance(self.windows, Session):
            return w[0], w[1] + 1
        if isinstance(self.windows, Sliding):
            return w[0] + 1, w[1] + 1
        return w[0], w[1]

    def expire(self, key: str, state: State) -> State | None:
        """Closed windows leave once emitted; a key left as a new key's state (nothing open or recent,
        its own fields and ``last`` as at first) is deleted: its next event starts from the same."""
        kept = {**state, "closed": []}
        if not kept["open"] and not kept.get("recent") and kept == self.initial(key):
            return None
        return kept


def _find(opened: list, start: int) -> int | None:
    i = bisect.bisect_left(opened, start, key=lambda x: x[0])
    return i if i < len(opened) and opened[i][0] == start else None
