"""An app's checkpoint: where it lives and the lock its writers hold (a fact of the app, whatever
runs it: drivers, operations, status and the CLI all ask here)."""

from __future__ import annotations

from pathlib import Path

from streamops.settings import Settings
from streamops.spec import AppSpec


def checkpoint_root(settings: Settings, spec: AppSpec) -> Path:
    return spec.checkpoint_root or settings.state_dir / "checkpoints"


def checkpoint_dir(settings: Settings, spec: AppSpec) -> Path:
    """One checkpoint per app (offsets, commits, state): the app's identity, like application.id."""
    return checkpoint_root(settings, spec) / spec.name


def checkpoint_lock_path(settings: Settings, spec: AppSpec) -> Path:
    """The lock a driver holds on its checkpoint while it runs (beside it, so moving the
    checkpoint aside, as reset does, leaves the lock where the next driver looks)."""
    ckpt = checkpoint_dir(settings, spec)
    return ckpt.with_name(f"{ckpt.name}.lock")


def lock_checkpoint(settings: Settings, spec: AppSpec, *, wait_s: float, refused: str):
    """Hold the app's checkpoint lock (``host.locks``): a driver for its life, an operation
    that changes the checkpoint for as long as it changes it. ``LockHeld`` names the holder."""
    from streamops.host.locks import acquire

    return acquire(checkpoint_lock_path(settings, spec), f"{spec.name}'s checkpoint {checkpoint_dir(settings, spec)}",
                   wait_s=wait_s, refused=refused)
