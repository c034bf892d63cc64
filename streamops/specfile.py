"""Apps as live configuration: the spec file reloaded when it changes, and what a change means for
an app that runs.

Long-lived components (the supervisor) hold a ``SpecFile`` and call ``refresh()`` on every pass:
a stat per pass, a parse only when the file's size or mtime moved. We reload on change of the file
rather than on each deploy request because the supervisor must also notice removed apps and
changed schedules, and because a deploy is only one of the writers of desired state (resets,
restores and scale windows start drivers too). A file that does not load is refused as a whole
(``spec.parse_specs`` names every bad field and its line) and the last good specs stay in force.

A driver reads the spec once, at its start. So a change to a field it reads (``RESTART_FIELDS``)
cannot reach a running app half way: the app keeps the spec its last deploy pinned
(``AppDir.spec``), ``effective`` gives that spec with the file's other fields, and the change is
applied by the next deploy of the stopped app (``streamops stop APP`` then ``streamops deploy APP``).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamops.exceptions import ConfigError
from streamops.spec import AppSpec, parse_specs

#: the fields a driver reads when it starts (its query, topics, identity, checkpoint, master);
#: every other field (description, parallelism range, schedules, retention, scale windows,
#: reprocess policy) is read by the component that uses it each time it does
RESTART_FIELDS: tuple[str, ...] = (
    "job", "input_topics", "input_partitions", "output_topic", "changelog_topic", "dlq_topic",
    "state_partitions", "trigger_interval", "max_offsets_per_trigger", "starting_offsets",
    "checkpoint_root", "spark_master", "kafka",
)


@dataclass(frozen=True)
class FieldChange:
    field: str
    before: Any
    after: Any

    def __str__(self) -> str:
        return f"{self.field}: {self.before!r} -> {self.after!r}"


@dataclass(frozen=True)
class SpecChanges:
    """What a new version of the spec file changes, app by app."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: dict[str, tuple[FieldChange, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def describe(self) -> str:
        parts = [f"added {', '.join(self.added)}"] if self.added else []
        parts += [f"removed {', '.join(self.removed)}"] if self.removed else []
        parts += [f"changed {a} ({', '.join(c.field for c in cs)})" for a, cs in self.changed.items()]
        return "; ".join(parts) or "no change"


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _fields(spec: AppSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json")


def field_changes(old: AppSpec, new: AppSpec, only: tuple[str, ...] | None = None) -> tuple[FieldChange, ...]:
    a, b = _fields(old), _fields(new)
    names = only if only is not None else tuple(k for k in a if k != "name")
    return tuple(FieldChange(k, a.get(k), b.get(k)) for k in names if a.get(k) != b.get(k))


def restart_changes(running: AppSpec, wanted: AppSpec) -> tuple[FieldChange, ...]:
    """The changes from ``running`` to ``wanted`` that only a new driver can apply."""
    return field_changes(running, wanted, RESTART_FIELDS)


def diff(old: dict[str, AppSpec], new: dict[str, AppSpec]) -> SpecChanges:
    changed = {a: cs for a in sorted(set(old) & set(new)) if (cs := field_changes(old[a], new[a]))}
    return SpecChanges(added=tuple(sorted(set(new) - set(old))), removed=tuple(sorted(set(old) - set(new))),
                       changed=changed)


def effective(pinned: AppSpec | None, current: AppSpec | None) -> AppSpec | None:
    """The spec an app runs with: ``current`` (the file's) with the fields a driver reads at its
    start as the last deploy pinned them; the pinned spec alone if the app left the file."""
    if pinned is None:
        return current
    if current is None:
        return pinned
    keep = _fields(pinned)
    try:
        return current.model_validate({**_fields(current), **{k: keep[k] for k in RESTART_FIELDS}})
    except ValueError:
        # the file's other fields do not fit the pinned ones (say a parallelism range beyond the
        # pinned partitions): the running app keeps them as pinned, the file's apply at the deploy
        # that applies the rest, which validates them together
        return pinned.model_copy(update={"output_version": current.output_version})


def spec_from_json(data: dict[str, Any] | None) -> AppSpec | None:
    """A pinned spec as ``AppDir.spec`` holds it (None: none, or one this version cannot read)."""
    if not data or "spec" not in data:
        return None
    try:
        return AppSpec.model_validate(data["spec"])
    except ValueError:
        return None


def spec_to_json(spec: AppSpec) -> dict[str, Any]:
    return {"spec": _fields(spec), "pinned_at": time.time()}


def last_good_path(state_dir: Path) -> Path:
    """Where the components of one platform keep the last spec file that loaded."""
    return state_dir / "specs.last-good.yaml"


def open_spec_file(repo: Path, state_dir: Path) -> SpecFile:
    """The platform's spec file, loaded (or the last good one, ``error`` saying why)."""
    from streamops.spec import default_spec_path

    spec_file = SpecFile(default_spec_path(repo), keep=last_good_path(state_dir))
    spec_file.refresh()
    return spec_file


class SpecFile:
    """The spec file as a long-lived component holds it: the last good specs, reloaded on change."""

    def __init__(self, path: Path, keep: Path | None = None) -> None:
        self.path = path
        #: where the last good file is kept, so that a component started (or a DAG file parsed)
        #: while the file is broken still runs on the last good specs
        self.keep = keep
        self.specs: dict[str, AppSpec] = {}
        self.digest: str | None = None
        self.loaded_at: float | None = None
        #: why the file as it is now was refused (None: the file in force is the file on disk)
        self.error: str | None = None
        self._stat: tuple[int, int] | None = None

    def refresh(self) -> SpecChanges | None:
        """Reload if the file changed: the changes (empty on the first load), or None when the file
        did not change or was refused (``error`` says why; the last good specs stay)."""
        try:
            st = self.path.stat()
            stat = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stat = None
        if stat is not None and stat == self._stat:
            return None
        self._stat = stat
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            self.error = f"no app specs at {self.path}"
            return None
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        if digest == self.digest:
            self.error = None
            return None
        try:
            specs = parse_specs(text, self.path)
        except ConfigError as exc:
            self.error = str(exc)
            if self.digest is None:
                self._load_kept()
            return None
        first = self.digest is None
        if self.keep is not None:
            try:
                if not self.keep.exists() or self.keep.read_text() != text:
                    write_text_atomic(self.keep, text)
            except OSError:
                pass  # only a fallback for a later broken file: never a reason to refuse a good one
        changes = diff(self.specs, specs)
        self.specs, self.digest, self.loaded_at, self.error = specs, digest, time.time(), None
        return SpecChanges() if first else changes

    def _load_kept(self) -> None:
        if self.keep is None or not self.keep.exists():
            return
        try:
            text = self.keep.read_text()
            self.specs = parse_specs(text, self.keep)
        except (OSError, ConfigError):
            return
        self.digest, self.loaded_at = hashlib.sha256(text.encode()).hexdigest()[:16], time.time()

    def status(self) -> dict[str, Any]:
        """What the heartbeat says of the file in force (for deploy's "not loaded" answer)."""
        return {"path": str(self.path), "digest": self.digest, "loaded_at": self.loaded_at, "error": self.error}
