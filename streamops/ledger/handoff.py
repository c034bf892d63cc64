"""Operations that wait elsewhere: an Airflow task hands a waiting operation to a trigger.

An operation that replaces a checkpoint on a running app (restore, reset, undo, rebuild-state,
promote with ``stop_first``) waits twice: for the app to stop, and for it to run again after. The
CLI waits in its own process. An Airflow task instead runs the operation inside ``deferrable()``:

- at the stop, ``Replacement`` raises ``OperationDeferred`` (the stop is requested and journaled);
  ``Ledger.operation`` hands the lease over (no holder process, renewed by the trigger's polls)
  instead of failing the operation; the task defers until the app stopped;
- the task then runs the operation again inside ``deferrable(resume=op_id)``: ``Ledger.operation``
  takes the same operation (and lease) back instead of beginning one, ``Replacement.stop`` sees
  its journaled stop and goes on;
- at the restart, ``Replacement`` records the wait (``hand_off``) and returns; the operation's body
  ends, ``Ledger.operation`` keeps its ``after`` and hands the lease over without finishing it, and
  the task defers until the app runs, then ``finish_handed_off`` records the outcome.

Between the waits no worker slot is held: the trigger polls in the triggerer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


class OperationDeferred(Exception):
    """The operation is waiting (``pending``: a ``lifecycle.operations.Pending`` as a dict); the
    caller defers until it converges and then resumes the operation (``resume=pending['operation_id']``)."""

    def __init__(self, pending: dict[str, Any]) -> None:
        super().__init__(f"operation #{pending['operation_id']} waits for {pending['kind']}")
        self.pending = pending


@dataclass
class Mode:
    """What the running operation may do instead of waiting (module docstring)."""

    resume: int | None = None
    #: operation id -> the wait it handed over at its end (set by ``hand_off``)
    handed_off: dict[int, dict[str, Any]] = field(default_factory=dict)


_MODE: ContextVar[Mode | None] = ContextVar("streamops_handoff", default=None)


@contextmanager
def deferrable(resume: int | None = None) -> Iterator[Mode]:
    """Run an operation that hands its waits over (raises ``OperationDeferred`` at the first one)."""
    mode = Mode(resume=resume)
    token = _MODE.set(mode)
    try:
        yield mode
    finally:
        _MODE.reset(token)


def current() -> Mode | None:
    return _MODE.get()


def hand_off(op_id: int, pending: dict[str, Any]) -> bool:
    """Under ``deferrable()``: note that ``op_id`` ends by waiting for ``pending`` (True); else False
    (the caller waits itself)."""
    mode = _MODE.get()
    if mode is None:
        return False
    mode.handed_off[op_id] = pending
    return True
