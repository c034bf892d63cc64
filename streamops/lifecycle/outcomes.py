"""What deploy, resize and stop return (``streamops.lifecycle.operations``): typed results whose
``to_dict`` is the document ``--json`` prints and an Airflow task returns as its XCom.

A converged operation's document is ``app, operation_id, before, after, seconds``, then
``parallelism`` unless it stopped the app, then ``noop, strategy`` for a resize. A resize that found
the app already at that size finishes at once (``Pending.result``) and its document has an order of
its own (``AlreadyAtSize``): two types, so that each document stays as scripts have always read it.
``before`` and ``after`` are the app's snapshots as the ledger journals them (status, parallelism,
batch, offsets; a running app's ``after`` adds pid, spark_app_id, executors): plain JSON data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from streamops.results import Result


@dataclass(frozen=True)
class Converged(Result):
    """An operation the supervisor carried out: the app's state before and after it, and how long
    it took from the request to convergence (the common part of every operation's document)."""

    app: str
    operation_id: int
    before: dict[str, Any]
    after: dict[str, Any]
    seconds: float


@dataclass(frozen=True)
class Stopped(Converged):
    """A stop: no driver runs (its ``after`` has no process facts)."""


@dataclass(frozen=True)
class Running(Converged):
    """A deploy: the app runs at ``parallelism`` and committed a batch after the start (or runs
    caught up with nothing to read)."""

    parallelism: int


@dataclass(frozen=True)
class Resized(Running):
    """A resize that changed the app's size (``strategy``: restart or live)."""

    noop: Literal[False]
    strategy: str


@dataclass(frozen=True)
class AlreadyAtSize(Result):
    """A resize to the size the app already runs at: recorded as a succeeded operation that
    changed nothing (``after`` is ``before`` with ``noop``), finished at the request."""

    app: str
    operation_id: int
    parallelism: int
    noop: Literal[True]
    strategy: str
    before: dict[str, Any]
    after: dict[str, Any]
    seconds: float


#: what a resize returns
ResizeResult = Resized | AlreadyAtSize
#: what ``operations.complete`` returns: a ``Stopped``, ``Running`` or ``Resized`` by the operation's
#: kind, or the ``AlreadyAtSize`` a no-op resize finished with
OperationResult = Converged | AlreadyAtSize
