"""``streamops reset APP``: the application reset tool for Spark checkpoints.

Kafka Streams resets an application by moving its group offsets and wiping its state; a Spark
query keeps both in its checkpoint, so here a reset builds the checkpoint the app continues from:

* ``--state wipe`` (default): the old checkpoint is set aside whole and a fresh one is made that
  starts at the new offsets (``streamops-start.json``, read by the runtime while the offsets log
  is empty). The changelog topic is recreated empty — it mirrors the state, and brokers refuse to
  delete records from a compacted topic.
* ``--state keep`` (needs ``--force``: kept state plus replayed input counts twice): a copy of the
  checkpoint is set aside; in place, the last committed batch's end offsets are rewritten to the
  new ones, so the next batch continues the kept state from there.

Either way the batch marker is rewound so the next batch is written again (output and changelog
upserts), while DLQ entries of input records already written are not written twice. Before the
topics change, the changelog's and the output's latest value per key are saved beside the old
checkpoint, so ``reset --undo OP`` can put checkpoint, offsets and topics back as they were.
``--output-version v2`` makes the app write ``<output>.v2`` from now on and leaves the current
output as it is (blue/green). The dry run computes the whole plan and changes nothing.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamops.checkpoints import compact as cc
from streamops.checkpoints import layout
from streamops.exceptions import StreamopsError, UsageError
from streamops.ledger import Ledger
from streamops.ledger.outputs import check_version
from streamops.lifecycle import driver
from streamops.lifecycle.replace import Replacement, aside_dir, may_replace_checkpoint
from streamops.reset.targets import TP, PartitionMove, ResetTarget, resolve
from streamops.settings import Settings
from streamops.spark.session import checkpoint_dir
from streamops.spec import AppSpec, versioned_output

STATES = ("wipe", "keep")
SAVED = {"changelog": "changelog.parquet", "output": "output.parquet"}


class ResetError(StreamopsError):
    """A reset or its undo cannot go on.

    Operator action: read the message; nothing was changed unless it says so.
    """


# -- inputs of a plan ------------------------------------------------------------------------------
def _watermarks(settings: Settings, spec: AppSpec) -> dict[TP, tuple[int, int]]:
    from streamops.kafka.admin import end_offsets

    return {(t, p): lh for t in spec.input_topics for p, lh in end_offsets(settings.kafka_bootstrap, t).items()}


def current_offsets(checkpoint: Path) -> dict[TP, int]:
    """Where the checkpoint reads next: the last committed batch's end, else where it starts."""
    committed = layout.committed_offsets(checkpoint)
    if committed:
        return {(t, int(p)): int(o) for t, ps in committed.items() for p, o in ps.items()}
    start = layout.start_offsets(checkpoint) or {}
    return {(t, int(p)): int(o) for t, ps in start.items() for p, o in ps.items()}


def _times(settings: Settings, spec: AppSpec, timestamp_ms: int) -> dict[TP, int | None]:
    from streamops.kafka.admin import offsets_for_times

    return {(t, p): o for t in spec.input_topics
            for p, o in offsets_for_times(settings.kafka_bootstrap, t, timestamp_ms).items()}


def _by_topic(moves: list[PartitionMove]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for m in moves:
        out.setdefault(m.topic, {})[str(m.partition)] = m.target
    return out


# -- plan ------------------------------------------------------------------------------------------
def reset_plan(settings: Settings, spec: AppSpec, ledger: Ledger, target: ResetTarget, *, state: str = "wipe",
               force: bool = False, output_version: str | None = None) -> dict[str, Any]:
    """Everything a reset would do, computed from the checkpoint and the broker; changes nothing."""
    if state not in STATES:
        raise UsageError(f"--state must be one of {', '.join(STATES)}, got {state!r}")
    if state == "keep" and not force:
        raise UsageError("--state keep replays input into state that already counted it: every replayed record "
                         "is counted twice. Add --force if that is what you want; the default --state wipe "
                         "starts from empty state")
    check_version(output_version)
    ckpt = checkpoint_dir(settings, spec)
    batch = layout.last_committed_batch(ckpt)
    if state == "keep" and batch is None:
        raise UsageError(f"{spec.name}: --state keep needs a committed batch to keep; {ckpt} has none")
    ts = target.timestamp_ms()
    moves = resolve(target, watermarks=_watermarks(settings, spec), current=current_offsets(ckpt),
                    times=_times(settings, spec, ts) if ts is not None else None)
    live_before = ledger.output_version(spec.name)
    out_before = versioned_output(spec.output_topic, live_before)
    out_after = versioned_output(spec.output_topic, output_version or live_before)
    running = driver.running(settings, spec.name) is not None
    parts = len(cc.partitions(ckpt)) or spec.state_partitions
    aside = str(aside_dir(settings, spec.name) / "<time>-op<id>")
    actions = []
    if running:
        actions.append("stop the app at a batch boundary (--stop-first)")
    actions.append(f"save the latest value per key of {spec.changelog_topic}"
                   + ("" if output_version else f" and {out_before}") + f" to {aside} (for --undo)")
    if state == "wipe":
        actions += [f"set the checkpoint aside to {aside}/checkpoint (kept whole)",
                    f"make a new checkpoint starting at the offsets above, with empty state ({parts} partitions)",
                    f"recreate {spec.changelog_topic} empty (it mirrors the state)",
                    "rewind the batch marker to -1: the next batch is 0"]
    else:
        actions += [f"copy the checkpoint to {aside}/checkpoint",
                    (f"keep the state at version {batch + 1}; batch {batch + 1} reads from the offsets above "
                     f"(replayed records are counted again)"),
                    f"keep {spec.changelog_topic} (it mirrors the kept state)",
                    f"rewind the batch marker to {batch}: the next batch is {batch + 1}"]
    if out_after != out_before:
        actions.append(f"write the output to {out_after} from now on; {out_before} stays as it is")
    else:
        actions.append(f"keep writing {out_before}: reprocessed keys get new upserts there")
    if running:
        actions.append("start the app again at its parallelism")
    return {
        "app": spec.name, "target": target.describe(), "params": target.params(),
        "timestamp_ms": ts, "state": state, "running": running, "checkpoint": str(ckpt), "batch_id": batch,
        "state_partitions": parts, "offsets": [m.to_dict() for m in moves],
        "records_to_reprocess": sum(m.reprocess for m in moves), "records_to_skip": sum(m.skip for m in moves),
        "records_to_process": sum(m.to_process for m in moves), "clamped": sum(m.clamped for m in moves),
        "changelog_topic": spec.changelog_topic, "output_topic_before": out_before, "output_topic_after": out_after,
        "output_version_before": live_before, "output_version_after": output_version or live_before,
        "set_aside_to": aside, "actions": actions,
    }


# -- execution -------------------------------------------------------------------------------------
def reset(settings: Settings, spec: AppSpec, ledger: Ledger, target: ResetTarget, *, state: str = "wipe",
          force: bool = False, output_version: str | None = None, dry_run: bool = False, stop_first: bool = False,
          who: str | None = None, timeout: float = 300.0,
          progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Reset the app's input offsets and state (see module docstring)."""
    plan = reset_plan(settings, spec, ledger, target, state=state, force=force, output_version=output_version)
    if dry_run:
        return {**plan, "dry_run": True}
    may_replace_checkpoint(settings, spec, running=plan["running"], stop_first=stop_first, what="a reset")
    ckpt = checkpoint_dir(settings, spec)
    before = {"batch": plan["batch_id"], "offsets": {f"{t}/{p}": o for (t, p), o in current_offsets(ckpt).items()},
              "output_version": plan["output_version_before"]}
    with ledger.operation(spec.name, "reset", {**plan["params"], "state": state, "output_version": output_version},
                          who=who, before=before) as rec:
        t0 = time.monotonic()
        swap = Replacement(settings, spec, ledger, rec.op, running=plan["running"], who=who, timeout=timeout,
                           progress=progress)
        parallelism = swap.stop()
        if plan["running"]:  # batches committed while stopping: plan again from where it stopped
            plan = {**reset_plan(settings, spec, ledger, target, state=state, force=force,
                                 output_version=output_version), "running": True}
        moves = {(o["topic"], o["partition"]): o["target"] for o in plan["offsets"]}
        targets = {t: {str(p): o for (tt, p), o in moves.items() if tt == t} for t, _p in moves}
        aside = swap.aside
        aside.mkdir(parents=True)
        saved = _save_topics(settings, spec, aside, output=plan["output_topic_before"] if not output_version else None,
                             progress=progress)
        if state == "wipe":
            swap.set_aside(aside / "checkpoint")
            layout.write_start_offsets(ckpt, targets)
            progress(f"{spec.name}: recreating {spec.changelog_topic} empty ...")
            _recreate_changelog(settings, spec)
            marker = swap.rewind(-1)
        else:
            swap.copy_aside(aside / "checkpoint")
            retarget_batch(ckpt, plan["batch_id"], targets)
            marker = swap.rewind(plan["batch_id"])
        if output_version:
            ledger.set_output_version(spec.name, output_version, who=who, op=rec.op)
        swap.restart(parallelism, batch_before=-1 if state == "wipe" else plan["batch_id"])
        rec.after = {"offsets": {f"{t}/{p}": o for (t, p), o in moves.items()}, "state": state,
                     "aside": str(aside), "saved": saved, "output_version": plan["output_version_after"],
                     "rewind_marker": marker}
    return {**plan, "dry_run": False, "operation_id": rec.id, "aside": str(aside), "saved": saved,
            "seconds": round(time.monotonic() - t0, 1)}


def retarget_batch(checkpoint: Path, batch_id: int, targets: dict[str, dict[str, int]]) -> None:
    """Make committed batch ``batch_id`` end at ``targets`` (each source line keeps its own topics),
    and drop batches planned after it but never committed, so the next batch starts there."""
    folder = checkpoint / "offsets"
    for later in [p for p in folder.iterdir() if p.name.isdigit() and int(p.name) > batch_id]:
        later.unlink()
        (folder / f".{later.name}.crc").unlink(missing_ok=True)
    for later in [p for p in (checkpoint / "commits").iterdir() if p.name.isdigit() and int(p.name) > batch_id]:
        later.unlink()
        (checkpoint / "commits" / f".{later.name}.crc").unlink(missing_ok=True)
    path = folder / str(batch_id)
    lines = path.read_text().splitlines()
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise ResetError(f"{path}: not an offsets log entry Spark wrote (got {len(lines)} lines)")
    body = lines[:2]
    for line in lines[2:]:
        source = {} if line.strip() in ("", "-") else json.loads(line)
        body.append(json.dumps({t: {p: int(targets.get(t, {}).get(str(p), o)) for p, o in ps.items()}
                                for t, ps in source.items()}, sort_keys=True))
    tmp = path.with_name(f".{batch_id}.rewrite")
    tmp.write_text("\n".join(body))
    tmp.replace(path)
    (folder / f".{batch_id}.crc").unlink(missing_ok=True)  # Hadoop would reject the new bytes


def _changelog_spec(spec: AppSpec):
    from streamops.spark.runner import app_topic_specs

    return app_topic_specs(spec)["changelog"]


def _recreate_changelog(settings: Settings, spec: AppSpec) -> None:
    from streamops.kafka.admin import recreate_topic

    recreate_topic(settings.kafka_bootstrap, _changelog_spec(spec))


def _save_topics(settings: Settings, spec: AppSpec, folder: Path, *, output: str | None,
                 progress: Callable[[str], None]) -> dict[str, Any]:
    """The changelog's (and output's) latest value per key, as parquet, for an undo."""
    saved: dict[str, Any] = {}
    for role, topic in (("changelog", spec.changelog_topic), ("output", output)):
        if topic is None:
            continue
        progress(f"{spec.name}: saving the latest value per key of {topic} ...")
        saved[role] = {"topic": topic, "keys": save_latest(settings.kafka_bootstrap, topic, folder / SAVED[role])}
    return saved


def save_latest(bootstrap: str, topic: str, path: Path) -> int:
    """``topic``'s latest value per key into a parquet file, keys as the bytes they are."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streamops.kafka.read import latest_per_key

    latest = latest_per_key(bootstrap, topic, decode=lambda v: v, raw_keys=True)
    pq.write_table(pa.table({"key": pa.array(list(latest), pa.binary()),
                             "value": pa.array(list(latest.values()), pa.binary())}), path)
    return len(latest)


# -- undo ------------------------------------------------------------------------------------------
def _reset_op(ledger: Ledger, spec: AppSpec, op_id: int) -> dict[str, Any]:
    op = ledger.get_operation(op_id)
    if op is None or op["app"] != spec.name:
        raise UsageError(f"{spec.name}: no operation #{op_id} of this app (see `streamops status {spec.name}`)")
    if op["kind"] != "reset":
        raise UsageError(f"operation #{op_id} is a {op['kind']}, not a reset; only resets can be undone here")
    if op["outcome"] != "succeeded":
        raise UsageError(f"reset #{op_id} {op['outcome']}: there is nothing of it to undo")
    for later in ledger.operations(spec.name, limit=500):
        if later["kind"] == "reset-undo" and later["outcome"] == "succeeded" and \
                (later["params"] or {}).get("undo") == op_id:
            raise UsageError(f"reset #{op_id} was already undone by operation #{later['id']}")
    aside = Path(op["after"]["aside"])
    if not (aside / "checkpoint").is_dir() and (op["before"] or {}).get("batch") is not None:
        raise ResetError(f"reset #{op_id}: the checkpoint it set aside is gone ({aside}/checkpoint)")
    return op


def undo_plan(settings: Settings, spec: AppSpec, ledger: Ledger, op_id: int) -> dict[str, Any]:
    op = _reset_op(ledger, spec, op_id)
    aside = Path(op["after"]["aside"])
    ckpt = checkpoint_dir(settings, spec)
    old = aside / "checkpoint"
    now, then = current_offsets(ckpt), current_offsets(old) if old.is_dir() else {}
    offsets = [{"topic": t, "partition": p, "current": now.get((t, p)), "restore_to": then.get((t, p))}
               for t, p in sorted(set(now) | set(then))]
    saved = op["after"].get("saved") or {}
    running = driver.running(settings, spec.name) is not None
    version = (op["before"] or {}).get("output_version")
    actions = (["stop the app at a batch boundary (--stop-first)"] if running else []) + [
        f"set the current checkpoint aside to {aside_dir(settings, spec.name)}/<time>-op<id>/checkpoint",
        f"put back the checkpoint reset #{op_id} set aside (batch {layout.last_committed_batch(old) if old.is_dir() else None})",
        f"recreate {spec.changelog_topic} and write back its {saved.get('changelog', {}).get('keys', 0)} saved keys",
    ]
    if "output" in saved:
        actions.append(f"write back the {saved['output']['keys']} saved keys of {saved['output']['topic']} "
                       f"(keys added since: tombstones)")
    actions.append(f"write the output to {versioned_output(spec.output_topic, version)}")
    actions.append("rewind the batch marker to the restored checkpoint's last batch")
    if running:
        actions.append("start the app again at its parallelism")
    return {"app": spec.name, "undo": op_id, "reset": op["params"], "running": running, "aside": str(aside),
            "checkpoint": str(ckpt), "current_batch": layout.last_committed_batch(ckpt),
            "restore_batch": layout.last_committed_batch(old) if old.is_dir() else None, "offsets": offsets,
            "output_version_after": version, "saved": saved, "actions": actions}


def undo(settings: Settings, spec: AppSpec, ledger: Ledger, op_id: int, *, dry_run: bool = False,
         stop_first: bool = False, who: str | None = None, timeout: float = 300.0,
         progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Bring back the checkpoint, offsets, changelog and output a reset replaced."""
    plan = undo_plan(settings, spec, ledger, op_id)
    if dry_run:
        return {**plan, "dry_run": True}
    may_replace_checkpoint(settings, spec, running=plan["running"], stop_first=stop_first, what="an undo")
    ckpt = checkpoint_dir(settings, spec)
    with ledger.operation(spec.name, "reset-undo", {"undo": op_id}, who=who,
                          before={"batch": plan["current_batch"], "output_version": ledger.output_version(spec.name)}
                          ) as rec:
        t0 = time.monotonic()
        swap = Replacement(settings, spec, ledger, rec.op, running=plan["running"], who=who, timeout=timeout,
                           progress=progress)
        parallelism = swap.stop()
        aside = swap.aside
        aside.mkdir(parents=True)
        swap.set_aside(aside / "checkpoint")
        old = Path(plan["aside"]) / "checkpoint"
        if old.is_dir():  # the reset's aside copy stays: the undo can itself be looked at
            shutil.copytree(old, aside / "restoring")
            swap.install(aside / "restoring")
        progress(f"{spec.name}: recreating {spec.changelog_topic} from the saved copy ...")
        _recreate_changelog(settings, spec)
        written = {"changelog": write_back(settings, Path(plan["aside"]) / SAVED["changelog"],
                                            spec.changelog_topic, tombstones=False)}
        if "output" in plan["saved"]:
            topic = plan["saved"]["output"]["topic"]
            written["output"] = write_back(settings, Path(plan["aside"]) / SAVED["output"], topic,
                                            tombstones=True)
        ledger.set_output_version(spec.name, plan["output_version_after"], who=who, op=rec.op)
        batch = layout.last_committed_batch(ckpt)
        marker = swap.rewind(-1 if batch is None else batch)
        swap.restart(parallelism, batch_before=batch)
        rec.after = {"batch": batch, "aside": str(aside), "written": written, "rewind_marker": marker,
                     "output_version": plan["output_version_after"]}
    return {**plan, "dry_run": False, "operation_id": rec.id, "set_aside": str(aside), "written": written,
            "seconds": round(time.monotonic() - t0, 1)}


def write_back(settings: Settings, path: Path, topic: str, *, tombstones: bool) -> dict[str, int]:
    """Append the saved latest values to ``topic`` (and tombstones for keys it gained since)."""
    import pyarrow.parquet as pq

    from streamops.kafka.admin import partitions
    from streamops.kafka.produce import produce
    from streamops.kafka.read import latest_per_key
    from streamops.spark.commit import SINK_PARTITIONER

    table = pq.read_table(path)
    keys, values = table.column("key").to_pylist(), table.column("value").to_pylist()
    extra: list[bytes] = []
    if tombstones:
        have = set(keys)
        extra = [k for k in latest_per_key(settings.kafka_bootstrap, topic, decode=lambda v: v, raw_keys=True)
                 if k not in have]
    n = len(partitions(settings.kafka_bootstrap, topic))
    # the app's partitioner: a key's write-back must land in the partition its other records are in
    produce(settings.kafka_bootstrap, topic, [*zip(keys, values, strict=True), *((k, None) for k in extra)],
            partitions=n, config={"partitioner": SINK_PARTITIONER})
    return {"keys": len(keys), "tombstones": len(extra)}
