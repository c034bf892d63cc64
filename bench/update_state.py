"""The update shape's parse and per-group function (``worker.parse_update``, ``worker.update_state``)
without Spark but through PySpark's own per-group conversion, against the same code at an earlier
commit.

PySpark's ``applyInPandasWithState`` calls the function once per key and batch, handing it the
group's rows as pandas frames it builds column by column from Arrow (``ArrowBatchTransformer.
to_pandas``, then ``pd.concat(axis=1)``), and turns the frames it returns back into Arrow: this
bench does the same around each version's function. The input is each app's own generator, parsed
by each version's own ``parse_update`` into batches of ``--batch`` records and grouped by (key, lane)
as Spark would hand them (one or two frames per group, in shuffled order); state is kept across
batches. Both versions run on the same records, alternating per run; their outputs and final states
must be equal (the DLQ rows' fields compared whether packed or not).

    .venv/bin/python bench/update_state.py [--baseline-rev REV] [--apps orders,page_stats,sessions] [--runs 5] \
        [--events 50000] [--batch 25000]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import pandas as pd
import pyarrow as pa

from bench._common import summary, table
from streamops.spark.query import worker
from streamops.spark.query.records import DLQ_FIELDS, unpack_dlq
from streamops.spec import default_spec_path, get_app, load_job, load_specs
from tests.fixtures.group_state import GroupState

#: where the per-group functions lived: ``spark/query/worker.py``, before it ``spark/job_query.py``
WORKER_PATHS = ("streamops/spark/query/worker.py", "streamops/spark/job_query.py")


def module_at(rev: str):
    """The module holding ``update_state`` (``WORKER_PATHS``) as it was at ``rev``."""
    for rel in WORKER_PATHS:
        shown = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=REPO, check=False, capture_output=True,
                               text=True)
        if shown.returncode == 0:
            break
    else:
        raise SystemExit(f"{rev} has none of {', '.join(WORKER_PATHS)}")
    path = Path(tempfile.mkdtemp()) / "worker_baseline.py"
    path.write_text(shown.stdout)
    spec = importlib.util.spec_from_file_location("worker_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def kafka_batches(job_cls, events: int, per_batch: int) -> list[pa.RecordBatch]:
    """The app's generated records as the Kafka source's rows, in batches, over 4 partitions."""
    rng = random.Random(2)
    offsets = [0, 0, 0, 0]
    raw = []
    for item in job_cls().generate(events, seed=5):
        key, value = item[-2:]
        p = rng.randrange(4)
        raw.append((p, offsets[p], key, value))
        offsets[p] += 1
    ts0 = 1_767_225_600_000_000
    return [pa.RecordBatch.from_pydict({
        "key": [r[2] for r in chunk], "value": [r[3] for r in chunk], "topic": ["in"] * len(chunk),
        "partition": pa.array([r[0] for r in chunk], pa.int32()), "offset": [r[1] for r in chunk],
        "timestamp": pa.array([ts0 + 1000 * n for n in range(len(chunk))], pa.timestamp("us"))})
        for chunk in (raw[i:i + per_batch] for i in range(0, len(raw), per_batch))]


def groups(module, job_cls, batch: pa.RecordBatch) -> dict[tuple, list[pa.Table]]:
    """One batch parsed by ``module``'s own parse, as its groups: {(key, lane): [Arrow slices]}."""
    parsed = pa.Table.from_batches(list(module.parse_update(job_cls)(iter([batch]))))
    if "wm_ms" in parsed.column_names:  # Spark's watermark column, made from it by the plan
        parsed = parsed.append_column("wm", parsed.column("wm_ms").cast(pa.timestamp("ms")).cast(
            pa.timestamp("us", tz="UTC")))
        if "row" in parsed.column_names:  # the current plan drops wm_ms once it made wm
            parsed = parsed.drop_columns(["wm_ms"])
    keys = parsed.select(["key", "lane"]).to_pandas()  # a RangeIndex: each group's row positions
    out = {}
    for n, ((key, lane), g) in enumerate(keys.groupby(["key", "lane"], sort=False)):
        if int(lane) > worker.REJECT_LANE:  # clock and tick rows: the driver's bookkeeping
            continue
        at = list(g.index)
        random.Random(n).shuffle(at)  # arrival order is not input order
        t = parsed.take(pa.array(at))
        half = len(at) // 2
        out[(key, int(lane))] = [t] if len(at) < 4 else [t.slice(0, half), t.slice(half)]
    return out


def normalized(frames: list[pd.DataFrame]) -> list[tuple]:
    """Out rows as (kind, key, value, DLQ fields), whether a version has a column per DLQ field or
    packs them in a ``dlq`` row's value (``records.pack_dlq``)."""
    rows = []
    for pdf in frames:
        for r in pdf.to_dict("records"):
            if r["kind"] != "dlq":
                rows.append((r["kind"], r["key"], r["value"], None))
            elif "reason" in r:
                rows.append(("dlq", None, None, tuple(r[f] for f in DLQ_FIELDS)))
            else:
                rows.append(("dlq", None, None, tuple(unpack_dlq(r["value"]).values())))
    return rows


def one_run(fn, data: list[dict]) -> tuple[float, list, dict]:
    """Every group of every batch through ``fn`` as PySpark runs it: Arrow to pandas column by
    column and concatenated (``ArrowBatchTransformer.to_pandas``), the frames back to Arrow."""
    from pyspark.sql.conversion import ArrowBatchTransformer

    states: dict = {}
    outputs = []
    t0 = time.perf_counter()
    for groups_of_batch in data:
        for group, slices in groups_of_batch.items():
            frames = (pd.concat(ArrowBatchTransformer.to_pandas(s, timezone="UTC"), axis=1) for s in slices)
            for pdf in fn(group, frames, states.setdefault(group, GroupState(watermark=1))):
                pa.RecordBatch.from_pandas(pdf, preserve_index=False)
                outputs.append(pdf)
    return time.perf_counter() - t0, outputs, {g: s.blob for g, s in states.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-rev", default="HEAD")
    ap.add_argument("--apps", default="orders,page_stats,sessions")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--batch", type=int, default=25_000)
    args = ap.parse_args()
    baseline = module_at(args.baseline_rev)
    specs = load_specs(default_spec_path(REPO))
    rows = []
    for app in args.apps.split(","):
        job_cls = load_job(get_app(specs, app), REPO)
        raw = kafka_batches(job_cls, args.events, args.batch)
        base_groups = [groups(baseline, job_cls, b) for b in raw]  # each revision's own parse, once
        cur_groups = [groups(worker, job_cls, b) for b in raw]
        times: dict[str, list[float]] = {"baseline": [], "current": []}
        for _ in range(args.runs):
            t_base, out_base, st_base = one_run(baseline.update_state(job_cls), base_groups)
            t_cur, out_cur, st_cur = one_run(worker.update_state(job_cls), cur_groups)
            times["baseline"].append(t_base / args.events * 1e6)
            times["current"].append(t_cur / args.events * 1e6)
            assert st_base == st_cur and normalized(out_base) == normalized(out_cur)
        base_median = summary(times["baseline"])[1]
        for name, label in (("baseline", f"{args.baseline_rev} (baseline)"), ("current", "current")):
            lo, med, hi = summary(times[name])
            rows.append([app, label, f"{lo:.1f} / {med:.1f} / {hi:.1f}", f"{med / base_median:.2f}"])
    print(f"update_state through PySpark's per-group conversion, {args.events} events per app in batches of "
          f"{args.batch}, {args.runs} runs each, outputs and states equal")
    print(table(["app", "version", "us per input record (min/median/max)", "ratio"], rows))


if __name__ == "__main__":
    main()
