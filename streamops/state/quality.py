"""Great Expectations suites over pandas frames: the data-quality half of ``streamops verify``.

Suites are JSON files in GX's own format under ``include/expectations/`` (reviewed like code,
edited without touching Python); this module only loads and runs them. GX runs in an ephemeral
context (nothing written but the HTML report), with analytics and its progress bars off, so a
verify task's log stays readable and the machine makes no network calls.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamops.exceptions import ConfigError

if TYPE_CHECKING:
    import pandas as pd

SAMPLES = 5
SITE = "verify"


def suites_dir(repo: Path) -> Path:
    return repo / "include" / "expectations"


def load_suite(path: Path) -> dict[str, Any]:
    """A suite as GX serializes it (``name``, ``expectations: [{type, kwargs, meta}]``)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no expectation suite at {path}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not data.get("name") or not isinstance(data.get("expectations"), list):
        raise ConfigError(f"{path}: expected a GX suite {{name, expectations: [...]}}")
    return data


@dataclass(frozen=True)
class Check:
    """One frame validated with one suite (``name`` becomes the GX data asset's name)."""

    name: str
    suite: Path
    frame: pd.DataFrame


@dataclass
class Failure:
    """One failed expectation, reduced to what an operator needs to read."""

    expectation: str
    kwargs: dict[str, Any]
    unexpected: int | None = None
    of: int | None = None
    samples: list = field(default_factory=list)
    observed: Any = None
    error: str | None = None

    def line(self) -> str:
        args = ", ".join(f"{k}={_short(v)}" for k, v in self.kwargs.items())
        head = f"{self.expectation}({args})"
        if self.error:
            return f"{head}: error: {self.error}"
        if self.unexpected is not None:
            of = f" of {self.of:,}" if self.of is not None else ""
            eg = f", e.g. {_short(self.samples)}" if self.samples else ""
            return f"{head}: {self.unexpected:,}{of} rows unexpected{eg}"
        return f"{head}: observed {_short(self.observed)}"

    def to_dict(self) -> dict[str, Any]:
        return {"expectation": self.expectation, "kwargs": self.kwargs, "unexpected": self.unexpected,
                "of": self.of, "samples": self.samples, "observed": self.observed, "error": self.error,
                "summary": self.line()}


@dataclass
class SuiteResult:
    check: str
    suite: str
    success: bool
    evaluated: int
    failures: list[Failure]
    page: str | None = None  # this validation's HTML page

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "suite": self.suite, "success": self.success, "evaluated": self.evaluated,
                "failed": len(self.failures), "failures": [f.to_dict() for f in self.failures],
                "page": self.page}


@dataclass
class QualityReport:
    results: list[SuiteResult]
    report_html: str | None = None  # the data docs index (links every validation of the run)

    @property
    def ok(self) -> bool:
        return all(r.success for r in self.results)

    def summary_lines(self) -> list[str]:
        out = []
        for r in self.results:
            passed = r.evaluated - len(r.failures)
            out.append(f"{r.check} ({r.suite}): {passed}/{r.evaluated} expectations passed")
            out.extend(f"  FAILED {f.line()}" for f in r.failures)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "report_html": self.report_html, "suites": [r.to_dict() for r in self.results]}


def _short(v: Any, limit: int = 120) -> str:
    text = json.dumps(_plain(v), default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _plain(v: Any) -> Any:
    """numpy scalars / tuples from GX results -> JSON-friendly Python values."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    item = getattr(v, "item", None)
    if callable(item) and type(v).__module__ == "numpy":
        return item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def _quiet_gx() -> None:
    os.environ["GX_ANALYTICS_ENABLED"] = "false"  # before the import: no usage statistics calls
    for name in ("great_expectations", "great_expectations.core", "great_expectations.data_context"):
        logging.getLogger(name).setLevel(logging.ERROR)


def prefetch() -> None:
    """Import GX now (it takes seconds) so a caller can overlap that with other waiting."""
    _quiet_gx()
    import great_expectations  # noqa: F401


def _failure(r: Any) -> Failure:
    cfg = r.expectation_config
    kwargs = {k: _plain(v) for k, v in (cfg.kwargs or {}).items() if k != "batch_id"}
    info = r.exception_info or {}
    if info.get("raised_exception"):
        msg = str(info.get("exception_message") or "exception").strip().splitlines()[0]
        return Failure(cfg.type, kwargs, error=msg)
    res = r.result or {}
    return Failure(
        cfg.type, kwargs,
        unexpected=_plain(res.get("unexpected_count")),
        of=_plain(res.get("element_count")),
        samples=_plain(list(res.get("partial_unexpected_list") or [])[:SAMPLES]),
        observed=_plain(res.get("observed_value")),
    )


def run_checks(checks: Sequence[Check], *, parameters: Mapping[str, Any] | None = None,
               docs_dir: Path | None = None, run_name: str = "verify") -> QualityReport:
    """Validate each frame with its suite; write one data docs site to ``docs_dir`` (if given).

    ``parameters`` fill the suites' ``{"$PARAMETER": name}`` placeholders (e.g. ``now_ms``).
    """
    _quiet_gx()
    import great_expectations as gx
    from great_expectations.checkpoint import UpdateDataDocsAction
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    actions = []
    if docs_dir is not None:
        docs_dir.mkdir(parents=True, exist_ok=True)
        ctx.add_data_docs_site(site_name=SITE, site_config={
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        })
        actions = [UpdateDataDocsAction(name="html_report", site_names=[SITE])]
    source = ctx.data_sources.add_pandas("streamops")
    results: list[SuiteResult] = []
    for check in checks:
        body = load_suite(check.suite)
        suite = ctx.suites.add(gx.ExpectationSuite(**{k: v for k, v in body.items() if k != "id"}))
        batch = source.add_dataframe_asset(check.name).add_batch_definition_whole_dataframe("all")
        vd = ctx.validation_definitions.add(gx.ValidationDefinition(name=check.name, data=batch, suite=suite))
        cp = ctx.checkpoints.add(gx.Checkpoint(name=check.name, validation_definitions=[vd], actions=actions,
                                               result_format={"result_format": "SUMMARY"}))
        out = cp.run(batch_parameters={"dataframe": check.frame},
                     expectation_parameters=dict(parameters or {}),
                     run_id=RunIdentifier(run_name=run_name))
        for ident, vr in out.run_results.items():
            page = None
            if docs_dir is not None:
                urls = ctx.get_docs_sites_urls(resource_identifier=ident, site_name=SITE)
                page = urls[0]["site_url"].removeprefix("file://") if urls else None
            results.append(SuiteResult(check.name, suite.name, bool(vr.success), len(vr.results),
                                       [_failure(r) for r in vr.results if not r.success], page))
    index = docs_dir / "index.html" if docs_dir is not None else None
    return QualityReport(results, str(index) if index is not None and index.exists() else None)
