"""``status``: desired vs observed per app, lag per partition, last batch, last operations.

Read-only and tolerant: a missing ledger row, checkpoint or broker shows up as ``None`` with a
note instead of failing, because status is what operators run when something is broken.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from streamops.app.dir import AppDir
from streamops.checkpoints import layout
from streamops.host.files import read_json
from streamops.ledger import Ledger
from streamops.lifecycle.supervisor import heartbeat_file
from streamops.settings import Settings
from streamops.spec import AppSpec

LAST_OPERATIONS = 5


def lag(settings: Settings, spec: AppSpec, committed: dict[str, dict[int, int]]) -> tuple[dict | None, str | None]:
    """Per topic and partition: end offset - committed offset (whole topic if nothing committed)."""
    from streamops.kafka.admin import end_offsets
    from streamops.kafka.security import app_scope

    out: dict[str, dict[str, int]] = {}
    try:
        for topic in spec.input_topics:
            with app_scope(spec):  # the app's Kafka client configuration (its spec's kafka overrides)
                ends = end_offsets(settings.kafka_bootstrap, topic, timeout=5)
            done = committed.get(topic, {})
            out[topic] = {str(p): hi - done.get(p, lo) for p, (lo, hi) in sorted(ends.items())}
    except Exception as exc:  # noqa: BLE001 - status must still show the rest
        return None, f"lag unknown: {str(exc).splitlines()[0][:200]}"
    return out, None


def wait_caught_up(settings: Settings, spec: AppSpec, timeout: float,
                   progress: Callable[[str], None] = lambda _m: None) -> int:
    """Wait (at most ``timeout`` s) until the app's checkpoint has committed every input record
    present now, so that a comparison right after producing compares all of it. Returns the
    records still not committed (0: caught up)."""
    from streamops.app.checkpoint import checkpoint_dir
    from streamops.kafka.admin import end_offsets

    ckpt = checkpoint_dir(settings, spec)
    targets = {t: end_offsets(settings.kafka_bootstrap, t, timeout=10) for t in spec.input_topics}
    deadline, said = time.monotonic() + timeout, 0.0
    while True:
        committed = layout.committed_offsets(ckpt)
        left = sum(max(0, hi - committed.get(t, {}).get(p, lo)) for t, ends in targets.items()
                   for p, (lo, hi) in ends.items())
        if left == 0 or time.monotonic() >= deadline:
            return left
        if time.monotonic() - said >= 10:
            progress(f"{spec.name}: waiting for {left} input records to be committed ...")
            said = time.monotonic()
        time.sleep(0.5)


def app_status(spec: AppSpec, settings: Settings, ledger: Ledger, *, with_lag: bool = True) -> dict[str, Any]:
    from streamops.app.checkpoint import checkpoint_dir

    ckpt = checkpoint_dir(settings, spec)
    committed = layout.committed_offsets(ckpt)
    notes: list[str] = []
    lag_map = None
    if with_lag:
        lag_map, note = lag(settings, spec, committed)
        if note:
            notes.append(note)
    supervisor = read_json(heartbeat_file(settings))
    if isinstance(supervisor, dict) and (note := (supervisor.get("notes") or {}).get(spec.name)):
        notes.append(f"supervisor: {note}")
    progress = AppDir.of(settings, spec.name).last_progress()
    return {
        "app": spec.name,
        "desired": ledger.desired(spec.name),
        "observed": ledger.observed(spec.name),
        "lease": ledger.lease(spec.name),
        "checkpoint": {"path": str(ckpt), "last_committed_batch": layout.last_committed_batch(ckpt),
                       "committed_offsets": {t: {str(p): o for p, o in ps.items()} for t, ps in committed.items()}},
        "lag": lag_map,
        "total_lag": sum(sum(ps.values()) for ps in lag_map.values()) if lag_map else None,
        "last_batch": progress,
        "operations": ledger.operations(spec.name, limit=LAST_OPERATIONS),
        "notes": notes,
    }


def render(st: dict[str, Any]) -> str:
    d, o, b = st["desired"] or {}, st["observed"] or {}, st["last_batch"] or {}
    lines = [(f"{st['app']}: desired {d.get('status', '-')} x{d.get('parallelism', '-')}, "
              f"observed {o.get('status', 'never seen')} x{o.get('parallelism') or '-'} "
              f"(executors {o.get('executors') if o.get('executors') is not None else '-'}, "
              f"pid {o.get('pid') or '-'}, heartbeat {o.get('heartbeat_at') or '-'})")]
    lines.append(f"  last committed batch {st['checkpoint']['last_committed_batch']}, "
                 f"lag {st['total_lag'] if st['total_lag'] is not None else '?'}")
    if st["lag"]:
        for topic, parts in st["lag"].items():
            lines.append(f"    {topic}: " + " ".join(f"p{p}={n}" for p, n in parts.items()))
    if b:
        rate_in, rate_done = b.get("input_rows_per_s") or 0, b.get("processed_rows_per_s") or 0
        lines.append(f"  batch {b.get('batch_id')}: {b.get('input_rows')} rows, in {rate_in:.0f}/s, "
                     f"processed {rate_done:.0f}/s, state {b.get('state_rows')} rows / "
                     f"{b.get('state_bytes')} bytes")
    if st["lease"]:
        le = st["lease"]
        lines.append(f"  operation {le['kind']} #{le['operation_id']} running since {le['acquired_at']}, "
                     f"asked by {le['holder']}")
    for op in st["operations"]:
        lines.append(f"  #{op['id']} {op['kind']} {op['outcome']} {op['started_at']:%Y-%m-%d %H:%M:%S} "
                     f"by {op['requested_by']}" + (f": {op['error'][:120]}" if op.get("error") else ""))
    lines += [f"  note: {n}" for n in st["notes"]]
    return "\n".join(lines)
