"""The sticky, balanced plan of state partition moves after a live scale-out."""

from __future__ import annotations

import pytest

from streamops.spark.driver.placement import balance


def _after(owners: dict[int, str | None], moves: dict[int, str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for p, e in sorted({**owners, **moves}.items()):
        out.setdefault(e, []).append(p)
    return out


def test_half_of_the_partitions_move_to_the_new_executor() -> None:
    moves = balance({0: "0", 1: "0", 2: "0", 3: "0"}, ["0", "4"])
    assert moves == {2: "4", 3: "4"}  # the old executor keeps the ones it has loaded first


def test_balanced_partitions_stay_put() -> None:
    assert balance({0: "0", 1: "4", 2: "0", 3: "4"}, ["0", "4"]) == {}


def test_partitions_of_unknown_or_removed_executors_always_move() -> None:
    owners = {0: "0", 1: None, 2: "9", 3: "0"}
    moves = balance(owners, ["0", "4"])
    assert set(moves) == {1, 2} and _after(owners, moves) == {"0": [0, 3], "4": [1, 2]}


@pytest.mark.parametrize("parts,executors", [(4, ["0", "4", "5"]), (7, ["1", "10", "2"]), (4, ["0", "1", "2", "3", "4"])])
def test_every_executor_ends_with_its_share_and_only_surplus_moves(parts: int, executors: list[str]) -> None:
    owners = {p: executors[0] for p in range(parts)}
    moves = balance(owners, executors)
    sizes = sorted(len(v) for v in _after(owners, moves).values())
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == parts
    assert len(moves) == parts - max(sizes)  # the first executor keeps a full share


def test_no_executors_no_moves() -> None:
    assert balance({0: "0"}, []) == {}
