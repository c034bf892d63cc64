"""Size limits a newcomer can rely on in ``streamops/`` and ``plugins/``: no module over 500 lines
and no function over 60 (docs/architecture.md names the justified exceptions, here in EXCEPTIONS)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
#: "file:function": why (each one is named in docs/architecture.md, "Package map")
EXCEPTIONS = {
    "streamops/ledger/migrations/versions/0001_initial.py:upgrade": "one flat list of the first tables",
}


def _files() -> list[Path]:
    return sorted(p for folder in ("streamops", "plugins") for p in (REPO / folder).rglob("*.py"))


def test_no_module_is_over_500_lines() -> None:
    big = [f"{p.relative_to(REPO)}: {n} lines" for p in _files() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not big, f"modules over {MAX_MODULE_LINES} lines (split them by concern):\n" + "\n".join(big)


def test_no_function_is_over_60_lines() -> None:
    long = []
    for path in _files():
        rel = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES and f"{rel}:{node.name}" not in EXCEPTIONS:
                    long.append(f"{rel}:{node.lineno} {node.name}: {n} lines")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (name their steps):\n" + "\n".join(long)


def test_each_exception_is_named_in_the_architecture_doc() -> None:
    doc = (REPO / "docs" / "architecture.md").read_text()
    missing = [e for e in EXCEPTIONS if f"{e.split(':')[0].removeprefix('streamops/')}: {e.split(':')[1]}" not in doc]
    assert not missing, f"name these exceptions in docs/architecture.md: {missing}"
