"""Resize and savepoint costs while events arrive at a steady rate.

    .venv/bin/python bench/resize.py [--strategies restart,live] [--runs 3] [--rate 2000] \
        [--savepoint-keys 100000] [--savepoint-runs 3] [--idle-runs 3] [--timeline]

One platform (broker, Spark standalone master with 2 workers, supervisor) in a temporary state
dir on free ports, stopped in ``finally``. The demo app is deployed at parallelism 1 while a
producer thread writes ``--rate`` events/s. For each strategy, each run resizes 1 -> 2 and back
2 -> 1 and reports, from the checkpoint's commit log (one file per committed batch, written when
the batch commits):

- ``pause``: the longest gap between consecutive batch commits from 5 s before the request until
  20 s after the resize converged (the first batches at the new size included: a new executor
  starts cold); the baseline row is the same measure over 30 s windows with no operation
  (batches take about a trigger interval here), and ``pause / baseline`` compares them;
- ``to new size``: request -> first batch committed at the new size (the operation's own wait).

After each live scale-out the driver's REST API tells which executors ran the stateful stages
(one task per state partition), to show the new executor really took state over.

``--timeline`` prints, after each resize, the batch commits, the driver's timed log lines and every
task of the stages since the request (executor, FAIR pool, locality level, seconds), in seconds from
the request: where a pause goes.

At the end the app is stopped and ``check`` compares state, changelog, output and DLQ with the
fold of every input event: ``lost`` / ``duplicated`` count keys missing or different, and DLQ
records missing or written twice (both must be 0).

Idle: once the producer has stopped and the app has caught up (no input, so the query runs no
batch), ``--idle-runs`` live resizes 1 -> 2 and 2 -> 1, ``SETTLE_S`` apart, each report request -> converged, beside
the same resize under load (the ``to new size`` median of the live rows) as the baseline.

Savepoints: the state is grown to ``--savepoint-keys`` users first, then savepoints are taken
while the app keeps running at the same rate; reported: savepoint time and the longest gap
between batch commits while it ran.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import isolated_settings, summary, table
from jobs.demo import contract as c
from streamops.checkpoints import layout
from streamops.platform import manager
from streamops.settings import Settings


def commit_times(ckpt: Path) -> list[tuple[int, float]]:
    """(batch id, commit time) for every committed batch, from the commit log files' mtimes."""
    out = []
    for f in (ckpt / "commits").iterdir():
        if f.name.isdigit():
            out.append((int(f.name), f.stat().st_mtime))
    return sorted(out)


def longest_gap(ckpt: Path, start: float, end: float) -> float:
    """Longest time without a batch commit inside [start, end] (edges count as commits)."""
    times = [start] + [t for _b, t in commit_times(ckpt) if start < t < end] + [end]
    return max(b - a for a, b in itertools.pairwise(times))


SETTLE_S = 20.0  # measured after the resize converged: the first batches at the new size
BASELINE_S = 30.0  # about as long as a resize window (5 s before + the resize + SETTLE_S)


def _driver_ui(settings: Settings, spec) -> tuple[str, str] | None:
    import json

    from streamops.app.dir import AppDir

    try:
        hb = json.loads(AppDir.of(settings, spec.name).heartbeat.read_text())
        return hb["ui_url"], hb["app_id"]
    except (FileNotFoundError, ValueError, KeyError):
        return None


def _last_stage(settings: Settings, spec) -> int:
    from streamops.spark import ui

    where = _driver_ui(settings, spec)
    return ui.last_stage(*where) if where else -1


def _stateful_executors(settings: Settings, spec, after_stage: int) -> list[list[str]]:
    """Executor ids of each stateful stage (one task per state partition) since ``after_stage``."""
    from streamops.spark import ui

    where = _driver_ui(settings, spec)
    if where is None:
        return []
    stages = ui.stage_executors(*where, num_tasks=spec.state_partitions, after_stage=after_stage)
    return [sorted(ex) for _sid, ex in sorted(stages.items())]


def _warmup_tasks(settings: Settings, spec, after_stage: int) -> dict[str, tuple[int, float]]:
    """Where the warm-up's tasks ran since ``after_stage`` (the old executor should run few)."""
    from streamops.spark import ui, warmup_plugin

    where = _driver_ui(settings, spec)
    return ui.pool_tasks(*where, {warmup_plugin.POOL}, after_stage) if where else {}


def log_time(line: str) -> float | None:
    """The epoch seconds a driver log line starts with (ours: ``2026-12-07 17:31:02,123``, Spark's:
    ``26/12/07 17:31:02``; both in the machine's zone, UTC here), None for a line without one."""
    import datetime as dt

    try:
        stamp = (dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f") if line[:2] == "20"
                 else dt.datetime.strptime(line[:17], "%y/%m/%d %H:%M:%S"))
    except ValueError:
        return None
    return stamp.astimezone().timestamp()


def task_row(stage: dict, task: dict) -> tuple[float, str]:
    """One task of Spark's REST API (``stages/ID/ATTEMPT/taskList``) as (launch epoch s, line)."""
    import datetime as dt

    launched = dt.datetime.strptime(task["launchTime"][:23], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=dt.UTC)
    line = (f"task {stage['stageId']}.{task['index']} on executor {task.get('executorId')} "
            f"({stage.get('schedulingPool')}, {task.get('taskLocality')}) {task.get('duration', 0) / 1000:.2f} s: "
            f"{stage['name'][:60]}")
    return launched.timestamp(), line


def timeline(t0: float, commits: list[tuple[int, float]], log_lines: list[str],
             tasks: list[tuple[float, str]], before: float = 5.0) -> list[tuple[float, str]]:
    """Batch commits, timed log lines and tasks from ``before`` s before ``t0`` on, in seconds
    from ``t0``, in time order."""
    rows = [(t, f"batch {b} committed") for b, t in commits]
    rows += [(at, line[:200]) for line in log_lines if (at := log_time(line)) is not None]
    rows += tasks
    return sorted((round(t - t0, 2), what) for t, what in rows if t > t0 - before)


def _print_timeline(settings: Settings, spec, ckpt: Path, t0: float, after_stage: int) -> None:
    """``--timeline``: what happened around a resize requested at ``t0`` (the tasks of the stages
    after ``after_stage``, from the driver's REST API)."""
    from streamops.app.dir import AppDir
    from streamops.spark import ui

    where = _driver_ui(settings, spec)
    tasks = [task_row(st, t) for st, t in ui.stage_tasks(*where, after_stage)] if where else []
    lines = AppDir.of(settings, spec.name).log.read_text(errors="replace").splitlines()
    for at, what in timeline(t0, commit_times(ckpt), lines, tasks):
        print(f"  {at:+7.2f} {what}", flush=True)


class Feeder(threading.Thread):
    """Writes events at a steady rate until stopped; counts what it wrote."""

    def __init__(self, settings: Settings, rate: float, users: int, partitions: int) -> None:
        super().__init__(daemon=True)
        self.settings, self.rate, self.users, self.partitions = settings, rate, users, partitions
        self.stop_flag = threading.Event()
        self.sent = 0

    def run(self) -> None:
        from jobs.demo.generator import generate_records
        from streamops.kafka.produce import produce

        def records():  # one producer for the whole run; a new seed per second of events
            seed = 1000
            while not self.stop_flag.is_set():
                for r in generate_records(int(self.rate), self.users, seed=seed, bad_ratio=0.01):
                    yield r.key, r.value
                    self.sent += 1
                seed += 1

        produce(self.settings.kafka_bootstrap, c.INPUT_TOPIC, records(), partitions=self.partitions, rate=self.rate)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--strategies", default="restart,live")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=float, default=2000.0, help="events per second while resizing")
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--savepoint-keys", type=int, default=100_000)
    ap.add_argument("--savepoint-runs", type=int, default=3)
    ap.add_argument("--timeline", action="store_true",
                    help="after each resize: batch commits, the driver's log lines and the tasks since the "
                         "request, in seconds from it")
    ap.add_argument("--idle-runs", type=int, default=3, help="live resizes each way with no input arriving")
    args = ap.parse_args(argv)
    strategies = [s for s in args.strategies.split(",") if s]

    from streamops.app.checkpoint import checkpoint_dir
    from streamops.app.context import AppContext
    from streamops.kafka.security import kafka_config
    from streamops.ledger import Ledger
    from streamops.lifecycle import operations as ops
    from streamops.lifecycle.savepoints import take
    from streamops.spec import default_spec_path, get_app, load_specs
    from streamops.state.check import run_check

    home = Path(tempfile.mkdtemp(prefix="bench-resize-"))
    settings = isolated_settings(home)
    spec = get_app(load_specs(default_spec_path(REPO)), c.APP)
    ckpt = checkpoint_dir(settings, spec)
    interval = spec.trigger_seconds
    sp_rows, sp_baseline = [], []
    idle: dict[str, list[float]] = {}
    try:
        print(f"starting broker, Spark (2 workers) and the supervisor in {home} ...", flush=True)
        manager.up(settings, only=["kafka", "spark", "supervisor"])
        import os

        os.environ.update(settings.env())
        ledger = Ledger.open(settings.ledger_db_url)
        ctx = AppContext(settings, spec, ledger, kafka_config(settings, spec))
        from streamops.kafka.admin import TopicSpec, ensure_topics

        ensure_topics(settings.kafka_bootstrap, [TopicSpec(name=c.INPUT_TOPIC, partitions=spec.input_partitions)])
        feeder = Feeder(settings, args.rate, args.users, spec.input_partitions)
        feeder.start()
        out = ops.deploy(ctx, parallelism=1, timeout=600)
        print(f"deployed x1 in {out.seconds} s", flush=True)
        time.sleep(10)
        baseline = []
        for run in range(1, args.runs + 1):  # the same measure with no operation: the baseline
            t0 = time.time()
            time.sleep(BASELINE_S)
            baseline.append(longest_gap(ckpt, t0, time.time()))
            print(f"baseline run {run}: longest gap {baseline[-1]:.1f} s over {BASELINE_S:.0f} s", flush=True)
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        spread: list[str] = []
        for strategy in strategies:
            for run in range(1, args.runs + 1):
                for n in (2, 1):
                    first_stage = _last_stage(settings, spec)
                    t0 = time.time()
                    res = ops.resize(ctx, parallelism=n, strategy=strategy, timeout=600)
                    t1 = time.time()
                    time.sleep(SETTLE_S)  # the first batches at the new size count too (cold executors)
                    pause = longest_gap(ckpt, t0 - 5, time.time())
                    results.setdefault((strategy, f"{3 - n}->{n}"), []).append((pause, res.seconds))
                    print(f"{strategy} run {run} {3 - n}->{n}: pause {pause:.1f} s, to new size {res.seconds} s",
                          flush=True)
                    if args.timeline:
                        _print_timeline(settings, spec, ckpt, t0, first_stage)
                    if strategy == "live" and n == 2:
                        used = _stateful_executors(settings, spec, first_stage)
                        spread.append(f"run {run}: {used}")
                        print(f"  stateful stages after the scale-out ran on executors {used}", flush=True)
                        print(f"  warm-up tasks by executor (tasks, seconds): {_warmup_tasks(settings, spec, first_stage)}",
                              flush=True)
        # savepoints on a state of --savepoint-keys users
        if args.savepoint_runs:
            from jobs.demo.generator import generate_records
            from streamops.kafka.produce import produce

            print(f"growing the state to {args.savepoint_keys} keys ...", flush=True)
            from streamops.kafka.admin import end_offsets

            # 6 events per key: all but ~0.25% of the keys get at least one
            produce(settings.kafka_bootstrap, c.INPUT_TOPIC,
                    ((r.key, r.value) for r in generate_records(args.savepoint_keys * 6, args.savepoint_keys,
                                                               seed=7, bad_ratio=0.0)),
                    partitions=spec.input_partitions)
            target = {p: hi for p, (_lo, hi) in end_offsets(settings.kafka_bootstrap, c.INPUT_TOPIC).items()}
            deadline = time.time() + 900
            while any(layout.committed_offsets(ckpt).get(c.INPUT_TOPIC, {}).get(p, 0) < hi for p, hi in target.items()):
                if time.time() > deadline:
                    raise SystemExit("the app did not catch up with the state-growing events in 900 s")
                time.sleep(2)
            time.sleep(3 * interval)
            for _run in range(args.savepoint_runs):  # baseline: same window, no savepoint
                t0 = time.time()
                time.sleep(2 * interval + 0.5)  # as long as a savepoint window (+-1 trigger around it)
                sp_baseline.append(longest_gap(ckpt, t0, time.time()))
            print(f"baseline at {args.savepoint_keys} keys: longest gaps {sp_baseline}", flush=True)
            for run in range(1, args.savepoint_runs + 1):
                t0 = time.time()
                sp = take(AppContext(settings, spec, ledger, kafka_config(settings, spec)))
                t1 = time.time()
                time.sleep(2 * interval)
                gap = longest_gap(ckpt, t0 - interval, t1 + interval)
                sp_rows.append((sp.seconds, gap, sp.bytes, sp.files))
                print(f"savepoint run {run}: {sp.seconds} s, {sp.files} files, {sp.bytes} bytes, "
                      f"longest batch gap {gap:.1f} s", flush=True)
        feeder.stop_flag.set()
        feeder.join()
        if args.idle_runs:
            from streamops.kafka.admin import end_offsets

            target = {p: hi for p, (_lo, hi) in end_offsets(settings.kafka_bootstrap, c.INPUT_TOPIC).items()}
            while any(layout.committed_offsets(ckpt).get(c.INPUT_TOPIC, {}).get(p, 0) < hi for p, hi in target.items()):
                time.sleep(1)
            time.sleep(2 * interval)
            idle_batch = layout.last_committed_batch(ckpt)
            for run in range(1, args.idle_runs + 1):
                for n in (2, 1):
                    t0 = time.time()
                    ops.resize(ctx, parallelism=n, strategy="live", timeout=600)
                    idle.setdefault(f"{3 - n}->{n}", []).append(time.time() - t0)
                    print(f"idle live run {run} {3 - n}->{n}: converged in {idle[f'{3 - n}->{n}'][-1]:.1f} s",
                          flush=True)
                    # apart, as scale windows are: a scale-in right after an idle scale-out waits
                    # for the new executor's warm-up tasks (Spark kills no busy executor)
                    time.sleep(SETTLE_S)
            if layout.last_committed_batch(ckpt) != idle_batch:
                print("note: a batch ran during the idle resizes", flush=True)
        ops.stop(ctx, timeout=300)
        report = run_check(spec, settings, ctx.kafka)
        lost = sum(d.summary()["missing"] for d in report.diffs)
        dup = sum(d.summary()["different"] + d.summary()["extra"] + d.summary()["duplicates"] for d in report.diffs)
        ledger.close()
    finally:
        manager.down(settings)

    print()
    print(f"Resize while {args.rate:.0f} events/s arrive (trigger {interval:.0f} s, {args.runs} runs per row); "
          f"check after all resizes: {'exact' if report.ok else 'MISMATCH'} over {report.input_records} events, "
          f"lost {lost}, duplicated/different {dup}")
    print()
    bmed = statistics.median(baseline)
    bmin, _b, bmax = summary(baseline)
    trows = [["(none: baseline)", "-", f"{bmin:.1f} / {bmed:.1f} / {bmax:.1f}", "1.0", f"{bmed / interval:.1f}", "-"]]
    for (strategy, change), vals in results.items():
        pauses = [p for p, _s in vals]
        news = [s for _p, s in vals]
        pmin, pmed, pmax = summary(pauses)
        smin, smed, smax = summary(news)
        trows.append([strategy, change, f"{pmin:.1f} / {pmed:.1f} / {pmax:.1f}", f"{pmed / bmed:.1f}",
                      f"{pmed / interval:.1f}", f"{smin:.1f} / {smed:.1f} / {smax:.1f}"])
    print(table(["strategy", "change", "pause s (min/median/max)", "pause / baseline", "pause / trigger",
                 "to new size s (min/median/max)"], trows))
    if idle:
        print()
        rows = []
        for change, vals in idle.items():
            loaded = results.get(("live", change))
            base = statistics.median([sec for _p, sec in loaded]) if loaded else None
            rows.append([change, "{:.1f} / {:.1f} / {:.1f}".format(*summary(vals)),
                         f"{base:.1f}" if base else "-",
                         f"{statistics.median(vals) / base:.2f}" if base else "-"])
        print(f"Idle live resize (no input arriving, {args.idle_runs} runs each): request -> converged")
        print(table(["change", "idle s (min/median/max)", "under load s (median)", "idle / under load"], rows))
    if spread:
        print()
        print("Executors that ran the stateful stages after each live scale-out: " + "; ".join(spread))
    if sp_rows:
        print()
        secs = [r[0] for r in sp_rows]
        gaps = [r[1] for r in sp_rows]
        print(table(["savepoint of", "time s (min/median/max)", "longest batch gap s (min/median/max)",
                     "baseline gap s (min/median/max)", "gap / baseline", "gap / trigger", "size", "files"],
                    [[f"{args.savepoint_keys} keys", "{:.2f} / {:.2f} / {:.2f}".format(*summary(secs)),
                      "{:.1f} / {:.1f} / {:.1f}".format(*summary(gaps)),
                      "{:.1f} / {:.1f} / {:.1f}".format(*summary(sp_baseline)),
                      f"{statistics.median(gaps) / statistics.median(sp_baseline):.1f}",
                      f"{statistics.median(gaps) / interval:.1f}",
                      f"{sp_rows[-1][2] / 2**20:.1f} MiB", sp_rows[-1][3]]]))
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
