"""Compaction's file logic on checkpoint trees shaped like Spark's RocksDB layout (no Spark)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from streamops.checkpoints import compact as cc


def _zip(path: Path, ssts: list[str]) -> None:
    meta = {"sstFiles": [{"localFileName": f"{i:06d}.sst", "dfsSstFileName": n, "sizeBytes": 3}
                         for i, n in enumerate(ssts)], "numKeys": 1}
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata", "v1\n" + json.dumps(meta))
        z.writestr("CURRENT", "MANIFEST-000001")
    cc.crc(path).write_bytes(b"crc")


def _partition(root: Path, part: int, *, versions: int, zips: dict[int, list[str]]) -> Path:
    d = root / "state" / "0" / str(part)
    (d / "SSTs").mkdir(parents=True)
    (d / "_metadata").mkdir()
    (d / "_metadata" / "schema").write_text("s")
    for v in range(1, versions + 1):
        (d / f"{v}.changelog").write_bytes(b"x" * 10)
        cc.crc(d / f"{v}.changelog").write_bytes(b"c")
    names = sorted({n for ns in zips.values() for n in ns} | {"000099-orphan.sst"})
    for n in names:
        (d / "SSTs" / n).write_bytes(b"sst")
        cc.crc(d / "SSTs" / n).write_bytes(b"c")
    for v, ns in zips.items():
        _zip(d / f"{v}.zip", ns)
    return d


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    c = tmp_path / "ckpt"
    for log in ("offsets", "commits"):
        (c / log).mkdir(parents=True)
        for b in range(12):
            (c / log / str(b)).write_text("v1\n{}\n{}")
            cc.crc(c / log / str(b)).write_bytes(b"c")
    (c / "metadata").write_text("{}")
    _partition(c, 0, versions=12, zips={5: ["000005-a.sst"], 10: ["000005-a.sst", "000010-b.sst"]})
    _partition(c, 1, versions=12, zips={})
    return c


@pytest.mark.parametrize(("zips", "version", "expected"), [
    ({}, 7, (0, 7)),  # no snapshot: replay every changelog from empty
    ({5: []}, 7, (5, 2)),
    ({5: [], 10: []}, 7, (5, 2)),  # a later snapshot does not help an earlier version
    ({5: [], 7: []}, 7, (7, 0)),
])
def test_chain_starts_at_the_newest_snapshot_not_after_the_version(zips, version, expected) -> None:
    ps = cc.PartitionState(Path("."), zips={v: Path(f"{v}.zip") for v in zips},
                           changelogs={v: Path(f"{v}.changelog") for v in range(1, 12)})
    assert ps.chain(version) == expected


def test_partitions_and_zip_ssts(ckpt: Path) -> None:
    parts = cc.partitions(ckpt)
    assert sorted(parts) == [(0, 0), (0, 1)]
    p0 = parts[(0, 0)]
    assert sorted(p0.zips) == [5, 10] and sorted(p0.changelogs) == list(range(1, 13))
    assert cc.zip_ssts(p0.zips[10]) == {"000005-a.sst", "000010-b.sst"}
    assert p0.chain(11) == (10, 1) and parts[(0, 1)].chain(11) == (0, 11)


def test_offline_plan_deletes_older_versions_and_logs_but_not_later_ones(ckpt: Path) -> None:
    plan = cc.plan(ckpt, 11, live=False)  # batch 10 committed -> state version 11
    names = {str(p.relative_to(ckpt)) for p in plan.delete}
    assert plan.install == [(0, 0), (0, 1)]
    for part in (0, 1):
        assert {f"state/0/{part}/{v}.changelog" for v in range(1, 12)} <= names
        assert f"state/0/{part}/12.changelog" not in names  # a later version: never touched
    assert {"state/0/0/5.zip", "state/0/0/10.zip"} <= names
    # offsets/commits: Spark reads the last two entries on restart (9 and 10); later ones stay
    assert {f"offsets/{b}" for b in range(9)} | {f"commits/{b}" for b in range(9)} <= names
    assert not {"offsets/9", "offsets/10", "offsets/11", "commits/9", "commits/10"} & names
    assert not any("_metadata" in n or n == "metadata" for n in names)
    # SSTs are decided once the new snapshot is in (orphan_ssts)
    assert not any("SSTs" in n for n in names)
    assert plan.to_dict()["chains_before"] == {"0/0": {"snapshot": 10, "changelogs": 1},
                                              "0/1": {"snapshot": 0, "changelogs": 11}}


def test_live_plan_keeps_the_newest_older_snapshot_and_every_sst(ckpt: Path) -> None:
    plan = cc.plan(ckpt, 11, live=True)
    names = {str(p.relative_to(ckpt)) for p in plan.delete}
    assert "state/0/0/5.zip" in names and "state/0/0/10.zip" not in names  # its SSTs may be reused
    assert not any("SSTs" in n for n in names)


def test_install_snapshot_then_orphans_and_delete(ckpt: Path, tmp_path: Path) -> None:
    seed = tmp_path / "seed" / "state" / "0" / "0"
    (seed / "SSTs").mkdir(parents=True)
    (seed / "SSTs" / "000008-new.sst").write_bytes(b"new")
    cc.crc(seed / "SSTs" / "000008-new.sst").write_bytes(b"c")
    _zip(seed / "1.zip", ["000008-new.sst"])
    target = ckpt / "state" / "0" / "0"
    plan = cc.plan(ckpt, 11, live=False)
    copied = cc.install_snapshot(seed / "1.zip", target, 11)
    assert target / "11.zip" in copied and cc.crc(target / "11.zip").exists()
    assert (target / "SSTs" / "000008-new.sst").read_bytes() == b"new"
    assert cc.zip_ssts(target / "11.zip") == {"000008-new.sst"}
    expected = plan.delete_bytes  # measured on the files, so before they go
    assert cc.delete(plan.delete) == expected > 0
    ps = cc.partitions(ckpt)[(0, 0)]
    assert sorted(ps.zips) == [11] and sorted(ps.changelogs) == [12]
    orphans = {f.name for f in cc.orphan_ssts(ps)}
    assert orphans == {"000005-a.sst", "000010-b.sst", "000099-orphan.sst"}
    cc.delete(cc.orphan_ssts(ps))
    assert {f.name for f in cc.partitions(ckpt)[(0, 0)].ssts} == {"000008-new.sst"}
    assert not list((target / "SSTs").glob(".000005-a.sst.crc"))  # sidecars go with their files
    assert cc.delete([target / "nope.changelog"]) == 0
