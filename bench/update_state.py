"""The update shape's per-group function (``worker.update_state``) without Spark, against the
same function at an earlier commit.

PySpark's ``applyInPandasWithState`` calls it once per key and batch, so its fixed cost per group
bounds an update job's throughput. The input is each app's own generator, parsed by
``parse_update`` into batches of ``--batch`` records and grouped by (key, lane) as Spark would hand
them (one or two frames per group, in shuffled order); state is kept across batches. Both versions
run on the same groups, alternating per run; their outputs and final states must be equal.

    .venv/bin/python bench/update_state.py [--baseline-rev 72c7592] [--runs 5] [--events 8000]
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
import pyarrow as pa
from pandas.testing import assert_frame_equal

from bench._common import summary, table
from streamops.spark.query import worker
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


def batches(job_cls, events: int, per_batch: int) -> list[dict]:
    """The groups of each batch: {(key, lane): [frames]}, as applyInPandasWithState hands them."""
    rng = random.Random(2)
    offsets = [0, 0, 0, 0]
    raw = []
    for key, value in job_cls().generate(events, seed=5):
        p = rng.randrange(4)
        raw.append((p, offsets[p], key, value))
        offsets[p] += 1
    out = []
    for i in range(0, len(raw), per_batch):
        chunk = raw[i:i + per_batch]
        b = pa.RecordBatch.from_pydict({
            "key": [r[2] for r in chunk], "value": [r[3] for r in chunk], "topic": ["in"] * len(chunk),
            "partition": pa.array([r[0] for r in chunk], pa.int32()), "offset": [r[1] for r in chunk]})
        parsed = next(worker.parse_update(job_cls)(iter([b]))).to_pandas()
        groups = {}
        for n, ((key, lane), g) in enumerate(parsed.groupby(["key", "lane"], sort=False)):
            g = g.sample(frac=1, random_state=n).reset_index(drop=True)  # arrival order is not input order
            half = len(g) // 2
            groups[(key, int(lane))] = [g] if len(g) < 4 else [g.iloc[:half].reset_index(drop=True),
                                                              g.iloc[half:].reset_index(drop=True)]
        out.append(groups)
    return out


def one_run(fn, data: list[dict]) -> tuple[float, list, dict]:
    states: dict = {}
    outputs = []
    t0 = time.perf_counter()
    for groups in data:
        for group, frames in groups.items():
            outputs.extend(fn(group, iter(frames), states.setdefault(group, GroupState())))
    return time.perf_counter() - t0, outputs, {g: s.blob for g, s in states.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-rev", default="72c7592")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--events", type=int, default=8000)
    ap.add_argument("--batch", type=int, default=1250)
    args = ap.parse_args()
    baseline = module_at(args.baseline_rev)
    specs = load_specs(default_spec_path(REPO))
    rows = []
    # (page_stats has stream time since issue 24: another function, update_timed; bench/apps.py measures it)
    for app in ("orders",):
        job_cls = load_job(get_app(specs, app), REPO)
        data = batches(job_cls, args.events, args.batch)
        n = sum(len(g) for g in data)
        times: dict[str, list[float]] = {"baseline": [], "current": []}
        for _ in range(args.runs):
            t_base, out_base, st_base = one_run(baseline.update_state(job_cls), data)
            t_cur, out_cur, st_cur = one_run(worker.update_state(job_cls), data)
            times["baseline"].append(t_base / n * 1000)
            times["current"].append(t_cur / n * 1000)
            assert st_base == st_cur and len(out_base) == len(out_cur)
            for a, b in zip(out_base, out_cur):
                assert_frame_equal(a, b)
        base_median = summary(times["baseline"])[1]
        for name, label in (("baseline", f"{args.baseline_rev} (baseline)"), ("current", "current")):
            lo, med, hi = summary(times[name])
            rows.append([app, label, n, f"{lo:.2f} / {med:.2f} / {hi:.2f}", f"{med / base_median:.2f}"])
    print(f"update_state per group, {args.events} events per app in batches of {args.batch}, "
          f"{args.runs} runs each, outputs and states equal")
    print(table(["app", "version", "groups", "ms per group (min/median/max)", "ratio"], rows))


if __name__ == "__main__":
    main()
