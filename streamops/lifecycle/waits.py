"""One way to wait for a long operation, whoever waits.

An operation that replaces a running app's checkpoint (restore, reset, undo, rebuild-state,
promote) or runs a driver of its own (reprocess) waits in the middle: for the app to stop, for it
to run again, for the run's driver. Such an operation is a *step* function: it advances until it
must wait, journals the wait, hands its lease over (``ledger.HandOver``) and returns
``Waiting(pending)``; it is called again with ``resume=<operation id>`` once the wait is over and
takes its operation back. At its last wait it returns ``Waiting(pending, result)``: the outcome is
known when the wait ends (``Ledger.finish_handed_off``). Without a wait it returns ``Done``.

Who waits is the front end's choice, not the operation's: the CLI waits in its own process
(``wait_here``, holding the lease by its pid, so a CLI killed meanwhile frees it at once); an
Airflow task defers to the triggerer, which polls the same ``pending``
(``streamops_airflow.operators.handoff``). deploy, resize and stop follow the same protocol with
one wait and no resume (``operations.request_*`` returns the ``Pending``, ``operations.wait``
waits for it here).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamops.app.context import AppContext
from streamops.ledger import Ledger
from streamops.ledger.store import OperationRecord
from streamops.lifecycle import operations as ops
from streamops.results import Result


@dataclass(frozen=True)
class Waiting:
    """The operation waits for ``pending`` (an ``operations.Pending`` as a dict, or a reprocess
    run's driver); at its last wait ``result`` is what it returns once the wait is over."""

    pending: dict[str, Any]
    result: Result | None = None

    @property
    def operation_id(self) -> int:
        return int(self.pending["operation_id"])

    @property
    def last(self) -> bool:
        return self.result is not None


@dataclass(frozen=True)
class Done:
    result: Result


Step = Waiting | Done
#: an operation's step function with all but ``resume`` bound
Advance = Callable[[int | None], Step]
#: a poll of one wait: True once it is over; raises when it can no longer end well
Poll = Callable[[], bool]


def ended(rec: OperationRecord, result: Result) -> Step:
    """What a step returns once the operation's body ran to its end (``rec`` its ledger record)."""
    return Waiting(rec.waiting, result) if rec.waiting is not None else Done(result)


def convergence(ctx: AppContext) -> Callable[[dict[str, Any]], Poll]:
    """Polls of the waits for ``ctx``'s app to stop or run (``operations.poll``)."""

    def poll_of(pending: dict[str, Any]) -> Poll:
        wait = ops.Pending.from_dict(pending)  # one object: it remembers when it last renewed the lease
        return lambda: ops.poll(ctx, wait) is not None

    return poll_of


def wait_here(ledger: Ledger, advance: Advance, poll_of: Callable[[dict[str, Any]], Poll], *,
              abandon: Callable[[dict[str, Any]], None] | None = None, interval: float = 0.5) -> Result:
    """Advance an operation to its end in this process, waiting between its steps; its result.
    A wait that fails (or this process interrupted) records the operation failed, and raises;
    ``abandon(pending)`` first ends what it waited for where that would go on alone (a run's driver).
    A result's ``seconds`` are the whole operation's, its waits included."""
    t0 = time.monotonic()
    got = advance(None)
    while isinstance(got, Waiting):
        op_id = got.operation_id
        ledger.take_back(op_id, got.pending["app"])  # this process holds the lease while it waits
        try:
            poll = poll_of(got.pending)
            while not poll():
                time.sleep(interval)
        except BaseException as exc:
            if abandon is not None:
                abandon(got.pending)
            ledger.finish_handed_off(op_id, "failed", error=f"{type(exc).__name__}: {exc}"[:4000])
            raise
        if got.last:
            ledger.finish_handed_off(op_id, "succeeded")
            return _timed(got.result, t0)
        got = advance(op_id)
    return _timed(got.result, t0)


def _timed(result: Result, t0: float) -> Result:
    if getattr(result, "seconds", None) is None:  # a dry run, or a result without a duration
        return result
    return result.but(seconds=round(time.monotonic() - t0, 1))
