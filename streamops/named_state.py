"""Named state: a job's state split into values, lists and maps that are stored (and written to
the changelog) part by part, instead of one serialized blob rewritten whenever the key changes.

A job declares ``state_values = {"table": Value(), "buffer": ListOf(), "versions": MapOf(ttl_ms=...)}``.
Its code is unchanged: ``update``/``on_timer``/``emit`` see the state as a dict of those names
(a value: any JSON value, None when unset; a list: a list of JSON values; a map: a dict of str ->
JSON value). What changes is the storage:

- **Spark** keeps each name in its own state variable of ``transformWithStateInPandas``
  (``ValueState``/``ListState``/``MapState``, each map entry a row of its own). After a key's
  batch only what changed is written: a value that differs, a list's appended tail (the whole list
  only when its head changed), a map's changed and removed entries (``changes``).
- **The changelog** gets one record per changed part, keyed ``[key, name]`` or ``[key, name, entry]``
  (JSON), so a compacted changelog holds the latest of each part (``changelog_key``); readers put a
  key's state back together with ``assemble``.
- **TTL** (``MapOf(ttl_ms=..., time=...)``): an entry whose time is more than ``ttl_ms`` behind
  stream time is dropped. The drop is an event-time timer (``streamops.stream_time``), so it
  happens at the same point of the input whatever the batch cut, and ``check``'s fold drops the same
  entries. (``transformWithState``'s own TTL counts processing time, which no fold can repeat.)

A job without ``state_values`` keeps the single state and its ``state_serde``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streamops.exceptions import StreamopsError


@dataclass(frozen=True)
class Value:
    """One JSON value (None: unset)."""


@dataclass(frozen=True)
class ListOf:
    """A list of JSON values; appending writes only the new elements."""


@dataclass(frozen=True)
class MapOf:
    """A map of str -> JSON value, one stored row per entry. With ``ttl_ms``, ``time(entry, value)``
    gives an entry's event time (epoch ms) and the entry is dropped once stream time passes it by
    ``ttl_ms``."""

    ttl_ms: int | None = None
    time: Callable[[str, Any], int] | None = None


Kind = Value | ListOf | MapOf


class StateShapeError(StreamopsError):
    """A job's state does not match its ``state_values``.

    Operator action: return a dict with exactly the declared names (lists for ``ListOf``, dicts
    with str keys for ``MapOf``) from ``initial``/``update``/``on_timer``/``expire``."""


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def empty(kind: Kind) -> Any:
    return None if isinstance(kind, Value) else [] if isinstance(kind, ListOf) else {}


def initial(values: Mapping[str, Kind]) -> dict[str, Any]:
    return {n: empty(k) for n, k in values.items()}


def check_shape(values: Mapping[str, Kind], key: str, state: Any) -> None:
    if not isinstance(state, dict) or set(state) != set(values):
        names = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise StateShapeError(f"state of {key!r} must be a dict of {sorted(values)}, got {names}")
    for name, kind in values.items():
        v = state[name]
        if isinstance(kind, ListOf) and not isinstance(v, list):
            raise StateShapeError(f"state of {key!r}: {name} is a ListOf, got {type(v).__name__}")
        if isinstance(kind, MapOf) and not (isinstance(v, dict) and all(isinstance(e, str) for e in v)):
            raise StateShapeError(f"state of {key!r}: {name} is a MapOf (dict of str), got {type(v).__name__}")


# -- changes between the stored state and the new one ----------------------------------------------
@dataclass(frozen=True, slots=True)
class Change:
    """One write to the store. ``op``: "set" (a value or a whole list), "append" (list tail),
    "clear" (a value or list), "put"/"remove" (a map entry)."""

    name: str
    op: str
    entry: str | None = None
    value: Any = None


def changes(values: Mapping[str, Kind], old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
            ) -> list[Change]:
    """What turns the stored ``old`` state into ``new`` (None: the key has no state)."""
    out: list[Change] = []
    for name, kind in values.items():
        before = empty(kind) if old is None else old[name]
        after = empty(kind) if new is None else new[name]
        if isinstance(kind, MapOf):
            for entry, v in after.items():
                if entry not in before or before[entry] != v:
                    out.append(Change(name, "put", entry, v))
            out.extend(Change(name, "remove", entry) for entry in before if entry not in after)
        elif before == after:
            continue
        elif after is None or after == []:
            out.append(Change(name, "clear"))
        elif isinstance(kind, ListOf) and len(after) > len(before) and after[:len(before)] == before:
            out.append(Change(name, "append", value=after[len(before):]))
        else:
            out.append(Change(name, "set", value=after))
    return out


# -- the changelog: one record per part -------------------------------------------------------------
def changelog_key(key: str, name: str, entry: str | None = None) -> str:
    return _dumps([key, name] if entry is None else [key, name, entry])


def changelog_records(values: Mapping[str, Kind], key: str, new: Mapping[str, Any] | None,
                      done: Iterable[Change]) -> list[tuple[str, bytes | None]]:
    """(changelog key, JSON bytes or None: tombstone) for the parts ``done`` changed: a value or a
    whole list as it is now, a map entry as it is now."""
    out: list[tuple[str, bytes | None]] = []
    seen: set[str] = set()
    for c in done:
        if c.entry is not None:
            out.append((changelog_key(key, c.name, c.entry), None if c.op == "remove" else _dumps(c.value).encode()))
        elif c.name not in seen:
            seen.add(c.name)
            now = None if new is None else new[c.name]
            empty_now = now is None or now == []
            out.append((changelog_key(key, c.name), None if empty_now else _dumps(now).encode()))
    return out


def assemble(values: Mapping[str, Kind], latest: Mapping[str, bytes | None]) -> dict[str, dict[str, Any]]:
    """Each key's state from a changelog's latest record per part (tombstones: absent)."""
    states: dict[str, dict[str, Any]] = {}
    for ckey, raw in latest.items():
        if raw is None:
            continue
        parts = json.loads(ckey)
        key, name = parts[0], parts[1]
        if name not in values:
            raise StateShapeError(f"changelog record {ckey!r}: {name!r} is not one of the job's state_values "
                                  f"{sorted(values)}")
        state = states.setdefault(key, initial(values))
        if len(parts) == 3:
            state[name][parts[2]] = json.loads(raw)
        else:
            state[name] = json.loads(raw)
    return states


def is_empty(values: Mapping[str, Kind], state: Mapping[str, Any]) -> bool:
    return all(state[n] == empty(k) for n, k in values.items())


# -- TTL by stream time ------------------------------------------------------------------------------
def ttl_maps(values: Mapping[str, Kind]) -> list[tuple[str, MapOf]]:
    return [(n, k) for n, k in values.items() if isinstance(k, MapOf) and k.ttl_ms is not None]


def next_expiry(ttl: list[tuple[str, MapOf]], state: Mapping[str, Any]) -> int | None:
    """The stream time at which the oldest entry of a TTL map is dropped (a timer)."""
    low: int | None = None
    for name, kind in ttl:
        assert kind.time is not None and kind.ttl_ms is not None
        for entry, v in state[name].items():
            at = kind.time(entry, v) + kind.ttl_ms + 1
            low = at if low is None or at < low else low
    return low


def drop_expired(ttl: list[tuple[str, MapOf]], state: dict[str, Any], upto: int) -> dict[str, Any]:
    """``state`` without the entries whose TTL ran out at stream time ``upto`` (in place)."""
    for name, kind in ttl:
        assert kind.time is not None and kind.ttl_ms is not None
        entries = state[name]
        gone = [e for e, v in entries.items() if kind.time(e, v) + kind.ttl_ms < upto]
        for e in gone:
            del entries[e]
    return state


def decode_changelog(job_cls: Any, latest: Mapping[str, bytes | None]) -> dict[str, Any]:
    """key -> state from a changelog's latest record per Kafka key (a tombstone: absent), for a job
    with one state (``state_serde``) or with named state (``assemble``)."""
    if job_cls.state_values is None:
        loads = job_cls.state_serde.loads
        return {k: loads(v) for k, v in latest.items() if v is not None}
    return assemble(job_cls.state_values, latest)
