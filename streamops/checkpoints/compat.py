"""The pre-flight compatibility gate: a job whose key, state or stateful operators changed does not
start on a checkpoint written by the old one (as Flink checks a savepoint against the new job).

Spark would either fail half way through a batch (a state schema it cannot read) or, worse, run
on: a serialized state read by a new serde, keys hashed to other partitions. So the checkpoint
carries the shape of the job that wrote it (``streamops-job.json``, written at the first start,
copied with savepoints), and every deploy and every driver start compares the job's shape with it
before anything starts. A job marks a change to its serialized state by raising ``state_version``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from streamops.exceptions import StreamopsError
from streamops.host.files import write_json

FILE = "streamops-job.json"


class IncompatibleCheckpointError(StreamopsError):
    """The job's key, state or stateful operators differ from those that wrote the checkpoint.

    Operator action: migrate as the message says: rebuild the state from the changelog (same key
    and serialized state, other operators or partitions), reset (recompute from the input), or
    reprocess into a new output version and promote it.
    """

    exit_code = 2


@dataclass(frozen=True)
class JobShape:
    """What a checkpoint's state depends on."""

    kind: str  # "aggregate" | "update"
    key: str
    state: tuple[str, ...]  # aggregate: field:kind:type; update: the serde and state_version
    stateful_operators: int
    sources: int

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "state": list(self.state)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobShape:
        return cls(d["kind"], d["key"], tuple(d["state"]), int(d["stateful_operators"]), int(d["sources"]))


def shape_of(job_cls: Any, *, sources: int) -> JobShape:
    """The shape of a declared ``Job`` class whose query plan scans its input ``sources`` times."""
    if job_cls.is_aggregate():
        state = tuple(f"{f}:{a.kind}:{a.type}" for f, a in (job_cls.aggregate or {}).items())
    else:
        serde = type(job_cls.state_serde)
        state = (f"serde:{serde.__module__}.{serde.__qualname__}", f"state_version:{job_cls.state_version}")
        if job_cls.has_time():  # keys sleep in event-time timeouts, read the ticks, keep clocks
            state = (*state, "stream_time")
        if job_cls.has_named_state():  # transformWithState, one variable per name (``named_state``)
            state = (*state, *(f"{n}:{type(k).__name__}" for n, k in (job_cls.state_values or {}).items()))
    return JobShape("aggregate" if job_cls.is_aggregate() else "update", job_cls.key_name, state, 1, sources)


def recorded(checkpoint: Path) -> JobShape | None:
    try:
        return JobShape.from_dict(json.loads((checkpoint / FILE).read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise IncompatibleCheckpointError(f"{checkpoint / FILE} is unreadable ({exc}); it records the shape of the "
                                          f"job that wrote this checkpoint") from None


def record(checkpoint: Path, shape: JobShape) -> None:
    write_json(checkpoint / FILE, shape.to_dict())


def changes(old: JobShape, new: JobShape) -> list[str]:
    """What differs, in words."""
    out = []
    if old.kind != new.kind:
        out.append(f"the stateful operator changed from {old.kind} to {new.kind}")
    if old.key != new.key:
        out.append(f"the key changed from {old.key!r} to {new.key!r}")
    if old.kind == new.kind and old.state != new.state:
        gone = [s for s in old.state if s not in new.state]
        added = [s for s in new.state if s not in old.state]
        out.append("the state changed (" + "; ".join(
            ([f"was {', '.join(gone)}"] if gone else []) + ([f"now {', '.join(added)}"] if added else [])) + ")")
    if old.stateful_operators != new.stateful_operators:
        out.append(f"the number of stateful operators changed from {old.stateful_operators} to "
                   f"{new.stateful_operators}")
    if old.sources != new.sources and not out:
        out.append(f"the query reads its input {new.sources} times per batch instead of {old.sources}")
    return out


def gate(app: str, checkpoint: Path, shape: JobShape) -> None:
    """Refuse (``IncompatibleCheckpointError``) a job whose shape differs from the checkpoint's; a
    checkpoint without a record gets this job's shape (a new one, or one from before the gate)."""
    old = recorded(checkpoint)
    if old is None:
        if (checkpoint / "offsets").is_dir() or not checkpoint.exists() or not any(checkpoint.iterdir()):
            record(checkpoint, shape)
        return
    what = changes(old, shape)
    if not what:
        return
    serialized_same = old.kind == shape.kind and old.key == shape.key and old.state == shape.state
    ways = []
    if serialized_same:
        ways.append(f"`streamops rebuild-state {app} --from-changelog` builds a new checkpoint from the changelog")
    ways += [f"`streamops reset {app} --to-earliest` recomputes the state from the input (`--dry-run` first)",
             (f"`streamops reprocess {app} --from T1 --to latest --output-version vN` runs the new job into a new "
              f"output version beside the old one; `streamops promote {app} --output-version vN` switches to it")]
    raise IncompatibleCheckpointError(
        f"{app}: the job no longer fits its checkpoint {checkpoint}: {'; '.join(what)}. Nothing was started. "
        f"To migrate: " + "; or ".join(ways) + ".")
