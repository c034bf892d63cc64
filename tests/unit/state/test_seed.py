"""Seeding helpers that need no Spark: the job contract and pointing a seeded checkpoint's offsets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamops.checkpoints import layout
from streamops.state import seed


def test_seed_rows_are_the_declared_state(repo: Path) -> None:
    """An aggregate job seeds from its key and fields, an update job from its serialized state."""
    from jobs.page_stats import PageStats
    from jobs.user_activity import UserActivity
    from streamops.spark.query.plan import JobQuery

    agg = JobQuery(UserActivity, state_partitions=2)
    assert seed.seed_columns(agg) == ["user_id", "last_login_ts", "purchases", "total_cents", "events"]
    table = agg.seed_table({"u1": {"last_login_ts": None, "purchases": 2, "total_cents": 1235, "events": 7}})
    assert table.to_pylist() == [{"user_id": "u1", "last_login_ts": None, "purchases": 2, "total_cents": 1235,
                                  "events": 7}]
    assert str(table.schema.field("last_login_ts").type) == "int64"  # typed even when every value is null
    upd = JobQuery(PageStats, state_partitions=2)
    assert seed.seed_columns(upd) == ["key", "lane", "blob"]
    state = {"open": [[0, 60_000, {"views": 1, "users": ["a"], "total_ms": 3, "max_ms": 3, "last_seen": 5}]],
             "closed": []}
    (row,) = upd.seed_table({"/p": state}).to_pylist()
    assert row["key"] == "/p" and row["lane"] == 0 and json.loads(row["blob"]) == state


def test_point_offsets_rewrites_batch_0_for_every_source_scan(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0,"conf":{"spark.sql.shuffle.partitions":"2"}}\n'
                                        '{"logOffset":0}')
    (ckpt / "offsets" / ".0.crc").write_bytes(b"crc of the old bytes")
    (ckpt / "sources" / "0").mkdir(parents=True)
    (ckpt / "sources" / "0" / "0").write_text("file source log")
    seed.point_offsets(ckpt, {"user-events": {"0": 12, "1": 7}}, sources=2)
    assert layout.batch_offsets(ckpt, 0) == [{"user-events": {"0": 12, "1": 7}}] * 2
    assert '"spark.sql.shuffle.partitions":"2"' in (ckpt / "offsets" / "0").read_text()  # metadata kept
    assert not (ckpt / "offsets" / ".0.crc").exists() and not (ckpt / "sources").exists()
    with pytest.raises(seed.SeedError, match="one-source"):
        seed.point_offsets(ckpt, {"t": {"0": 1}})  # already two sources: not a fresh seed
