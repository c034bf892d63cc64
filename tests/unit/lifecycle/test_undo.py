"""What an undo reverses, read from an operation's journal (``lifecycle.undo.read_done``)."""

from __future__ import annotations

import pytest

from streamops.lifecycle.undo import Done, UndoError, read_done


def _op(journal, **kw):
    return {"id": 7, "kind": "reset", "outcome": "failed", "after": None, "before": {}, "journal": journal, **kw}


def test_a_reset_killed_after_recreating_the_changelog(tmp_path) -> None:
    (tmp_path / "aside" / "checkpoint").mkdir(parents=True)
    done = read_done(_op([{"step": "stop", "was_running": True, "parallelism": 3},
                          {"step": "saved", "folder": str(tmp_path / "aside"),
                           "saved": {"changelog": {"topic": "c", "keys": 5}}},
                          {"step": "set-aside", "path": str(tmp_path / "aside" / "checkpoint")},
                          {"step": "install"}, {"step": "changelog-recreate", "topic": "c"}]))
    assert done == Done(steps=("stop", "saved", "set-aside", "install", "changelog-recreate"), was_running=True,
                        parallelism=3, checkpoint_before=tmp_path / "aside" / "checkpoint",
                        saved_in=tmp_path / "aside", saved={"changelog": {"topic": "c", "keys": 5}},
                        changelog_recreated=True)


def test_killed_before_the_rename_the_checkpoint_is_still_in_place(tmp_path) -> None:
    done = read_done(_op([{"step": "stop", "was_running": False, "parallelism": 1},
                          {"step": "set-aside", "path": str(tmp_path / "never-made")}]))
    assert done.checkpoint_before is None and not done.changelog_recreated and not done.rewound


def test_an_aside_removed_since_cannot_be_put_back(tmp_path) -> None:
    with pytest.raises(UndoError, match="it is gone"):
        read_done(_op([{"step": "set-aside", "path": str(tmp_path / "removed")}, {"step": "install"}]))


def test_the_first_copy_is_the_original(tmp_path) -> None:
    for d in ("first", "second"):
        (tmp_path / d).mkdir()
    done = read_done(_op([{"step": "copied-aside", "path": str(tmp_path / "first")},
                          {"step": "set-aside", "path": str(tmp_path / "second")}, {"step": "rewind", "batch": 4}]))
    assert done.checkpoint_before == tmp_path / "first" and done.rewound


def test_a_reset_recorded_before_journals_existed(tmp_path) -> None:
    (tmp_path / "aside" / "checkpoint").mkdir(parents=True)
    op = _op(None, outcome="succeeded", before={"output_version": None},
             after={"aside": str(tmp_path / "aside"), "state": "wipe", "output_version": "v2",
                    "saved": {"changelog": {"topic": "c", "keys": 1}}})
    done = read_done(op)
    assert done.checkpoint_before == tmp_path / "aside" / "checkpoint" and done.changelog_recreated
    assert done.output_version == (None, "v2") and done.saved_in == tmp_path / "aside" and done.rewound
    restore = read_done({**op, "kind": "restore", "after": {"aside": str(tmp_path / "aside")}})
    assert restore.checkpoint_before == tmp_path / "aside" and not restore.changelog_recreated


def test_a_checkpoint_that_was_ahead_of_its_output_is_not_put_back(tmp_path) -> None:
    """A reset that repaired lost batches (the checkpoint at 13, the marker at 12) and then failed
    to restart: undoing it would bring back a checkpoint whose batch 13 output the broker lost."""
    import json

    from streamops.ledger import Ledger
    from streamops.lifecycle.undo import undo_plan
    from streamops.settings import Settings
    from streamops.spec import AppSpec

    spec = AppSpec(name="app1", job="jobs.x", input_topics=("in",), output_topic="o", changelog_topic="c",
                   dlq_topic="d", input_partitions=6, state_partitions=4)
    settings = Settings(home=tmp_path)
    old = tmp_path / "aside" / "checkpoint"
    (old / "commits").mkdir(parents=True)
    (old / "metadata").write_text(json.dumps({"id": "ck-1"}))
    (old / "commits" / "13").write_text("v1\n{}")
    (old / "offsets").mkdir()
    (old / "offsets" / "13").write_text('v1\n{"batchWatermarkMs":0}\n{"in":{"0":500}}')
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        for marker, refused in (({"batch_id": 12, "checkpoint_id": "ck-1"}, True),
                                ({"batch_id": 13, "checkpoint_id": "ck-1"}, False)):
            op = ledger.begin("app1", "reset", who="t")
            ledger.step(op, "stop", was_running=False, parallelism=1)
            ledger.step(op, "set-aside", path=str(old), marker=marker)
            ledger.step(op, "restart", parallelism=1)
            ledger.finish(op, "failed", error="NotConverged")
            if refused:
                with pytest.raises(UndoError, match="lost the transactions of batches 13..13"):
                    undo_plan(settings, spec, ledger, op.id)
            else:
                assert undo_plan(settings, spec, ledger, op.id).restore_batch == 13
    finally:
        ledger.close()
