"""The report model of ``streamops verify``: one ``ViewResult`` per topic compared, the failure
categories (``categorize``), the output keys' counts (``KeyCounts``), the whole ``VerifyReport``
(its JSON, its ledger summary) and its text (``render``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from streamops.exceptions import StreamopsError
from streamops.state.check import SAMPLES, Diff

if TYPE_CHECKING:
    from streamops.state.quality import QualityReport
    from streamops.state.verify.outputs import OutputSplit
    from streamops.state.verify.state_read import StateRead
    from streamops.state.verify.topics import TopicRead


class VerifyFailedError(StreamopsError):
    """``streamops verify`` found a difference, an unreadable state store or a failed expectation.

    Operator action: read the summary (categories, samples, failed expectations) and open the
    HTML report it names; a state_unreadable / state_checksum result means restore the app from a
    savepoint or rebuild its state from the changelog, a changelog/output difference means
    investigate before relying on that topic (e.g. for a rebuild).
    """


@dataclass
class ViewResult:
    """One topic compared with the state store; for the output, how its keys split (``split_output``)."""

    diff: Diff
    read: TopicRead
    split: OutputSplit | None = None

    @property
    def compared(self) -> int:
        """Keys held by both the state side and the topic (equal or different)."""
        return self.diff.expected - len(self.diff.missing)

    @property
    def expired(self) -> int:
        return len(self.split.expired) if self.split is not None else 0

    @property
    def malformed(self) -> list[tuple[str, str]]:
        return self.split.malformed if self.split is not None else []

    def summary(self) -> dict[str, Any]:
        s = self.diff.summary()
        s.pop("duplicates", None)
        s["state_keys"] = s.pop("expected")
        s.pop("actual")
        s["samples"]["undecodable"] = self.read.undecodable[:SAMPLES]
        s["samples"]["malformed"] = [{"key": k, "why": why} for k, why in self.malformed[:SAMPLES]]
        return {**s, "topic_keys": len(self.read.values), "compared": self.compared, "expired": self.expired,
                "malformed": len(self.malformed), "topic": self.read.topic,
                "undecodable": len(self.read.undecodable), "records": self.read.records,
                "tombstones": self.read.tombstones, "later_batch_records": self.read.later,
                "seconds": round(self.read.seconds, 2)}


def categorize(state: StateRead, views: Sequence[ViewResult], quality: QualityReport | None) -> list[str]:
    """What went wrong, as stable names: ``state_unreadable``, ``state_checksum``,
    ``<view>.missing|extra|different|undecodable|malformed``, ``quality.<check>``; empty when all is well."""
    out = []
    if not state.readable:
        out.append("state_unreadable")
    if state.corrupt_files:
        out.append("state_checksum")
    for v in views:
        d = v.diff
        for kind, n in (("missing", len(d.missing)), ("extra", len(d.extra)), ("different", len(d.different)),
                        ("undecodable", len(v.read.undecodable)), ("malformed", len(v.malformed))):
            if n:
                out.append(f"{d.view}.{kind}")
    if quality is not None:
        out.extend(f"quality.{r.check}" for r in quality.results if not r.success)
    return out


@dataclass(frozen=True)
class KeyCounts:
    """The output topic's keys by what verify could do with them; they add up to its key count."""

    compared: int  # the state explains the key: its value was compared (equal or different)
    expired: int  # no state explains it (expire dropped it): well-formed
    malformed: int  # no state explains it, and it is not a value the job emits
    extra: int = 0  # a job without expire: no state explains it

    @classmethod
    def of(cls, view: ViewResult) -> KeyCounts:
        return cls(view.compared, view.expired, len(view.malformed), len(view.diff.extra))

    def line(self) -> str:
        return (f"{self.compared:,} compared, {self.expired:,} expired (well-formed), {self.malformed:,} malformed"
                + (f", {self.extra:,} extra" if self.extra else ""))


@dataclass
class VerifyReport:
    app: str
    batch_id: int
    state: StateRead
    views: list[ViewResult]
    quality: QualityReport | None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    operation_id: int | None = None

    @property
    def categories(self) -> list[str]:
        return categorize(self.state, self.views, self.quality)

    @property
    def ok(self) -> bool:
        return not self.categories

    @property
    def report_html(self) -> str | None:
        return self.quality.report_html if self.quality is not None else None

    def _view(self, name: str) -> ViewResult | None:
        return next((v for v in self.views if v.diff.view == name), None)

    @property
    def output_keys(self) -> KeyCounts | None:
        """None when the output was not compared (the state store was unreadable)."""
        out = self._view("output")
        return KeyCounts.of(out) if out is not None else None

    @property
    def nothing_to_compare(self) -> str | None:
        """Why the output (or everything) was compared over no key, or None: an OK over nothing says so."""
        out = self._view("output")
        if out is None or out.diff.expected:
            return None
        why = (f"the state store at batch {self.batch_id} holds no key" if not self.state.values
               else f"the state store's {len(self.state.values):,} keys emit no output key")
        keys = self.output_keys
        if out.read.values and keys is not None:
            why += f"; output keys: {keys.line()}"
        return why

    def headline(self) -> str:
        verdict = "OK" if self.ok else "FAILED (" + ", ".join(self.categories) + ")"
        nothing = self.nothing_to_compare
        return f"verify {self.app}: {verdict} as of batch {self.batch_id}" + (
            f", but nothing to compare: {nothing}" if nothing and self.ok else "")

    def ledger_summary(self) -> dict[str, Any]:
        """What the ledger keeps (``after``): counts, no samples of values."""
        return {
            "batch_id": self.batch_id, "ok": self.ok, "categories": self.categories,
            "state": {k: v for k, v in self.state.summary().items() if k != "seconds"},
            "views": {v.diff.view: {k: v.summary()[k] for k in
                                    ("topic", "state_keys", "topic_keys", "compared", "expired", "missing", "extra",
                                     "different", "undecodable", "malformed")} for v in self.views},
            "output_keys": None if self.output_keys is None else asdict(self.output_keys),
            "nothing_to_compare": self.nothing_to_compare,
            "quality": None if self.quality is None else {
                r.check: {"suite": r.suite, "evaluated": r.evaluated, "failed": len(r.failures)}
                for r in self.quality.results},
            "report_html": self.report_html, "seconds": round(self.seconds, 1),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "app": self.app, "batch_id": self.batch_id, "ok": self.ok, "categories": self.categories,
            "state": self.state.summary(), "views": [v.summary() for v in self.views],
            "output_keys": None if self.output_keys is None else asdict(self.output_keys),
            "nothing_to_compare": self.nothing_to_compare,
            "quality": None if self.quality is None else self.quality.to_dict(),
            "report_html": self.report_html, "notes": self.notes, "seconds": round(self.seconds, 2),
            "timings": {k: round(v, 2) for k, v in self.timings.items()}, "operation_id": self.operation_id,
        }

    def raise_if_failed(self) -> None:
        """For tasks: fail with the readable summary (the log then shows the report path too)."""
        if not self.ok:
            raise VerifyFailedError(render(self))


def render(report: VerifyReport) -> str:
    st = report.state
    lines = [report.headline()]
    if st.readable:
        lines.append(f"  state      {len(st.values):>10,} keys"
                     + (f" in {st.rows:,} rows" if st.rows != len(st.values) else ""))
    else:
        lines.append(f"  state      UNREADABLE: {st.error}")
    for f in st.corrupt_files[:SAMPLES]:
        lines.append(f"      checksum mismatch: {f}")
    if len(st.corrupt_files) > SAMPLES:
        lines.append(f"      ... and {len(st.corrupt_files) - SAMPLES} more files")
    for v in report.views:
        s = v.summary()
        lines.append(f"  {s['view']:<10} {s['topic_keys']:>10,} keys  missing {s['missing']}  extra {s['extra']}  "
                     f"different {s['different']}  undecodable {s['undecodable']}   ({s['topic']}: "
                     f"{s['records']:,} records, {s['tombstones']:,} tombstones"
                     + (f", {s['later_batch_records']:,} of later batches ignored" if s["later_batch_records"]
                        else "") + ")")
        if v.split is not None:
            lines.append(f"      output keys: {KeyCounts.of(v).line()}")
        for kind in ("missing", "extra", "undecodable"):
            for key in s["samples"][kind]:
                lines.append(f"      {kind}: {key}")
        for m in s["samples"]["malformed"]:
            lines.append(f"      malformed: {m['key']}  {m['why']}")
        for d in s["samples"]["different"]:
            lines.append(f"      different: {d['key']}  state {json.dumps(d['expected'], default=str)}  "
                         f"{s['view']} {json.dumps(d['actual'], default=str)}")
    if report.quality is not None:
        lines.extend("  quality    " + ln if not ln.startswith("  ") else "           " + ln
                     for ln in report.quality.summary_lines())
    lines.extend(f"  note       {n}" for n in report.notes)
    if report.report_html:
        lines.append(f"  report     {report.report_html}")
    lines.append(f"  took       {report.seconds:.1f}s ("
                 + ", ".join(f"{k} {v:.1f}s" for k, v in report.timings.items()) + ")")
    return "\n".join(lines)

