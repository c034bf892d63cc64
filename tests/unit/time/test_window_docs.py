"""The windows table of docs/writing-a-job.md and ``streamops/windows.py``'s docstring say what the
code does: each window's ``start``/``end`` (what ``result`` gets), the stream time at which it
closes, and its output key. The formulas are read from the text and evaluated; the code's answers
are measured by folding input (issue 40: the two texts had disagreed with the code and each other)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamops import windows as windows_module
from streamops.job import Record
from streamops.state.oracle import fold_input
from streamops.windows import Hopping, Session, Sliding, Tumbling, WindowedJob, Windows

pytestmark = pytest.mark.unit

DOC = Path(__file__).resolve().parents[3] / "docs" / "writing-a-job.md"
GRACE_MS = 30
#: the windows each row of the table is checked with, and the events of key "a" (one partition)
CASES: dict[str, tuple[Windows, tuple[int, ...]]] = {
    "Tumbling": (Tumbling(size_ms=100), (1037,)),
    "Hopping": (Hopping(size_ms=100, advance_ms=40), (1037,)),
    "Sliding": (Sliding(size_ms=100), (1037,)),
    "Session": (Session(gap_ms=100), (1010, 1037)),  # first and last event differ
}


@dataclass(frozen=True)
class Measured:
    """One window of key "a" as the code has it."""

    output_key: str
    start: int
    end: int
    closes_at: int  # the smallest stream time at which it is in the output


def _job(w: Windows) -> type[WindowedJob]:
    class Probe(WindowedJob):
        """Counts events; its output value is the ``start, end`` that ``result`` was given."""

        windows = w
        grace_ms = GRACE_MS

        def parse(self, record: Record) -> dict:
            return json.loads(record.value)

        def key(self, event: dict) -> str:
            return event["k"]

        def timestamp(self, event: dict) -> int:
            return event["ts"]

        def zero(self) -> int:
            return 0

        def add(self, acc: int, event: dict) -> int:
            return acc + 1

        def merge(self, a: int, b: int) -> int:
            return a + b

        def result(self, key: str, start: int, end: int, acc: int) -> list[int]:
            return [start, end]

    return Probe


def _measure(w: Windows, events: tuple[int, ...]) -> list[Measured]:
    """Key "a"'s events, then one event of key "b" at stream time ``x``: the first ``x`` at which
    each of a's windows is emitted is when it closed (emit_on = "close")."""
    job = _job(w)
    first_seen: dict[str, tuple[int, list[int]]] = {}
    last = max(events)
    for x in range(last, last + 400):
        values = [{"k": "a", "ts": t} for t in events] + [{"k": "b", "ts": x}]
        records = [Record("in", 0, i, None, json.dumps(v).encode()) for i, v in enumerate(values)]
        for key, bounds in fold_input(job, records).output.items():
            if key.startswith("a@") and key not in first_seen:
                first_seen[key] = (x, bounds)
    assert first_seen, f"no window of {w} closed within 400 ms of its last event"
    return [Measured(k, b[0], b[1], x) for k, (x, b) in sorted(first_seen.items())]


def _names(w: Windows, events: tuple[int, ...], start: int) -> dict[str, int]:
    """What the texts' formulas may name (the docs say ``size``, the docstring ``size_ms``)."""
    names = {"ts": max(events), "first": min(events), "last": max(events), "start": start, "grace_ms": GRACE_MS}
    for f in w.__dataclass_fields__:
        names[f] = getattr(w, f)
    if "size_ms" in names:
        names["size"] = names["size_ms"]
    return names


def _eval(formula: str, names: dict[str, int]) -> int:
    text = formula.strip().replace("last event", "last").replace("first event", "first")
    return eval(text, {"__builtins__": {}}, names)  # a formula of our own docs, over ints


def _doc_table() -> dict[str, dict[str, list[str]]]:
    """The windows table: class name -> column header -> the cell's `code` spans."""
    lines = DOC.read_text().splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| windows |"))
    columns = [c.strip() for c in lines[head].strip("|").split("|")]
    rows: dict[str, dict[str, list[str]]] = {}
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        cells = [re.findall(r"`([^`]+)`", c) for c in line.strip("|").split("|")]
        rows[re.match(r"(\w+)\(", cells[0][0])[1]] = dict(zip(columns, cells))
    return rows


def _column(row: dict[str, list[str]], starts: str) -> list[str]:
    found = [spans for header, spans in row.items() if header.startswith(starts)]
    assert len(found) == 1, f"the docs' windows table has no column {starts!r}: {list(row)}"
    return found[0]


@pytest.mark.parametrize("kind", CASES)
def test_the_docs_table_says_what_the_windows_do(kind: str) -> None:
    w, events = CASES[kind]
    row = _doc_table()[kind]
    measured = _measure(w, events)
    for m in measured:
        names = _names(w, events, m.start)
        start_f, end_f = _column(row, "`start`, `end`")
        assert (_eval(start_f, names), _eval(end_f, names)) == (m.start, m.end), (kind, m)
        names["end"] = m.end
        (closes,) = _column(row, "closes when")
        assert _eval(closes, names) == m.closes_at, f"{kind}: the docs close at {closes}, the code at {m.closes_at}"
        (key,) = _column(row, "output key")
        assert key.startswith("key@") and f"a@{_eval(key[4:], names)}" == m.output_key, (kind, key, m)


def _docstring_bullets() -> list[str]:
    """The module docstring's bullets: windows in general, sessions, sliding windows."""
    doc = windows_module.__doc__ or ""
    listed = next(p for p in doc.split("\n\n") if p.startswith("- "))
    return [" ".join(b.split()) for b in re.split(r"(?:^|\n)- ", listed)[1:]]


@pytest.mark.parametrize(("bullet", "kinds"), [(0, ("Tumbling", "Hopping")), (1, ("Session",)), (2, ("Sliding",))])
def test_the_module_docstring_says_what_the_windows_do(bullet: int, kinds: tuple[str, ...]) -> None:
    text = _docstring_bullets()[bullet]
    (closes,) = re.findall(r"closes once stream time reaches ``([^`]+)``", text)
    bounds = re.findall(r"``\[([^`,]+), ([^`)]+)\)``", text)
    for kind in kinds:
        w, events = CASES[kind]
        for m in _measure(w, events):
            names = {**_names(w, events, m.start), "end": m.end}
            assert _eval(closes, names) == m.closes_at, f"{kind}: the docstring closes at {closes}, the code at {m.closes_at}"
            start_f, end_f = bounds[-1]  # the window as result gets it
            assert (_eval(start_f, names), _eval(end_f, names)) == (m.start, m.end), (kind, bounds, m)
