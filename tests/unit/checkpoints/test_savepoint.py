"""Savepoint files: what batch N needs, checksums that catch any change, retention, install."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from streamops.checkpoints.savepoint import SavepointError, expired, install, needed, snapshot, verify


def _ckpt(root: Path, batches: int = 5) -> Path:
    """A checkpoint shaped like Spark's: batches 0..batches-1 committed, batch `batches` planned."""
    c = root / "ckpt"
    (c / "metadata").parent.mkdir(parents=True, exist_ok=True)
    (c / "metadata").write_text('{"id":"q"}')
    for b in range(batches + 1):
        off = json.dumps({"in": {"0": 10 * (b + 1), "1": 5 * (b + 1)}})
        (c / "offsets").mkdir(exist_ok=True)
        (c / "offsets" / str(b)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{off}\n')
        (c / "offsets" / f".{b}.crc").write_bytes(b"crc")
        if b < batches:
            (c / "commits").mkdir(exist_ok=True)
            (c / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
        for p in (0, 1):
            d = c / "state" / "0" / str(p)
            (d / "_metadata").mkdir(parents=True, exist_ok=True)
            (d / "_metadata" / "schema").write_text("schema")
            (d / f"{b + 1}.changelog").write_bytes(f"p{p}v{b + 1}".encode())
            (d / f".{b + 1}.changelog.crc").write_bytes(b"c")
    (c / "state" / "0" / "0" / "3.zip").write_bytes(b"snapshot3")
    (c / "state" / "0" / "0" / "SSTs").mkdir()
    (c / "state" / "0" / "0" / "SSTs" / "000001-abc.sst").write_bytes(b"sst")
    (c / "sources" / "0").mkdir(parents=True)
    (c / "sources" / "0" / "0").write_text("v1\n{}")
    return c


@pytest.mark.parametrize("rel, batch, want", [
    ("offsets/3", 3, True), ("offsets/4", 3, False), ("offsets/.4.crc", 3, False), ("commits/3", 3, True),
    ("state/0/1/4.changelog", 3, True), ("state/0/1/5.changelog", 3, False), ("state/0/1/.5.changelog.crc", 3, False),
    ("state/0/0/4_1b2c-3d.zip", 3, True), ("state/0/0/9.zip", 3, False), ("state/0/0/SSTs/000009-x.sst", 3, True),
    ("state/0/0/_metadata/schema", 3, True), ("metadata", 0, True), ("sources/0/0", 0, True),
])
def test_needed_files_of_a_batch(rel, batch, want) -> None:
    assert needed(Path(rel), batch) is want


def test_snapshot_holds_exactly_the_committed_batch_and_verifies(tmp_path) -> None:
    c = _ckpt(tmp_path)
    m = snapshot(c, tmp_path / "sp1", "app")
    assert m.batch_id == 4 and m.state_version == 5
    assert m.offsets == {"in": {"0": 50, "1": 25}}
    assert "offsets/5" not in m.files and "offsets/4" in m.files and "commits/4" in m.files
    assert "state/0/1/5.changelog" in m.files and "state/0/1/6.changelog" not in m.files
    assert "state/0/0/SSTs/000001-abc.sst" in m.files and not (tmp_path / "sp1.partial").exists()
    assert verify(tmp_path / "sp1", m.sha256).sha256 == m.sha256
    older = snapshot(c, tmp_path / "sp0", "app", batch_id=2)
    assert older.sha256 != m.sha256 and "offsets/3" not in older.files


@pytest.mark.parametrize("damage, problem", [
    (lambda p: (p / "state/0/0/3.zip").write_bytes(b"tampered"), "changed state/0/0/3.zip"),
    (lambda p: (p / "commits/4").unlink(), "missing commits/4"),
    (lambda p: (p / "offsets/99").write_text("x"), "extra offsets/99"),
])
def test_verify_names_what_is_wrong(tmp_path, damage, problem) -> None:
    c = _ckpt(tmp_path)
    m = snapshot(c, tmp_path / "sp", "app")
    damage(tmp_path / "sp")
    with pytest.raises(SavepointError, match=problem):
        verify(tmp_path / "sp", m.sha256)


def test_verify_refuses_a_manifest_that_is_not_the_recorded_one(tmp_path) -> None:
    snapshot(_ckpt(tmp_path), tmp_path / "sp", "app")
    with pytest.raises(SavepointError, match="manifest checksum"):
        verify(tmp_path / "sp", "0" * 64)


def test_nothing_committed_is_refused(tmp_path) -> None:
    c = tmp_path / "empty"
    c.mkdir()
    with pytest.raises(SavepointError, match="nothing committed"):
        snapshot(c, tmp_path / "sp", "app")


def test_install_sets_the_current_checkpoint_aside(tmp_path) -> None:
    c = _ckpt(tmp_path)
    m = snapshot(c, tmp_path / "sp", "app", batch_id=2)
    before = sorted(str(p.relative_to(c)) for p in c.rglob("*") if p.is_file())
    install(tmp_path / "sp", c, tmp_path / "aside" / "x")
    assert sorted(str(p.relative_to(c)) for p in c.rglob("*") if p.is_file()) == sorted(m.files)
    assert sorted(str(p.relative_to(tmp_path / "aside" / "x")) for p in (tmp_path / "aside" / "x").rglob("*")
                  if p.is_file()) == before
    verify(tmp_path / "sp", m.sha256)  # the savepoint itself is untouched


def test_retention_by_count_and_age_keeps_the_newest() -> None:
    now = datetime(2026, 11, 22, 12, tzinfo=UTC)
    sps = [{"id": f"s{i}", "batch_id": i, "created_at": now - timedelta(hours=10 - i)} for i in range(10)]
    assert {s["id"] for s in expired(sps, 3, 86400, now)} == {f"s{i}" for i in range(7)}
    assert {s["id"] for s in expired(sps, 50, 3 * 3600, now)} == {f"s{i}" for i in range(7)}  # > 3 h old
    assert {s["id"] for s in expired(sps[:1], 1, 1, now)} == set()  # the newest always stays
