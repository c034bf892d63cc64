"""``streamops.results``: a result's document is its fields in order, a field declared ``absent()``
is left out while None, nested results become their documents, and the document comes back."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, dataclass

import pytest

from streamops.results import Result, absent, extend, plain


@dataclass(frozen=True)
class Plan(Result):
    app: str
    offsets: list[dict]
    restart: bool


@dataclass(frozen=True)
class Done(Plan):
    dry_run: bool = False
    operation_id: int | None = absent()
    seconds: float | None = absent()


@dataclass(frozen=True)
class Outer(Result):
    inner: Plan
    rows: tuple[Plan, ...]


def test_the_document_keeps_field_order_and_leaves_out_absent_fields() -> None:
    plan = Plan("a", [{"topic": "t", "partition": 0}], True)
    dry = extend(plan, Done, dry_run=True)
    assert json.dumps(dry.to_dict()) == ('{"app": "a", "offsets": [{"topic": "t", "partition": 0}], '
                                         '"restart": true, "dry_run": true}')
    ran = extend(plan.but(restart=False), Done, operation_id=7, seconds=1.5)
    assert list(ran.to_dict()) == ["app", "offsets", "restart", "dry_run", "operation_id", "seconds"]
    assert ran.to_dict()["restart"] is False and plan.restart is True  # ``but`` copies


def test_a_field_that_may_be_none_is_kept_unless_declared_absent() -> None:
    assert Plan("a", [], None).to_dict() == {"app": "a", "offsets": [], "restart": None}  # type: ignore[arg-type]


def test_nested_results_become_documents_and_a_document_comes_back() -> None:
    out = Outer(Plan("a", [], True), (Plan("b", [], False),))
    assert out.to_dict() == {"inner": {"app": "a", "offsets": [], "restart": True},
                             "rows": [{"app": "b", "offsets": [], "restart": False}]}
    assert plain([out]) == [out.to_dict()]
    ran = Done("a", [], True, operation_id=3, seconds=2.0)
    assert Done.from_dict(json.loads(json.dumps(ran.to_dict()))) == ran
    assert Done.from_dict(extend(Plan("a", [], True), Done, dry_run=True).to_dict()).operation_id is None


def test_results_are_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        Plan("a", [], True).app = "b"  # type: ignore[misc]
