"""State of the temporal join per SKU over time: ``jobs.enriched_orders`` (events in event-time
order: the price in force and the grace period's events) beside the only exact version without
that order, which keeps every price version (issue 24: its state grows with the table's history).

    .venv/bin/python bench/join_state.py [--runs 3] [--events 200000] [--skus 60]

For each run (seed = run number) the app's own sample (``generate``) is folded in plain Python
(``check``'s fold) over the first 10%, 20%, ... of the records; after each, the serialized state
(``state_serde``, what the changelog and the state store hold) is measured in bytes per key. The
"every version" job joins each order with the latest price at or before its time from a list of
all versions, in input order (no buffer, no watermark), so its result depended on the batch cut;
it is here for its state only. Both folds also give their records/s.
"""

from __future__ import annotations

import argparse
import bisect
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import summary, table
from jobs.enriched_orders import ORDERS, PRICES, EnrichedOrders, generate
from streamops.job import Job
from streamops.state.lint import sample_records
from streamops.state.oracle import fold_input


class EveryVersion(Job):
    """The unordered temporal join: every price version kept, looked up by the order's time."""

    key_name = "sku"
    parse, key, timestamp = EnrichedOrders.parse, EnrichedOrders.key, EnrichedOrders.timestamp

    def initial(self, key: str) -> dict:
        return {"versions": [], "out": {}}

    def update(self, key: str, state: dict, events) -> dict:
        versions, out = list(state["versions"]), dict(state["out"])
        for e in events:
            if "price_cents" in e:
                bisect.insort(versions, [e["ts"], e["price_cents"]], key=lambda v: v[0])
            else:
                i = bisect.bisect_right(versions, e["ts"], key=lambda v: v[0])
                out[e["order_id"]] = None if i == 0 else versions[i - 1][1]
        return {"versions": versions, "out": out}

    def emit(self, key: str, state: dict) -> dict:
        return state["out"]

    def expire(self, key: str, state: dict) -> dict:
        return {**state, "out": {}}


def bytes_per_key(job_cls: type, states: dict[str, Any]) -> float:
    dumps = job_cls.state_serde.dumps
    return sum(len(dumps(s)) for s in states.values()) / max(1, len(states))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--skus", type=int, default=60)
    args = ap.parse_args()
    steps = [i / 10 for i in range(1, 11)]
    sizes: dict[tuple[str, float], list[float]] = {}
    rates: dict[str, list[float]] = {}
    for run in range(args.runs):
        records = sample_records(EnrichedOrders, [ORDERS, PRICES], 3, generate(args.events, seed=run, skus=args.skus))
        for name, job_cls in (("ordered (enriched_orders)", EnrichedOrders), ("every version", EveryVersion)):
            for share in steps:
                part = records[: int(len(records) * share)]
                t0 = time.perf_counter()
                folded = fold_input(job_cls, part)
                if share == 1.0:
                    rates.setdefault(name, []).append(len(part) / (time.perf_counter() - t0))
                sizes.setdefault((name, share), []).append(bytes_per_key(job_cls, folded.states))
        print(f"run {run + 1} done", flush=True)
    rows = []
    for share in steps:
        base = summary(sizes[("every version", share)])[1]
        for name in ("ordered (enriched_orders)", "every version"):
            lo, med, hi = summary(sizes[(name, share)])
            rows.append([f"{share:.0%}", name, f"{lo:,.0f}", f"{med:,.0f}", f"{hi:,.0f}", f"{med / base:.2f}"])
    print(f"\nstate bytes per SKU after a share of {args.events:,} records ({args.skus} SKUs, {args.runs} runs)\n")
    print(table(["input read", "join", "min", "median", "max", "ratio to every version (median)"], rows))
    base = summary(rates["every version"])[1]
    print("\nfold records/s over all the input\n")
    print(table(["join", "min", "median", "max", "ratio to every version (median)"],
                [[n, *(f"{v:,.0f}" for v in summary(r)), f"{summary(r)[1] / base:.2f}"] for n, r in rates.items()]))


if __name__ == "__main__":
    main()
