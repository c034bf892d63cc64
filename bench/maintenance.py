"""State maintenance costs: compaction (bytes and restore time before/after), rebuild-state from
the changelog, and verification, each against a baseline measured in the same run.

    .venv/bin/python bench/maintenance.py [--keys 100000,1000000] [--runs 3] \
        [--chain-events 40000] [--chain-users 20000] [--chain-runs 4] [--batch 800]

One broker in a temporary state dir on free ports (stopped in ``finally``); Spark in local mode.

compaction: the demo app runs ``--chain-runs`` times over ``--chain-events`` events in batches of
``--batch`` records (every run reloads the stores, so the changelog chain grows), then, ``--runs``
times on a fresh copy of that checkpoint, ``compact`` reports checkpoint bytes and the state
restore time (every partition loaded at the last batch) before (the baseline) and after.

rebuild / verify at K keys: K consistent profiles are produced to the changelog and output
topics plus a batch marker (input empty), then ``rebuild-state --from-changelog`` builds the
checkpoint and ``verify`` compares state, changelog and output and runs the quality suite. The
baseline is reading the changelog alone (``latest_per_key``: the I/O floor of both).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import isolated_settings, summary, table
from jobs.demo import contract as c
from streamops.platform import manager


def _fmt(values: list[float], digits: int = 2) -> str:
    lo, med, hi = summary(values)
    return f"{lo:,.{digits}f} / {med:,.{digits}f} / {hi:,.{digits}f}"


def build_chain(settings, args) -> None:
    from jobs.demo.generator import generate_records
    from streamops.kafka.produce import produce

    env = {**os.environ, **settings.env(), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": settings.host}
    per_run = args.chain_events // args.chain_runs
    for i in range(args.chain_runs):
        produce(settings.kafka_bootstrap, c.INPUT_TOPIC,
                ((r.key, r.value) for r in generate_records(per_run, args.chain_users, seed=100 + i, bad_ratio=0.01)),
                partitions=6)
        t0 = time.time()
        subprocess.run([sys.executable, "-m", "streamops.spark.driver", "--app", "user_activity", "--master", "local[2]",
                        "--exit-at-end", "--max-offsets-per-trigger", str(args.batch), "--trigger-interval",
                        "0 seconds"], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"  chain run {i + 1}/{args.chain_runs}: {per_run} events in {time.time() - t0:.0f} s", flush=True)


def bench_compaction(settings, spec, ledger, spark, args) -> list[list[str]]:
    from streamops.app.checkpoint import checkpoint_dir
    from streamops.app.context import AppContext
    from streamops.checkpoints import compact as cc
    from streamops.checkpoints import layout
    from streamops.kafka.security import kafka_config
    from streamops.lifecycle.maintenance import compact, restore_seconds

    ckpt = checkpoint_dir(settings, spec)
    print(f"building a long changelog chain ({args.chain_runs} runs, {args.chain_events} events, batches of "
          f"{args.batch}) ...", flush=True)
    build_chain(settings, args)
    pristine = ckpt.with_name(ckpt.name + ".pristine")
    shutil.copytree(ckpt, pristine)
    batch = layout.last_committed_batch(ckpt)
    chains = [n for _s, n in (ps.chain(batch + 1) for ps in cc.partitions(ckpt).values())]
    from streamops.spec import load_job

    restore_seconds(spark, load_job(spec, settings.repo), ckpt, batch)  # JVM warm-up: not counted
    rows = {"bytes": ([], []), "restore s": ([], []), "changelogs replayed (max per partition)": ([], [])}
    took = []
    for run in range(1, args.runs + 1):
        shutil.rmtree(ckpt)
        shutil.copytree(pristine, ckpt)
        out = compact(AppContext(settings, spec, ledger, kafka_config(settings, spec)), spark=spark)
        after = [n for _s, n in (ps.chain(batch + 1) for ps in cc.partitions(ckpt).values())]
        rows["bytes"][0].append(out.bytes_before)
        rows["bytes"][1].append(out.bytes_after)
        rows["restore s"][0].append(out.restore_seconds_before)
        rows["restore s"][1].append(out.restore_seconds_after)
        rows["changelogs replayed (max per partition)"][0].append(max(chains))
        rows["changelogs replayed (max per partition)"][1].append(max(after))
        took.append(out.seconds)
        print(f"compaction run {run}: {out.bytes_before} -> {out.bytes_after} bytes, restore "
              f"{out.restore_seconds_before} -> {out.restore_seconds_after} s, took {out.seconds} s", flush=True)
    out_rows = []
    for name, (before, after) in rows.items():
        digits = 0 if name != "restore s" else 2
        ratio = summary(after)[1] / summary(before)[1] if summary(before)[1] else float("nan")
        out_rows.append([name, _fmt(before, digits), _fmt(after, digits), f"{ratio:.2f}"])
    out_rows.append(["compaction took s", "-", _fmt(took, 1), "-"])
    print(f"  state: batch {batch}, {len(chains)} partitions, chains before {chains}", flush=True)
    return out_rows


def synthesize(settings, spec, keys: int) -> None:
    """``keys`` consistent states on the changelog, their profiles on the output, and a batch marker."""
    from jobs.user_activity import UserActivity
    from streamops.app.topics import ensure_app_topics
    from streamops.job import JsonSerde
    from streamops.kafka.produce import produce
    from streamops.kafka.security import kafka_config

    manager.down(settings, only=["kafka"])  # a clean broker per size: nothing left of the last one
    shutil.rmtree(settings.state_dir / "kafka", ignore_errors=True)
    manager.up(settings, only=["kafka"])
    ensure_app_topics(kafka_config(settings, spec), spec)

    js, job = JsonSerde(), UserActivity()

    def records(output: bool):
        for i in range(keys):
            key = f"user-{i:07d}"
            s = {"last_login_ts": 1_700_000_000_000 + i if i % 3 else None, "purchases": i % 7,
                 "total_cents": (i % 7) * 1234, "events": 1 + i % 7 + (i % 3 > 0)}
            yield key.encode(), js.dumps(job.emit(key, s)[key] if output else s)

    produce(settings.kafka_bootstrap, spec.changelog_topic, records(False), partitions=spec.input_partitions)
    produce(settings.kafka_bootstrap, spec.live_output_topic, records(True), partitions=spec.input_partitions)
    _marker(settings, spec, 7)


def _marker(settings, spec, batch_id: int) -> None:
    from streamops.kafka.security import kafka_config
    from streamops.spark.commit import BatchCommitter

    committer = BatchCommitter(kafka_config(settings, spec), spec.name, spec.commits_topic)
    try:
        committer.commit(batch_id, [], input_end={t: {str(p): 0 for p in range(spec.input_partitions)}
                                                 for t in spec.input_topics})
    finally:
        committer.close()


def bench_keys(settings, spec, ledger, spark, keys: int, runs: int) -> dict[str, list[float]]:
    from streamops.app.checkpoint import checkpoint_dir
    from streamops.app.context import AppContext
    from streamops.kafka.read import latest_per_key
    from streamops.kafka.security import kafka_config
    from streamops.lifecycle.maintenance import rebuild_state
    from streamops.state.verify.run import verify

    print(f"synthesizing {keys} keys ...", flush=True)
    synthesize(settings, spec, keys)
    res: dict[str, list[float]] = {"read changelog (baseline)": [], "rebuild-state": [], "verify": []}
    for run in range(1, runs + 1):
        if run > 1:  # the last rebuild left a rewind marker: a batch "commits" again, as the app would
            _marker(settings, spec, 100 + run)
        t0 = time.monotonic()
        n = len(latest_per_key(settings.kafka_bootstrap, spec.changelog_topic, decode=lambda v: v))
        res["read changelog (baseline)"].append(n / (time.monotonic() - t0))
        shutil.rmtree(checkpoint_dir(settings, spec), ignore_errors=True)
        t0 = time.monotonic()
        out = rebuild_state(AppContext(settings, spec, ledger, kafka_config(settings, spec)), spark=spark)
        res["rebuild-state"].append(out.changelog_keys / (time.monotonic() - t0))
        t0 = time.monotonic()
        report = verify(spec, settings, kafka_config(settings, spec), ledger=ledger, spark=spark)
        secs = time.monotonic() - t0
        res["verify"].append(keys / secs)
        ok = report.to_dict()["ok"]
        print(f"  {keys} keys run {run}: baseline {res['read changelog (baseline)'][-1]:,.0f} keys/s, rebuild "
              f"{res['rebuild-state'][-1]:,.0f} keys/s, verify {secs:.1f} s ({'ok' if ok else 'NOT OK'})", flush=True)
        if not ok:
            raise SystemExit(f"verify failed on synthesized consistent data: {json.dumps(report.to_dict())[:2000]}")
    return res


def _print_compaction(rows: list[list[str]], args) -> None:
    print()
    print(f"Compaction of a long changelog chain ({args.runs} runs on copies of one checkpoint):")
    print(table(["measure", "before (baseline) min / median / max", "after min / median / max",
                 "after / before (median)"], rows), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", default="100000,1000000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--chain-events", type=int, default=40_000)
    ap.add_argument("--chain-users", type=int, default=20_000)
    ap.add_argument("--chain-runs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=800)
    ap.add_argument("--skip-compaction", action="store_true")
    args = ap.parse_args(argv)

    from streamops.app.topics import ensure_app_topics
    from streamops.kafka.security import kafka_config
    from streamops.ledger import Ledger
    from streamops.spec import default_spec_path, get_app, load_specs
    from streamops.state.seed import seed_session

    home = Path(tempfile.mkdtemp(prefix="bench-maint-"))
    settings = isolated_settings(home)
    spec = get_app(load_specs(default_spec_path(REPO)), c.APP)
    comp_rows, key_rows = [], []
    spark = None
    try:
        print(f"starting a broker in {home} ...", flush=True)
        manager.up(settings, only=["kafka"])
        os.environ.update(settings.env())
        ledger = Ledger.open(settings.ledger_db_url)
        ensure_app_topics(kafka_config(settings, spec), spec)
        spark = seed_session(settings, name="bench-maintenance")
        if not args.skip_compaction:
            comp_rows = bench_compaction(settings, spec, ledger, spark, args)
            _print_compaction(comp_rows, args)
        for keys in [int(k) for k in args.keys.split(",") if k]:
            res = bench_keys(settings, spec, ledger, spark, keys, args.runs)
            base = summary(res["read changelog (baseline)"])[1]
            for name, vals in res.items():
                key_rows.append([f"{keys:,}", name, _fmt(vals, 0), f"{summary(vals)[1] / base:.2f}",
                                 f"{keys / summary(vals)[1]:.1f}"])
        ledger.close()
    finally:
        if spark is not None:
            spark.stop()
        manager.down(settings)
    if comp_rows:
        _print_compaction(comp_rows, args)
    print()
    print(f"Rebuild-state and verify ({args.runs} runs per size):")
    print(table(["keys", "step", "keys/s min / median / max", "ratio to baseline (median)", "seconds (median)"],
                key_rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
