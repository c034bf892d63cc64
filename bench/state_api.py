"""The ways PySpark runs a Python per-key function over state, measured on the update apps
(issue 39, item 4): the same parsed rows, the same fold (``worker.update_key``/``timed_key``), the
same state (one serialized blob per key), through each operator in turn.

    .venv/bin/python bench/state_api.py [--apps orders,page_stats,sessions] [--runs 3] \\
        [--events 100000] [--batches 10] [--partitions 4] [--apis pandas-with-state,tws-pandas,tws-rows,none]

- ``pandas-with-state``: ``applyInPandasWithState`` with the key's state in its ``GroupState``, as
  the apps run today (``plan.JobQuery._per_key``);
- ``tws-pandas``: ``transformWithStateInPandas``, the blob in one ``ValueState`` (timers, where the
  job has them, registered with the handle, as named state does);
- ``tws-rows``: ``transformWithState`` (4.1's row API), the same processor over ``Row`` objects;
- ``none``: the parse and the exchange by (key, lane) only, each batch's rows counted: the floor
  the stateful operator adds to.

Per run and app, one local Spark (``local[2]``, RocksDB with changelog checkpointing, as the apps),
the app's generated records cut into ``--batches`` files of a file stream (``lint_spark``'s input;
a job with stream time gets its tick batches as ``lint_spark.run_stream`` makes them); a first
round of every variant warms the JVM and is not counted (the first variant in a fresh JVM ran up
to 1.5x slower); then the variants run in turn (order rotated per run), each on a fresh checkpoint, and each one's output,
changelog and DLQ must equal the plain fold's (``oracle.fold_input``; asserted). Reported: steady
records/s = the records of batches 2..n over their ``triggerExecution`` (the first batch starts
the Python workers and the state stores), min/median/max over the runs, and the ratio to
``pandas-with-state``; the state stage's own cost in us per record, the variant's time per
record minus ``none``'s; and, for a job with stream time, records/s over the data batches alone and
the median time of a tick's batch (one record: a batch's fixed cost).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import summary, table
from bench.named_state import session
from streamops.job import Job
from streamops.spark.query.named import NamedStore
from streamops.spark.query.plan import ClockStep, JobQuery, Topics
from streamops.spark.query.worker import ROW_FIELDS, UPDATE_OUT_DDL, _frame, timed_key, update_key

APIS = ("pandas-with-state", "tws-pandas", "tws-rows", "none")


class ValueBlobStore(NamedStore):
    """A key's state as one serialized blob in a ``ValueState`` (the ``BlobStore`` of the TWS APIs);
    timers as ``NamedStore`` keeps them."""

    def __init__(self, job_cls: type[Job], var, handle, watermark_ms: int) -> None:
        self.serde, self.var, self.handle, self.wm = job_cls.state_serde, var, handle, watermark_ms

    def load(self) -> Any:
        got = self.var.get()
        return None if got is None else self.serde.loads(got[0])

    def save(self, key: str, kept: Any, rows: list[tuple]) -> Any:
        if kept is None:
            self.var.clear()
            rows.append(("changelog", key, None))
            return None
        blob = self.serde.dumps(kept)
        self.var.update((blob,))
        rows.append(("changelog", key, blob))
        return kept


def _columns(blobs: list[bytes]) -> dict[str, list]:
    import pickle

    rows = [pickle.loads(b) for b in blobs]
    fields = list(zip(*rows)) if rows else [() for _ in ROW_FIELDS]
    return {n: list(fields[i]) for i, n in enumerate(ROW_FIELDS)}


def blob_processor(job_cls: type[Job], *, rows_api: bool):
    """A ``StatefulProcessor`` running the job's fold over a ``ValueBlobStore``: frames in and out
    (``transformWithStateInPandas``) or ``Row`` objects (``transformWithState``)."""
    from pyspark.sql import Row
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    timed = job_cls.has_time()

    def out(rows: list[tuple]) -> Iterator:
        if rows_api:
            yield from (Row(kind=k, key=key, value=v) for k, key, v in rows)
        else:
            yield _frame(rows)

    class Processor(StatefulProcessor):
        def init(self, handle) -> None:
            self.handle = handle
            self.var = handle.getValueState("blob", "blob binary")

        def handleInputRows(self, key, rows, timerValues) -> Iterator:
            k, lane = key[0], int(key[1])
            store = ValueBlobStore(job_cls, self.var, self.handle, timerValues.getCurrentWatermarkInMs())
            blobs = [r["row"] for r in rows] if rows_api else [b for pdf in rows for b in pdf["row"].tolist()]
            c = _columns(blobs)
            yield from out(timed_key(job_cls, k, lane, c, store) if timed else update_key(job_cls, k, lane, c, store))

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator:
            store = ValueBlobStore(job_cls, self.var, self.handle, timerValues.getCurrentWatermarkInMs())
            yield from out(timed_key(job_cls, key[0], int(key[1]), _columns([]), store))

        def close(self) -> None:
            pass

    return Processor()


class ApiQuery(JobQuery):
    """The app's query with its per-key operator swapped for ``api``'s."""

    def __init__(self, job_cls: type[Job], api: str, **kw: Any) -> None:
        super().__init__(job_cls, **kw)
        self.api = api

    def _per_key(self, parsed):
        time_mode = "EventTime" if self.timed else "None"
        grouped = parsed.groupBy("key", "lane")
        if self.api == "pandas-with-state":
            return super()._per_key(parsed)
        if self.api == "tws-pandas":
            return grouped.transformWithStateInPandas(blob_processor(self.job_cls, rows_api=False),
                                                      outputStructType=UPDATE_OUT_DDL, outputMode="Update",
                                                      timeMode=time_mode)
        if self.api == "tws-rows":
            return grouped.transformWithState(blob_processor(self.job_cls, rows_api=True),
                                              outputStructType=UPDATE_OUT_DDL, outputMode="Update",
                                              timeMode=time_mode)
        return parsed  # none: the parse and the exchange

    # none: its rows are the parsed rows, counted by Spark and dropped (no records, clocks or ticks)
    def records(self, table, batch_id: int) -> list:
        return [] if self.api == "none" else super().records(table, batch_id)

    def advance_clocks(self, table, batch_id: int, checkpoint: Path, partitions, ends=None, now_ms=None):
        if self.api == "none":
            return ClockStep(None, [])
        return super().advance_clocks(table, batch_id, checkpoint, partitions, ends, now_ms)


def run(spark, job_cls: type[Job], api: str, records: list, batches: int, partitions: int) -> dict:
    from streamops.state.lint_spark import TICKS, compare, run_stream
    from streamops.state.oracle import fold_input

    root = Path(tempfile.mkdtemp(prefix="bench-state-api-"))
    query = ApiQuery(job_cls, api, state_partitions=partitions, topics=Topics("out", "changelog", "dlq", TICKS))
    reports: list = []
    try:
        t0 = time.perf_counter()
        got, _ = run_stream(spark, query, records, root, batches, progress=reports)
        wall = time.perf_counter() - t0
        progress = [p for p in reports if p["numInputRows"] > 0]
        if api != "none":
            diffs = compare(job_cls, fold_input(job_cls, records), got)
            assert not diffs, f"{api}: {diffs}"
        steady = progress[1:]
        ms = sum(p["durationMs"]["triggerExecution"] for p in steady)
        n = sum(p["numInputRows"] for p in steady)
        # a job with stream time: the batches of one tick record each, apart from the data's
        big = max(p["numInputRows"] for p in progress)
        data = [p for p in steady if p["numInputRows"] * 100 >= big]
        small = [p["durationMs"]["triggerExecution"] for p in steady if p["numInputRows"] * 100 < big]
        data_ms = sum(p["durationMs"]["triggerExecution"] for p in data)
        return {"rate": n / ms * 1000, "us": ms * 1000 / n, "wall": wall, "batches": len(progress),
                "data_rate": sum(p["numInputRows"] for p in data) / data_ms * 1000,
                "tick_ms": statistics.median(small) if small else None}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--apps", default="orders,page_stats,sessions")
    ap.add_argument("--apis", default=",".join(APIS), help="comma-separated, of: " + ", ".join(APIS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=4, help="state partitions (the specs' 4)")
    args = ap.parse_args()
    apis = [a.strip() for a in args.apis.split(",")]
    unknown = sorted(set(apis) - set(APIS))
    if unknown:
        ap.error(f"unknown --apis {', '.join(unknown)} (of: {', '.join(APIS)})")
    from streamops.spec import default_spec_path, get_app, load_job, load_specs
    from streamops.state.sample import sample_records

    specs = load_specs(default_spec_path(REPO))
    spark = session()
    results: dict[tuple[str, str], list[dict]] = {}
    try:
        for n in range(-1, args.runs):  # round -1 warms the JVM (its JIT) for every variant; not counted
            for app in (a.strip() for a in args.apps.split(",")):
                spec = get_app(specs, app)
                job_cls = load_job(spec, REPO)
                records = sample_records(job_cls, spec.input_topics, 4, job_cls().generate(args.events, seed=n + 1))
                order = apis[n % len(apis):] + apis[:n % len(apis)]
                for api in order:
                    r = run(spark, job_cls, api, records, args.batches, args.partitions)
                    if n >= 0:
                        results.setdefault((app, api), []).append(r)
                    ticks = "" if r["tick_ms"] is None else f", tick batches {r['tick_ms']:.0f} ms (median)"
                    print(f"run {n} {app} {api}: {r['rate']:,.0f} records/s steady ({r['data_rate']:,.0f} in the "
                          f"data batches{ticks}), {r['batches']} batches, {r['wall']:.1f}s wall", flush=True)
    finally:
        spark.stop()
    rows = []
    for (app, api), rs in results.items():
        lo, mid, hi = summary([r["rate"] for r in rs])
        base = results.get((app, "pandas-with-state"))
        ratio = f"{mid / statistics.median(r['rate'] for r in base):.2f}" if base else ""
        floor = results.get((app, "none"))
        state_us = (f"{statistics.median(r['us'] for r in rs) - statistics.median(r['us'] for r in floor):.1f}"
                    if floor and api != "none" else "")
        data = statistics.median(r["data_rate"] for r in rs)
        ticks = [r["tick_ms"] for r in rs if r["tick_ms"] is not None]
        rows.append([app, api, f"{lo:,.0f}", f"{mid:,.0f}", f"{hi:,.0f}", ratio, state_us, f"{data:,.0f}",
                     f"{statistics.median(ticks):.0f}" if ticks else "-"])
    print()
    print(f"{args.events:,} records per app in {args.batches} file batches, {args.partitions} state partitions, "
          f"local[2], {args.runs} runs; steady = batches 2..n; outputs equal the plain fold")
    print(table(["app", "api", "records/s min", "median", "max", "ratio to pandas-with-state (median)",
                 "state stage us/record (median, minus none)", "records/s in the data batches (median)",
                 "tick batch ms (median)"], rows))


if __name__ == "__main__":
    main()
