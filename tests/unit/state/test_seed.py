"""Seeding helpers that need no Spark: the job contract and pointing a seeded checkpoint's offsets."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from streamops.checkpoints import layout
from streamops.state import seed


def test_seed_columns_come_from_the_jobs_seed_ddl(repo: Path) -> None:
    from streamops.spec import default_spec_path, get_app, import_job, load_specs

    job = import_job(get_app(load_specs(default_spec_path(repo)), "user_activity"), repo)
    assert seed.seed_columns(job) == ["user_id", "login_ts", "purchase_n", "cents", "n"]
    row = job.seed_row_from_changelog(b"u1", json.dumps({"user_id": "u1", "last_login_ts": 5, "purchases": 2,
                                                         "total_amount": 12.35, "events": 7}).encode())
    assert row == ("u1", 5, 2, 1235, 7) and job.seed_row_from_changelog(b"u1", None) is None


def test_a_job_without_the_contract_is_refused_by_name() -> None:
    with pytest.raises(seed.SeedError, match="no SEED_DDL"):
        seed.seed_columns(types.ModuleType("jobs.other"))


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
