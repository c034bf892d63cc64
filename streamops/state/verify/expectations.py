"""The Great Expectations part of ``streamops verify``: the app's state and output suites and
``verify_result.json`` over the comparison's counts (``run_quality``), the frames they judge
(``state_frame``, ``result_frame``) and the HTML report folders kept per app."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from streamops.settings import Settings
from streamops.spec import AppSpec
from streamops.state.verify.topics import Progress

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from streamops.state.quality import QualityReport
    from streamops.state.verify.report import ViewResult
    from streamops.state.verify.state_read import StateRead

RESULT_SUITE = "verify_result.json"
#: a last login up to this far ahead of the verifier's clock is producer clock skew, not a bug
CLOCK_SKEW_MS = 60_000


def state_frame(table: pa.Table) -> pd.DataFrame:
    """pandas for GX; nullable integers so a null last_login_ts stays an exact int64 column."""
    import pandas as pd
    import pyarrow as pa

    mapping = {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype()}
    return table.to_pandas(types_mapper=mapping.get)


RESULT_COLUMNS = ["view", "state_keys", "topic_keys", "compared", "expired", "missing", "extra", "different",
                  "undecodable", "malformed"]


def result_frame(views: Sequence[ViewResult]) -> pd.DataFrame:
    """One row per view: the counts ``verify_result.json`` checks."""
    import pandas as pd

    return pd.DataFrame([{
        "view": v.diff.view, "state_keys": v.diff.expected, "topic_keys": len(v.read.values),
        "compared": v.compared, "expired": v.expired, "missing": len(v.diff.missing), "extra": len(v.diff.extra),
        "different": len(v.diff.different), "undecodable": len(v.read.undecodable), "malformed": len(v.malformed),
    } for v in views], columns=RESULT_COLUMNS)


#: HTML reports kept per app (~4 MB each, mostly Great Expectations' static files): two days hourly
REPORTS_KEPT = 48


def _report_dir(settings: Settings, app: str, batch: int) -> Path:
    """A new report folder; the oldest beyond ``REPORTS_KEPT`` are deleted (names sort by time)."""
    import shutil

    root = settings.state_dir / "reports" / "verify" / app
    if root.is_dir():
        for old in sorted(p for p in root.iterdir() if p.is_dir())[:-(REPORTS_KEPT - 1) or None]:
            shutil.rmtree(old, ignore_errors=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return root / f"{stamp}-batch{batch}"


def run_quality(spec: AppSpec, settings: Settings, state: StateRead, views: Sequence[ViewResult], *,
                batch: int, now_ms: int | None = None, html: bool = True, notes: list[str] | None = None,
                progress: Progress = lambda _m: None) -> QualityReport:
    """The GX part: the app's state suite and output suite (each if it has one) and the result suite.
    The output suite (``<app>_output.json``) is for jobs whose output no state explains, such as
    windows emitted once they close: their output records are the data to judge."""
    from streamops.state import quality as q

    suites = q.suites_dir(settings.repo)
    checks = []
    state_suite = suites / f"{spec.name}_state.json"
    if not state_suite.exists():
        if notes is not None:
            notes.append(f"no state data-quality suite ({state_suite} does not exist)")
    elif state.table is not None:
        checks.append(q.Check("state", state_suite, state_frame(state.table)))
    elif notes is not None:
        notes.append("the state store's states emit no output records (an empty store, or windows written "
                     "only once they close): the state data-quality suite was not run")
    output_suite = suites / f"{spec.name}_output.json"
    values = [v for view in views if view.read.view == "output" for v in view.read.values.values()
              if isinstance(v, dict)]
    if output_suite.exists() and values:
        import pyarrow as pa

        checks.append(q.Check("output", output_suite, state_frame(pa.Table.from_pylist(values))))
    checks.append(q.Check("result", suites / RESULT_SUITE, result_frame(views)))
    docs = _report_dir(settings, spec.name, batch) if html else None
    progress(f"  running {len(checks)} expectation suite(s)" + (f", report in {docs}" if docs else ""))
    now = int(time.time() * 1000) + CLOCK_SKEW_MS if now_ms is None else int(now_ms)
    return q.run_checks(checks, parameters={"now_ms": now}, docs_dir=docs,
                        run_name=f"{spec.name}-batch{batch}")

