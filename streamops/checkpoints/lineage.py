"""Is the commits topic's batch marker about *this* checkpoint? Checked before a driver starts.

The committer skips every batch up to the last marker's ``batch_id`` (``spark.commit``): it was
written already. That is only true of the checkpoint the marker was written from. A checkpoint
deleted by hand (the usual Spark habit), one left half-replaced by an interrupted operation, or a
marker whose last transactions a broker lost would make a driver recompute batches and write
nothing for them, with lag 0 and no error. So every marker carries the id of the checkpoint it
counts (Spark's query id in ``<checkpoint>/metadata``, written when the checkpoint is created and
copied with savepoints), and a driver or a deploy refuses to start when marker and checkpoint
disagree, naming what happened and the commands that repair it (as Flink refuses a job whose
savepoint does not match).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from streamops.checkpoints import layout
from streamops.exceptions import StreamopsError


class CheckpointMismatchError(StreamopsError):
    """The app's last committed batch marker does not belong to its checkpoint.

    Operator action: repair with one of the commands the message names (restore a savepoint,
    rebuild the state from the changelog, or reset), then deploy again.
    """

    exit_code = 2


def checkpoint_id(checkpoint: Path) -> str | None:
    """Spark's query id for this checkpoint (None: no query has started on it yet)."""
    try:
        return str(json.loads((checkpoint / "metadata").read_text())["id"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def mismatch(marker: dict[str, Any] | None, ckpt_id: str | None, committed: int | None) -> str | None:
    """What is wrong between the last marker and the checkpoint (None: they agree).

    ``committed``: the checkpoint's last committed batch, the same before and after the marker
    was read. A driver commits batch N's marker before its commit file, so the marker is then
    ``committed`` or ``committed + 1``."""
    if marker is None or int(marker.get("batch_id", -1)) < 0:
        return None  # nothing committed, or a rewind to the start: nothing will be skipped
    batch = int(marker["batch_id"])
    owner = marker.get("checkpoint_id")
    if committed is None and (owner is None or owner != ckpt_id):
        # (owner == ckpt_id: batch 0's transaction went through, Spark died before its commit file)
        return (f"the checkpoint is missing or new, but batches up to {batch} were committed to Kafka from "
                f"a checkpoint{f' ({owner})' if owner else ''} that is gone (deleted, or replaced half way). "
                f"Started on it, the app would compute batches 0..{batch} again and write nothing for them")
    if owner is not None and ckpt_id is not None and owner != ckpt_id:
        return (f"the checkpoint ({ckpt_id}) is not the one the last committed batch {batch} was written from "
                f"({owner}): it was replaced outside streamops, or an operation that replaced it did not finish. "
                f"Started on it, the app would skip the output of every batch up to {batch}")
    if committed is not None and batch > committed + 1:
        return (f"the checkpoint's last committed batch is {committed}, but Kafka has batches up to {batch} "
                f"from it: the checkpoint is older than its output (copied back by hand?). Started on it, the "
                f"app would compute batches {committed + 1}..{batch} again and write nothing for them")
    if committed is not None and batch < committed:
        return (f"the checkpoint committed batches up to {committed}, but the last batch Kafka has is {batch}: "
                f"the broker lost the transactions of batches {batch + 1}..{committed} after they were "
                f"acknowledged (a broker crash, or an unclean leader election). Their output, changelog and "
                f"DLQ records are missing, and the app would not write them again")
    return None


def remedy(app: str) -> str:
    return (f"If an operation was interrupted half way (`streamops status {app}` lists a failed reset, restore or "
            f"rebuild-state), `streamops undo {app} OP` puts back what it did. "
            f"Otherwise repair it with one of: `streamops restore {app} SAVEPOINT` (a savepoint from `streamops savepoints "
            f"{app}`; the batches after it are written again), `streamops rebuild-state {app} --from-changelog` "
            f"(the state from the changelog, then on from the input it reflects), or `streamops reset {app} "
            f"--to-earliest` (everything computed again from the input)")


def check(app: str, checkpoint: Path, read_marker: Any) -> None:
    """Refuse (``CheckpointMismatchError``) when the marker is not about ``checkpoint``.

    ``read_marker()``: the app's last committed marker (None if there is none)."""
    for _ in range(20):  # a running driver (beside a standby) may commit meanwhile: read again
        committed = layout.last_committed_batch(checkpoint)
        marker = read_marker()
        if layout.last_committed_batch(checkpoint) == committed:
            break
    else:
        raise CheckpointMismatchError(f"{app}: the checkpoint kept changing while its marker was read")
    problem = mismatch(marker, checkpoint_id(checkpoint), committed)
    if problem is not None:
        raise CheckpointMismatchError(f"{app}: {problem}. {remedy(app)}.")


def input_gap(checkpoint: Path, highs: dict[str, dict[int, int]]) -> str | None:
    """Input partitions that end before the offsets the checkpoint's last batch read up to: the
    broker lost acknowledged records, or the topic was deleted and created again. ``highs``: each
    input topic's high watermarks (a missing partition or ``{}`` for a missing topic: none left)."""
    batch = layout.last_committed_batch(checkpoint)
    short = [f"{t}[{p}] ends at {highs[t].get(p, 0)}, read up to {o}"
             for t, ps in sorted(layout.committed_offsets(checkpoint).items())
             for p, o in sorted(ps.items()) if t in highs and highs[t].get(p, 0) < o]
    if not short:
        return None
    return (f"batch {batch} read input records that are no longer there ({'; '.join(short)}): the broker lost "
            f"acknowledged records (a crash, an unclean leader election), or the topic was deleted and created "
            f"again. Started, the app would wait for offsets that no longer mean those records")


def check_input(app: str, checkpoint: Path, highs: dict[str, dict[int, int]]) -> None:
    """Refuse (``CheckpointMismatchError``) when the input is shorter than what the checkpoint read."""
    problem = input_gap(checkpoint, highs)
    if problem is not None:
        raise CheckpointMismatchError(
            f"{app}: {problem}. `streamops reset {app} --to-earliest` computes everything again from the input "
            f"there is (`--to-latest`: from now on); `streamops restore {app} SAVEPOINT` goes back to a savepoint "
            f"from before the loss.")

