"""Compaction of a checkpoint's RocksDB state: what to install, what may go (pure file logic).

With changelog checkpointing a state partition is a chain: snapshot zips (``N.zip``, each naming
the SST files under ``SSTs/`` it needs) and one ``N.changelog`` per version. Loading version V
reads the newest zip <= V and replays every changelog after it; a chain grows whenever the stores
are reloaded (restarts, resizes) before Spark's maintenance uploads a snapshot, and it is what a
restore pays for. Compacting at version V installs one snapshot zip *of version V* (seeded by
``streamops.state.seed``) and deletes what no retained batch needs any more:

- changelogs <= V and zips < V (a load of any version >= V starts at V.zip);
- offsets / commits log entries of batches older than the batch before V's (Spark reads the last
  two entries on restart);
- SST files no remaining zip names — only when the app is stopped. While it runs, its executors
  may still reuse an SST in their next snapshot; then the newest zip Spark made before V is kept
  too and orphaned SSTs are left to Spark's own maintenance, which knows what it reuses.

Files of versions > V (written meanwhile by the running query) are never touched. Savepoints are
self-contained copies, so nothing here can take a file a retained savepoint needs.
"""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

#: a versioned state file (checkpoint format v1 names; v2 adds _<uuid>)
_VERSIONED = re.compile(r"^(\d+)(?:_[0-9a-fA-F-]+)?\.(zip|changelog)$")
_LOG_ENTRY = re.compile(r"^\d+$")


def crc(path: Path) -> Path:
    """Hadoop's local-filesystem checksum sidecar of ``path``."""
    return path.with_name(f".{path.name}.crc")


@dataclass
class PartitionState:
    """One state partition's files."""

    path: Path
    zips: dict[int, Path] = field(default_factory=dict)
    changelogs: dict[int, Path] = field(default_factory=dict)
    ssts: list[Path] = field(default_factory=list)

    def chain(self, version: int) -> tuple[int, int]:
        """(snapshot version a load of ``version`` starts from (0: none), changelogs it replays)."""
        base = max((v for v in self.zips if v <= version), default=0)
        return base, sum(1 for v in self.changelogs if base < v <= version)


def partitions(checkpoint: Path) -> dict[tuple[int, int], PartitionState]:
    """(operator, partition) -> its files, for every state partition of the checkpoint."""
    out: dict[tuple[int, int], PartitionState] = {}
    root = checkpoint / "state"
    if not root.is_dir():
        return out
    for op_dir in sorted(p for p in root.iterdir() if p.name.isdigit()):
        for part_dir in sorted(p for p in op_dir.iterdir() if p.name.isdigit()):
            ps = PartitionState(part_dir)
            for f in part_dir.iterdir():
                m = _VERSIONED.match(f.name)
                if m:
                    (ps.zips if m.group(2) == "zip" else ps.changelogs)[int(m.group(1))] = f
            sst_dir = part_dir / "SSTs"
            if sst_dir.is_dir():
                ps.ssts = sorted(f for f in sst_dir.iterdir() if f.name.endswith(".sst"))
            out[(int(op_dir.name), int(part_dir.name))] = ps
    return out


def zip_ssts(zip_path: Path) -> set[str]:
    """SST file names (under ``SSTs/``) a snapshot zip needs, from its ``metadata`` entry."""
    with zipfile.ZipFile(zip_path) as z:
        text = z.read("metadata").decode()
    body = text.split("\n", 1)[1] if text.startswith("v") else text
    return {f["dfsSstFileName"] for f in json.loads(body).get("sstFiles", [])}


def size(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        for f in (p, crc(p)):
            try:
                total += f.stat().st_size
            except FileNotFoundError:
                pass
    return total


def tree_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0


@dataclass
class Plan:
    """What compacting at state ``version`` (= batch + 1) does to one checkpoint."""

    checkpoint: Path
    version: int
    live: bool
    install: list[tuple[int, int]]  # partitions that get a snapshot zip of ``version``
    delete: list[Path]  # data files (their .crc sidecars go with them)
    chains_before: dict[str, tuple[int, int]]  # "op/part" -> (snapshot, changelogs to replay)

    @property
    def delete_bytes(self) -> int:
        return size(self.delete)

    def to_dict(self) -> dict:
        return {"checkpoint": str(self.checkpoint), "state_version": self.version, "live": self.live,
                "install_snapshots": [f"{o}/{p}" for o, p in self.install],
                "delete_files": len(self.delete), "delete_bytes": self.delete_bytes,
                "chains_before": {k: {"snapshot": s, "changelogs": n} for k, (s, n) in self.chains_before.items()},
                "chains_after": {k: {"snapshot": self.version, "changelogs": 0} for k in self.chains_before}}


def plan(checkpoint: Path, version: int, *, live: bool) -> Plan:
    """Pure: the files compaction at ``version`` installs and deletes (see module docstring)."""
    parts = partitions(checkpoint)
    install, delete = [], []
    chains = {}
    for (op, part), ps in parts.items():
        chains[f"{op}/{part}"] = ps.chain(version)
        if version not in ps.zips:
            install.append((op, part))
        older = sorted(v for v in ps.zips if v < version)
        keep_zip = older[-1:] if live else []  # a running executor may reuse its SSTs
        delete += [ps.zips[v] for v in older if v not in keep_zip]
        delete += [ps.changelogs[v] for v in sorted(ps.changelogs) if v <= version]
        if not live:
            kept = set()
            for v in [v for v in ps.zips if v >= version]:
                kept |= zip_ssts(ps.zips[v])
            if (op, part) in install:
                kept = None  # decided after the new zip is installed (``orphan_ssts``)
            if kept is not None:
                delete += [f for f in ps.ssts if f.name not in kept]
    batch = version - 1
    for log in ("offsets", "commits"):
        folder = checkpoint / log
        if folder.is_dir():
            delete += sorted((f for f in folder.iterdir() if _LOG_ENTRY.match(f.name) and int(f.name) < batch - 1),
                             key=lambda f: int(f.name))
    return Plan(checkpoint, version, live, install, delete, chains)


def install_snapshot(seed_zip: Path, target_dir: Path, version: int) -> list[Path]:
    """Copy a seeded snapshot zip (and the SSTs it names) into ``target_dir`` as ``version``.zip.

    SSTs first, the zip last and by rename: a reader never sees a zip whose files are missing."""
    copied = []
    (target_dir / "SSTs").mkdir(parents=True, exist_ok=True)
    for name in sorted(zip_ssts(seed_zip)):
        src = seed_zip.parent / "SSTs" / name
        for f in (src, crc(src)):
            if f.exists():
                shutil.copy2(f, target_dir / "SSTs" / f.name)
        copied.append(target_dir / "SSTs" / name)
    dest = target_dir / f"{version}.zip"
    if crc(seed_zip).exists():
        tmp_crc = target_dir / f".{dest.name}.crc.tmp"
        shutil.copy2(crc(seed_zip), tmp_crc)
        tmp_crc.replace(crc(dest))
    tmp = target_dir / f".{dest.name}.compacting"
    shutil.copy2(seed_zip, tmp)
    tmp.replace(dest)
    copied.append(dest)
    return copied


def orphan_ssts(ps: PartitionState) -> list[Path]:
    """SSTs no zip of the partition names (offline only: see module docstring)."""
    named: set[str] = set()
    for z in ps.zips.values():
        named |= zip_ssts(z)
    return [f for f in ps.ssts if f.name not in named]


def delete(paths: list[Path]) -> int:
    """Delete files and their .crc sidecars; bytes freed (files already gone count 0)."""
    freed = 0
    for p in paths:
        for f in (p, crc(p)):
            try:
                n = f.stat().st_size
                f.unlink()
                freed += n
            except FileNotFoundError:
                pass
    return freed
