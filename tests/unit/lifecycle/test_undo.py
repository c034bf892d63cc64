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
