"""Savepoints: consistent, checksummed copies of a checkpoint at a committed batch.

Spark writes every checkpoint file atomically (temp file, then rename) and never rewrites one,
so a copy taken while the app runs is consistent if it holds exactly the files batch N needs:
``metadata``, ``sources``, offsets and commits up to N, and for each state partition the store
versions up to N+1 (RocksDB changelog files, snapshot zips, their SST files, schema metadata).
Files of later batches are left out; files that vanish while copying are old versions the
store's maintenance deleted, which batch N does not need as long as newer ones are there.
A manifest lists every file with its SHA-256; the savepoint's checksum is the hash of the
manifest, so a restore can prove it got back exactly what was saved.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streamops.checkpoints import layout
from streamops.exceptions import StreamopsError

MANIFEST = "manifest.json"
#: a versioned state file: 12.changelog, 12.zip, 12_<uuid>.zip, their .crc siblings
_STATE_VERSION = re.compile(r"^\.?(\d+)(?:_[0-9a-fA-F-]+)?\.(zip|changelog|delta|snapshot)(\.crc)?$")
#: a batch file of the offsets/commits logs: 12 or .12.crc
_LOG_BATCH = re.compile(r"^\.?(\d+)(\.crc)?$")


class SavepointError(StreamopsError):
    """A savepoint cannot be taken or used (nothing committed, corrupted, unknown id).

    Operator action: read the message; ``streamops savepoints APP`` lists the usable ones.
    """


@dataclass(frozen=True)
class Manifest:
    app: str
    batch_id: int
    offsets: dict[str, dict[str, int]]
    files: dict[str, dict[str, Any]]  # relative path -> {"sha256", "bytes"}
    created_at: str

    @property
    def bytes(self) -> int:
        return sum(f["bytes"] for f in self.files.values())

    @property
    def sha256(self) -> str:
        body = json.dumps({"batch_id": self.batch_id, "files": self.files}, sort_keys=True).encode()
        return hashlib.sha256(body).hexdigest()

    @property
    def state_version(self) -> int:
        """The state store version a restored query loads (Spark: batch id + 1)."""
        return self.batch_id + 1

    def to_dict(self) -> dict[str, Any]:
        return {"app": self.app, "batch_id": self.batch_id, "offsets": self.offsets, "files": self.files,
                "created_at": self.created_at, "sha256": self.sha256, "bytes": self.bytes}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def needed(rel: Path, batch_id: int) -> bool:
    """Does a checkpoint at committed ``batch_id`` need this file (path relative to the checkpoint)?"""
    parts = rel.parts
    if parts[0] in ("offsets", "commits", "clocks") and len(parts) == 2:
        m = _LOG_BATCH.match(parts[1])
        return m is None or int(m.group(1)) <= batch_id
    if parts[0] == "state":
        m = _STATE_VERSION.match(parts[-1])
        return m is None or int(m.group(1)) <= batch_id + 1
    return True


def snapshot(checkpoint: Path, dest: Path, app: str, batch_id: int | None = None) -> Manifest:
    """Copy what committed batch ``batch_id`` (default: the last one) needs into ``dest``."""
    batch = layout.last_committed_batch(checkpoint) if batch_id is None else batch_id
    if batch is None:
        raise SavepointError(f"{app}: nothing committed yet in {checkpoint}; deploy it and wait for a batch")
    offsets = layout.batch_end_offsets(checkpoint, batch)
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    files: dict[str, dict[str, Any]] = {}
    for root, _dirs, names in os.walk(checkpoint):
        for name in names:
            src = Path(root) / name
            rel = src.relative_to(checkpoint)
            if not needed(rel, batch):
                continue
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copy2(src, target)
            except FileNotFoundError:
                continue  # deleted by the store's maintenance meanwhile: an old version
            files[str(rel)] = {"sha256": _sha256(target), "bytes": target.stat().st_size}
    missing = [p for p in (f"offsets/{batch}", f"commits/{batch}", "metadata") if p not in files]
    if missing:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SavepointError(f"{app}: batch {batch} files vanished while copying: {missing}")
    manifest = Manifest(app, batch, offsets, files, datetime.now(UTC).isoformat(timespec="seconds"))
    (tmp / MANIFEST).write_text(json.dumps(manifest.to_dict(), indent=1, sort_keys=True))
    tmp.replace(dest)  # a savepoint directory exists only when complete
    return manifest


def read_manifest(path: Path) -> Manifest:
    try:
        data = json.loads((path / MANIFEST).read_text())
    except FileNotFoundError:
        raise SavepointError(f"{path}: not a savepoint (no {MANIFEST})") from None
    return Manifest(data["app"], int(data["batch_id"]), data["offsets"], data["files"], data["created_at"])


def verify(path: Path, expected_sha256: str | None = None) -> Manifest:
    """Re-hash every file; raise ``SavepointError`` naming what is missing, changed or extra."""
    manifest = read_manifest(path)
    if expected_sha256 is not None and manifest.sha256 != expected_sha256:
        raise SavepointError(f"{path}: manifest checksum {manifest.sha256[:12]} != recorded {expected_sha256[:12]}")
    bad = []
    for rel, meta in sorted(manifest.files.items()):
        f = path / rel
        if not f.is_file():
            bad.append(f"missing {rel}")
        elif f.stat().st_size != meta["bytes"] or _sha256(f) != meta["sha256"]:
            bad.append(f"changed {rel}")
    present = {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()} - {MANIFEST}
    bad += [f"extra {rel}" for rel in sorted(present - set(manifest.files))]
    if bad:
        raise SavepointError(f"{path}: savepoint is corrupted ({len(bad)} problems): {', '.join(bad[:5])}")
    return manifest


def install(savepoint: Path, checkpoint: Path, aside: Path) -> None:
    """Move the current checkpoint to ``aside`` (kept) and put a copy of the savepoint in its place."""
    manifest = read_manifest(savepoint)
    if checkpoint.exists():
        aside.parent.mkdir(parents=True, exist_ok=True)
        checkpoint.replace(aside)
    tmp = checkpoint.with_name(checkpoint.name + ".restoring")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel in manifest.files:
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(savepoint / rel, target)
    layout.rebase_state_metadata(tmp, to=checkpoint)  # named state names its files by path
    tmp.replace(checkpoint)


def expired(savepoints: list[dict[str, Any]], retain_count: int, retain_age_s: float,
            now: datetime | None = None) -> list[dict[str, Any]]:
    """Savepoints beyond retention: more than ``retain_count`` newest, or older than the age.
    The newest one is always kept (a restore needs something)."""
    now = now or datetime.now(UTC)
    ordered = sorted(savepoints, key=lambda s: (s["created_at"], s["batch_id"]), reverse=True)
    out = []
    for i, sp in enumerate(ordered):
        if i == 0:
            continue
        if i >= retain_count or (now - sp["created_at"]).total_seconds() > retain_age_s:
            out.append(sp)
    return out
