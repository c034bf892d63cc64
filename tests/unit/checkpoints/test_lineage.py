"""The batch marker and the checkpoint it counts: when a driver may start on them."""

from __future__ import annotations

import json

import pytest

from streamops.checkpoints import lineage

A, B = "3f1c-a", "77d0-b"


def _marker(batch: int, owner: str | None = A, **extra) -> dict:
    return {"batch_id": batch, **({"checkpoint_id": owner} if owner else {}), **extra}


@pytest.mark.parametrize(("marker", "ckpt_id", "committed"), [
    (None, None, None),                 # a new app
    (_marker(-1, None, rewind=True), None, None),  # a reset: everything again, nothing skipped
    (_marker(7), A, 7),                 # stopped at a batch boundary
    (_marker(8), A, 7),                 # batch 8's transaction went through, its commit file did not
    (_marker(0), A, None),              # the same for batch 0
    (_marker(7, None), A, 7),           # a marker from before markers named their checkpoint
])
def test_marker_and_checkpoint_agree(marker, ckpt_id, committed) -> None:
    assert lineage.mismatch(marker, ckpt_id, committed) is None


def test_a_deleted_checkpoint_is_refused_with_what_would_happen() -> None:
    for ckpt_id in (None, B):  # gone, or a driver already started on a new one and died
        problem = lineage.mismatch(_marker(41), ckpt_id, None)
        assert "missing or new" in problem and "batches 0..41 again and write nothing" in problem
    assert "missing or new" in lineage.mismatch(_marker(41, None), None, None)  # an old marker too


def test_a_replaced_checkpoint_is_refused() -> None:
    problem = lineage.mismatch(_marker(41), B, 12)
    assert f"({B}) is not the one the last committed batch 41 was written from ({A})" in problem


def test_a_checkpoint_older_than_its_output_is_refused() -> None:
    problem = lineage.mismatch(_marker(9), A, 7)
    assert "older than its output" in problem and "batches 8..9 again and write nothing" in problem


def test_check_reads_the_checkpoint_again_while_a_driver_commits(tmp_path) -> None:
    ckpt = tmp_path / "ckpt"
    (ckpt / "commits").mkdir(parents=True)
    (ckpt / "metadata").write_text(json.dumps({"id": A}))
    (ckpt / "commits" / "7").write_text("v1\n{}")
    reads = []

    def marker_while_committing() -> dict:  # the running driver commits 8 and 9 during the first read
        reads.append(1)
        for b in (8, 9):
            (ckpt / "commits" / str(b)).write_text("v1\n{}")
        return _marker(10)

    lineage.check("app", ckpt, marker_while_committing)  # 9 committed, marker 10: agree
    assert len(reads) == 2


def test_transactions_the_broker_lost_are_named() -> None:
    problem = lineage.mismatch(_marker(5), A, 8)
    assert "lost the transactions of batches 6..8" in problem


def test_check_reads_the_checkpoint_and_names_the_repairs(tmp_path) -> None:
    ckpt = tmp_path / "ckpt"
    (ckpt / "commits").mkdir(parents=True)
    (ckpt / "metadata").write_text(json.dumps({"id": B}))
    (ckpt / "commits" / "3").write_text("v1\n{}")
    assert lineage.checkpoint_id(ckpt) == B
    lineage.check("app", ckpt, lambda: _marker(3, B))
    with pytest.raises(lineage.CheckpointMismatchError) as err:
        lineage.check("app", ckpt, lambda: _marker(3, A))
    assert err.value.exit_code == 2
    for repair in ("streamops restore app SAVEPOINT", "streamops rebuild-state app --from-changelog",
                   "streamops reset app --to-earliest"):
        assert repair in str(err.value)
    assert lineage.checkpoint_id(tmp_path / "nothing") is None


def test_input_shorter_than_what_the_checkpoint_read_is_refused(tmp_path) -> None:
    ckpt = tmp_path / "ckpt"
    for d in ("commits", "offsets"):
        (ckpt / d).mkdir(parents=True)
    (ckpt / "commits" / "4").write_text("v1\n{}")
    (ckpt / "offsets" / "4").write_text('v1\n{"batchWatermarkMs":0}\n{"in":{"0":500,"1":700}}')
    assert lineage.input_gap(ckpt, {"in": {0: 500, 1: 900}}) is None  # as long or longer: fine
    assert lineage.input_gap(ckpt, {"other": {}}) is None
    problem = lineage.input_gap(ckpt, {"in": {0: 120, 1: 900}})
    assert "batch 4 read input records that are no longer there (in[0] ends at 120, read up to 500)" in problem
    with pytest.raises(lineage.CheckpointMismatchError) as err:
        lineage.check_input("app", ckpt, {"in": {}})  # the topic is gone
    assert "in[0] ends at 0, read up to 500; in[1] ends at 0, read up to 700" in str(err.value)
    assert "streamops reset app --to-earliest" in str(err.value) and err.value.exit_code == 2
    assert lineage.input_gap(tmp_path / "never-ran", {"in": {}}) is None
