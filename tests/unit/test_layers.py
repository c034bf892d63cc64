"""The core package's layers: a module never imports one of a higher layer (a new such import fails
here, naming the file and line). Function-level imports count too: they are the ones that creep in."""

from __future__ import annotations

import ast
from pathlib import Path

import streamops

#: lower number = lower layer; the same number may import each other
LAYERS = {
    "exceptions": 0, "results": 0, "settings": 0, "spec": 0, "specfile": 0, "job": 0, "arrow": 0, "stream_time": 0, "named_state": 0, "windows": 0, "joins": 0,
    "host": 1, "kafka": 1, "ledger": 1, "checkpoints": 1,
    "app": 2,  # what is true of one app whatever runs it: below every runtime
    "spark": 3,
    "state": 4,
    "lifecycle": 5, "reset": 5, "observe": 5, "platform": 5,  # platform: the embedded services
    "cli": 6, "scaffold": 6, "testing": 6,  # testing: for jobs' own tests, never imported by the core
}
ROOT = Path(streamops.__file__).parent


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "streamops" and len(parts) > 1 else None


def test_every_part_of_the_core_has_a_layer() -> None:
    parts = {p.stem for p in ROOT.iterdir() if (p.suffix == ".py" and p.stem != "__init__") or
             (p.is_dir() and (p / "__init__.py").exists())}
    assert parts == set(LAYERS), f"give these a layer in LAYERS: {sorted(parts - set(LAYERS))}"


def test_no_import_goes_up_a_layer() -> None:
    upward = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent)
        src = _package(".".join(rel.with_suffix("").parts))
        if src is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                dst = _package(name)
                if dst is not None and LAYERS[dst] > LAYERS[src]:
                    upward.append(f"{rel}:{node.lineno} ({src}) imports {name} ({dst})")
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_the_core_never_imports_airflow() -> None:
    found = [f"{p.relative_to(ROOT.parent)}:{n.lineno}" for p in ROOT.rglob("*.py")
             for n in ast.walk(ast.parse(p.read_text()))
             if (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "airflow")
             or (isinstance(n, ast.Import) and any(a.name.split(".")[0] == "airflow" for a in n.names))]
    assert not found, found
