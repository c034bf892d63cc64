"""The base of what crosses a module boundary as a result: a frozen dataclass.

The CLI and the Airflow operators render a result by its attributes; ``to_dict`` is the one JSON
shape of it (``--json`` output, a task's XCom, what a deferred task carries to the triggerer and
back): keys in field order, nested results as their own ``to_dict``. A field declared with
``absent()`` is left out of the document while it is None, which is how a dry run's document
lacks what only a run that changed something has (``operation_id``, ``aside``, ``seconds``).
Lists of per-partition rows stay plain JSON data: the ledger journals them as they are.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Self, TypeVar

R = TypeVar("R", bound="Result")

_ABSENT = "absent_when_none"


def absent() -> Any:
    """A field left out of ``to_dict`` while None (default None)."""
    return dataclasses.field(default=None, metadata={_ABSENT: True})


def plain(value: Any) -> Any:
    """``value`` as JSON data: results by their ``to_dict``, tuples as lists, the rest as it is."""
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


@dataclasses.dataclass(frozen=True)
class Result:
    """A typed result; subclasses are frozen dataclasses whose field order is the document's."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get(_ABSENT):
                continue
            out[f.name] = plain(value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """The result back from its ``to_dict`` (one level: nested results come back as dicts,
        so give such a type its own ``from_dict``)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def but(self, **changes: Any) -> Self:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)


def extend(base: Result, cls: type[R], **more: Any) -> R:
    """A ``cls`` (a subclass of ``base``'s type, say a plan's result) holding ``base``'s fields and ``more``."""
    return cls(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)}, **more)
