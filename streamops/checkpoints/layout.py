"""Read a Structured Streaming checkpoint directly (no Spark): which batch is committed and
which source offsets it ended at.

Layout: ``offsets/<N>`` (written before batch N runs: "v1", a metadata JSON line, then one
offset JSON per source), ``commits/<N>`` (written after batch N's sink succeeded), ``state/``,
``sources/``, ``metadata``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamops.host.files import write_json


def _batch_ids(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def last_committed_batch(checkpoint: Path) -> int | None:
    ids = _batch_ids(checkpoint / "commits")
    return ids[-1] if ids else None


def last_planned_batch(checkpoint: Path) -> int | None:
    ids = _batch_ids(checkpoint / "offsets")
    return ids[-1] if ids else None


def batch_offsets(checkpoint: Path, batch_id: int) -> list[dict]:
    """End offsets of ``batch_id`` per source, each ``{topic: {partition: next_offset}}``."""
    lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ValueError(f"{checkpoint}/offsets/{batch_id}: unknown format")
    out = []
    for line in lines[2:]:
        out.append({} if line.strip() in ("", "-") else json.loads(line))
    return out


def batch_watermark(checkpoint: Path, batch_id: int) -> int | None:
    """Spark's event-time watermark in ``batch_id`` (the offsets log's metadata; None: none yet)."""
    lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    wm = json.loads(lines[1]).get("batchWatermarkMs", 0) if len(lines) > 1 else 0
    return int(wm) if wm and int(wm) > 0 else None


def batch_timestamp(checkpoint: Path, batch_id: int) -> int | None:
    """When Spark planned ``batch_id`` (the offsets log's ``batchTimestampMs``, wall clock ms;
    None: the file is gone, Spark keeps ``minBatchesToRetain`` of them, or it has no time)."""
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    except FileNotFoundError:
        return None
    ts = json.loads(lines[1]).get("batchTimestampMs") if len(lines) > 1 else None
    return int(ts) if ts else None


def batch_end_offsets(checkpoint: Path, batch_id: int) -> dict[str, dict[str, int]]:
    """All sources' end offsets of ``batch_id`` merged, JSON-shaped ``{topic: {"partition": offset}}``."""
    out: dict[str, dict[str, int]] = {}
    for source in batch_offsets(checkpoint, batch_id):
        for topic, parts in source.items():
            out.setdefault(topic, {}).update({str(p): int(o) for p, o in parts.items()})
    return out


def committed_offsets(checkpoint: Path) -> dict[str, dict[int, int]]:
    """Input offsets covered by the last committed batch (empty if nothing committed)."""
    batch = last_committed_batch(checkpoint)
    if batch is None:
        return {}
    merged: dict[str, dict[int, int]] = {}
    for source in batch_offsets(checkpoint, batch):
        for topic, parts in source.items():
            merged.setdefault(topic, {}).update({int(p): int(o) for p, o in parts.items()})
    return merged


#: written by ``reset`` into a fresh checkpoint: where its first batch starts. Spark ignores the
#: file; the runtime passes it as ``startingOffsets`` while the offsets log is empty, and ``check``
#: folds the input from there.
START_FILE = "streamops-start.json"


def start_offsets(checkpoint: Path) -> dict[str, dict[str, int]] | None:
    """The offsets a reset checkpoint starts from (None: it starts where the spec says)."""
    try:
        return json.loads((checkpoint / START_FILE).read_text())
    except FileNotFoundError:
        return None


def write_start_offsets(checkpoint: Path, offsets: dict[str, dict[str, int]]) -> None:
    write_json(checkpoint / START_FILE, {t: {str(p): int(o) for p, o in ps.items()} for t, ps in offsets.items()})


def next_offsets(checkpoint: Path) -> dict[tuple[str, int], int]:
    """Where the checkpoint reads next, per (topic, partition): the last committed batch's end,
    else where a reset made it start (empty: where the spec says)."""
    committed = committed_offsets(checkpoint)
    if committed:
        return {(t, int(p)): int(o) for t, ps in committed.items() for p, o in ps.items()}
    start = start_offsets(checkpoint) or {}
    return {(t, int(p)): int(o) for t, ps in start.items() for p, o in ps.items()}


def clamp_batch_offsets(checkpoint: Path, batch_id: int, bound: dict[str, dict[str, int]]) -> bool:
    """Lower ``batch_id``'s planned end offsets to ``bound`` where they pass it (True if any did).

    For a bounded read (``kafka_io.read_kafka(stop_at_offsets=...)``): the batch planned past the
    bound but consumed nothing there (those rows were filtered out), so its true end is the bound,
    and the next run on this checkpoint must start there. Hadoop's checksum sidecar of the rewritten
    file goes (a missing ``.crc`` is not checked; a stale one would fail the read)."""
    path = checkpoint / "offsets" / str(batch_id)
    lines = path.read_text().splitlines()
    changed = False
    for i in range(2, len(lines)):
        if lines[i].strip() in ("", "-"):
            continue
        source = json.loads(lines[i])
        for topic, parts in source.items():
            for p, o in parts.items():
                cap = bound.get(topic, {}).get(str(p))
                if cap is not None and int(o) > int(cap):
                    parts[p] = int(cap)
                    changed = True
        lines[i] = json.dumps(source, separators=(",", ":"))
    if changed:
        tmp = path.with_name(f".{path.name}.clamp")
        tmp.write_text("\n".join(lines))
        path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
        tmp.replace(path)
    return changed


#: jobs with stream time: ``clocks/<N>``, written by the driver after batch N ran and before it
#: commits: each input partition's stream time (largest event time) after batch N and the watermark.
#: Batch N+1's tasks read it (``query.worker.batch_clocks``); a replayed batch reads the same file.
CLOCKS = "clocks"


@dataclass(frozen=True)
class Clocks:
    batch_id: int
    partitions: dict[tuple[str, int], int]  # partitions that have shown an event (or were released)
    watermark: int | None
    #: idleness (``stream_time.step_clocks``): partitions released from holding the watermark, and
    #: since when (epoch ms); their stream time above is raised to the watermark of the others
    idle: dict[tuple[str, int], int] = field(default_factory=dict)
    #: each input partition's end offset and when (epoch ms) it last moved: how long it has been quiet
    moved: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    #: every raise a released partition's records were judged against, as (offset, stream time):
    #: from that offset on, the partition's stream time is at least that. ``check``'s fold replays them
    raises: dict[tuple[str, int], list[tuple[int, int]]] = field(default_factory=dict)


#: clocks files kept behind the newest, as Spark keeps its offsets and commits logs
#: (``spark.sql.streaming.minBatchesToRetain``)
CLOCKS_RETAINED = 100


def read_clocks(checkpoint: Path, upto_batch: int) -> Clocks | None:
    """The newest clocks written for a batch <= ``upto_batch`` (None: none). Every batch writes
    one, so the file of ``upto_batch`` is read without listing the folder when it is there."""
    path = checkpoint / CLOCKS / str(upto_batch)
    if not path.is_file():
        ids = [b for b in _batch_ids(checkpoint / CLOCKS) if b <= upto_batch]
        if not ids:
            return None
        path = checkpoint / CLOCKS / str(ids[-1])
    raw = json.loads(path.read_text())
    parts = {tp: int(st) for tp, st in _per_partition(raw["partitions"]).items() if st is not None}
    return Clocks(int(raw["batch_id"]), parts, raw["watermark"],
                  idle={tp: int(v) for tp, v in _per_partition(raw.get("idle")).items()},
                  moved={tp: (int(v[0]), int(v[1])) for tp, v in _per_partition(raw.get("moved")).items()},
                  raises={tp: [(int(o), int(x)) for o, x in v] for tp, v in _per_partition(raw.get("raises")).items()})


def _per_partition(by_topic: dict[str, dict[str, Any]] | None) -> dict[tuple[str, int], Any]:
    """A clocks file's ``{topic: {"partition": value}}`` by (topic, partition) (``_by_topic`` back)."""
    return {(t, int(p)): v for t, ps in (by_topic or {}).items() for p, v in ps.items()}


def _by_topic(items: dict[tuple[str, int], Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for (t, p), v in sorted(items.items()):
        out.setdefault(t, {})[str(p)] = v
    return out


def write_clocks(checkpoint: Path, clocks: Clocks, all_partitions: list[tuple[str, int]]) -> None:
    out: dict[str, dict[str, int | None]] = {}
    for t, p in sorted(set(all_partitions) | set(clocks.partitions)):
        out.setdefault(t, {})[str(p)] = clocks.partitions.get((t, p))
    idleness = {name: _by_topic({tp: list(v) if isinstance(v, tuple) else v for tp, v in items.items()})
                for name, items in (("idle", clocks.idle), ("moved", clocks.moved),
                                    ("raises", {tp: [list(r) for r in rs] for tp, rs in clocks.raises.items()}))
                if items}
    write_json(checkpoint / CLOCKS / str(clocks.batch_id),
               {"batch_id": clocks.batch_id, "partitions": out, "watermark": clocks.watermark, **idleness})
    old = checkpoint / CLOCKS / str(clocks.batch_id - CLOCKS_RETAINED)
    old.unlink(missing_ok=True)  # one out per one in: the folder stays CLOCKS_RETAINED files long


def clocks_marker(clocks: Clocks, spark_watermark: int | None) -> dict:
    """What a job's stream time is after a batch, for its marker: the partitions' clocks, the
    idleness, and Spark's watermark in that batch (rebuild-state seeds a checkpoint with them,
    ``marker_clocks``)."""
    idleness = {"idle": [[t, p, ms] for (t, p), ms in sorted(clocks.idle.items())],
                "moved": [[t, p, *v] for (t, p), v in sorted(clocks.moved.items())],
                "raises": [[t, p, [list(r) for r in rs]] for (t, p), rs in sorted(clocks.raises.items())]}
    return {"clocks": [[t, p, st] for (t, p), st in sorted(clocks.partitions.items())],
            "watermark": clocks.watermark, "spark_watermark": spark_watermark,
            **{k: v for k, v in idleness.items() if v}}


def marker_clocks(timed: dict, batch_id: int = 0) -> Clocks:
    """``clocks_marker``'s clocks back, as batch ``batch_id``'s."""
    return Clocks(batch_id, {(t, int(p)): int(st) for t, p, st in timed["clocks"]}, timed["watermark"],
                  idle={(t, int(p)): int(ms) for t, p, ms in timed.get("idle", [])},
                  moved={(t, int(p)): (int(o), int(ms)) for t, p, o, ms in timed.get("moved", [])},
                  raises={(t, int(p)): [(int(o), int(x)) for o, x in rs] for t, p, rs in timed.get("raises", [])})


def rebase_state_metadata(checkpoint: Path, to: Path | None = None) -> int:
    """Point a checkpoint's state operator metadata at its own files; returns the files rewritten.

    ``transformWithState`` (named state) records its state schema files by absolute path in
    ``state/<op>/_metadata/v2/<batch>``. A checkpoint that is moved or copied into place (a seeded
    one by rebuild-state, a savepoint by restore, an aside one by undo) would name the files where
    it was written. ``to``: where ``checkpoint`` is about to be moved (default: where it is)."""
    root = str((to or checkpoint).resolve())
    rewritten = 0
    for path in sorted(checkpoint.glob("state/*/_metadata/v2/*")):
        if not path.name.isdigit():
            continue
        lines = path.read_text().splitlines()
        if len(lines) < 2:
            continue
        meta = json.loads(lines[1])
        changed = False
        for store in meta.get("stateStoreInfo", []):
            paths = []
            for p in store.get("stateSchemaFilePaths", []):
                i = p.rfind("/state/")
                new = f"file:{root}{p[i:]}" if i >= 0 else p
                changed |= new != p
                paths.append(new)
            if "stateSchemaFilePaths" in store:
                store["stateSchemaFilePaths"] = paths
        if not changed:
            continue
        tmp = path.with_name(f".{path.name}.rebase")
        tmp.write_text("\n".join([lines[0], json.dumps(meta, separators=(",", ":")), *lines[2:]]))
        tmp.replace(path)
        path.with_name(f".{path.name}.crc").unlink(missing_ok=True)  # Hadoop would reject the new bytes
        rewritten += 1
    return rewritten


@dataclass(frozen=True)
class ClocksFile:
    """One ``clocks/N`` whole, as status reads it (``observe.watermark``): unlike ``Clocks``, with
    the partitions that have shown no event yet (None) and the idle ones."""

    batch_id: int
    #: every input partition: its stream time (ms), None while it has shown no event
    partitions: dict[tuple[str, int], int | None]
    watermark: int | None
    #: partitions an idleness timeout released (the optional ``idle`` key), since when (wall clock
    #: ms): their stream time is raised to the watermark, so they never hold it
    idle: dict[tuple[str, int], int]


def clocks_file(checkpoint: Path, batch_id: int) -> ClocksFile | None:
    """The clocks file of exactly ``batch_id`` (None: not written, or no longer kept)."""
    try:
        raw = json.loads((checkpoint / CLOCKS / str(batch_id)).read_text())
    except FileNotFoundError:
        return None
    parts = {tp: (None if st is None else int(st)) for tp, st in _per_partition(raw["partitions"]).items()}
    idle = {tp: int(since) for tp, since in _per_partition(raw.get("idle")).items()}
    return ClocksFile(int(raw["batch_id"]), parts, raw["watermark"], idle)
