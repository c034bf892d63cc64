"""The same backlog at parallelism 1 and 2 on the Spark standalone cluster: records/s per executor,
and the driver's CPU per batch and per million records (issue 39, item 6).

    .venv/bin/python bench/scaling.py [--parallelism 1,2] [--runs 2] [--events 300000] \
        [--batch 50000] [--users 10000] [--partitions 6] [--app user_activity] [--commit-on driver,executors]

For each run and parallelism (alternating the order per run), a fresh platform in a temporary
state dir on free ports (the broker, a Spark standalone master and its 2 workers; stopped in
``finally``), ``--events`` records of the app's own generator (seed = run number, the same for
every parallelism of a run), then ``python -m streamops.spark.driver --app APP --master spark://...
--parallelism N --exit-at-end --max-offsets-per-trigger B --trigger-interval "0 seconds"``: the
deployed driver on the standalone master with N one-core executors, to the end of that input.

While the driver runs, every ``SAMPLE_S`` the bench reads the CPU time (user + system) of the
driver's processes (its Python process and its JVM) and of the executors (the workers'
``CoarseGrainedExecutorBackend`` JVMs and their Python workers) from ``/proc``. From the driver's progress lines
(``batches.jsonl``):

- ``records/s``: all batches (first batch's start to last one's end) and steady (batches 2..n:
  the first also starts executors' Python workers and state stores); ``per executor`` = steady / N;
- ``driver CPU``: CPU-seconds of the driver's processes over the steady batches, per batch and per
  million records, split into its Python process (the sink: encode, transaction, reports) and its
  JVM (planning, the offsets and commit logs, the tasks' results); ``executor CPU`` per million
  records (all executors: their JVMs and their Python workers), and the broker's per million records.

With ``--commit-on driver,executors`` this tree runs once per value (the spec's ``commit_on``) at each
parallelism. Ratios are to the first side's median (the first revision at parallelism 1). This machine has 2 cores for the broker, the driver and the
executors together: a second executor can only use what the rest leaves.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import baseline_tree, isolated_settings, summary, table
from streamops.platform import manager
from streamops.settings import Settings

SAMPLE_S = 0.2
CLK_TCK = os.sysconf("SC_CLK_TCK")
EXECUTOR_MAIN = "CoarseGrainedExecutorBackend"
BROKER_MAIN = "kafka.Kafka "  # the broker's main class on its command line


# -- /proc ------------------------------------------------------------------------------------------------
def proc_cpu(stat: str) -> float:
    """CPU-seconds (utime + stime) from the text of ``/proc/PID/stat`` (the command may hold spaces
    and parentheses: fields are counted after its closing one)."""
    rest = stat[stat.rindex(")") + 2:].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK  # fields 14 and 15 of proc(5)


def proc_ppid(stat: str) -> int:
    return int(stat[stat.rindex(")") + 2:].split()[1])


def processes() -> dict[int, tuple[int, float, str]]:
    """pid -> (ppid, CPU-seconds, command line) of every process readable now."""
    out: dict[int, tuple[int, float, str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            cmd = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # exited meanwhile
        out[int(entry.name)] = (proc_ppid(stat), proc_cpu(stat), cmd)
    return out


def descendants(procs: dict[int, tuple[int, float, str]], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _cpu, _cmd) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@dataclass(frozen=True)
class CpuSample:
    at: float  # wall clock, s
    driver_py: float  # CPU-seconds so far of the driver's Python process
    driver_jvm: float  # ... of its descendants (the JVM spark-submit starts)
    executors: float  # ... of the executors' JVMs and their Python workers
    executors_py: float = 0.0  # ... of which their Python workers
    broker: float = 0.0  # ... of the broker(s) (``kafka.Kafka``; the bench's own: nothing else should run)


@dataclass
class CpuSampler:
    """Samples the CPU of a driver's process tree and of the executors every ``SAMPLE_S`` in a thread.
    A process that exited keeps the last CPU time read from it."""

    driver_pid: int
    samples: list[CpuSample] = field(default_factory=list)
    _last: dict[int, float] = field(default_factory=dict)  # pid -> its CPU when last read
    _kinds: dict[int, str] = field(default_factory=dict)  # pid -> "py", "jvm" or "exec"
    _stop: threading.Event = field(default_factory=threading.Event)

    def sample(self) -> CpuSample:
        procs = processes()
        jvm = descendants(procs, self.driver_pid)
        execs = {pid for pid, (_pp, _c, cmd) in procs.items() if EXECUTOR_MAIN in cmd}
        workers = {child for pid in execs for child in descendants(procs, pid)}  # their Python workers
        brokers = {pid for pid, (_pp, _c, cmd) in procs.items() if BROKER_MAIN in cmd}
        for pid in {self.driver_pid, *jvm, *execs, *workers, *brokers}:
            if pid in procs:
                self._last[pid] = procs[pid][1]
        self._kinds.update({self.driver_pid: "py", **{p: "jvm" for p in jvm}, **{p: "exec" for p in execs},
                            **{p: "exec_py" for p in workers}, **{p: "broker" for p in brokers}})
        total = {"py": 0.0, "jvm": 0.0, "exec": 0.0, "exec_py": 0.0, "broker": 0.0}
        for pid, cpu in self._last.items():
            total[self._kinds[pid]] += cpu
        s = CpuSample(time.time(), total["py"], total["jvm"], total["exec"] + total["exec_py"], total["exec_py"],
                      total["broker"])
        self.samples.append(s)
        return s

    def run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(SAMPLE_S)

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self.run, name="cpu-sampler", daemon=True)
        t.start()
        return t

    def stop(self) -> None:
        self._stop.set()


def cpu_at(samples: list[CpuSample], at: float) -> CpuSample:
    """The CPU so far at wall time ``at``, linear between the two samples around it."""
    if not samples:
        raise ValueError("no CPU samples")
    if at <= samples[0].at:
        return samples[0]
    for a, b in itertools.pairwise(samples):
        if a.at <= at <= b.at:
            f = 0.0 if b.at == a.at else (at - a.at) / (b.at - a.at)
            return CpuSample(at, *(x + f * (y - x) for x, y in zip(dataclasses.astuple(a)[1:],
                                                                   dataclasses.astuple(b)[1:])))
    return samples[-1]


# -- one side ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Side:
    parallelism: int
    records: int
    batches: int  # with input
    rate: float  # all batches
    steady_rate: float  # batches 2..n
    steady_records: int
    steady_batches: int
    driver_py_cpu: float  # CPU-seconds over the steady batches
    driver_jvm_cpu: float
    executor_cpu: float
    executor_py_cpu: float = 0.0  # of executor_cpu: the executors' Python workers
    broker_cpu: float = 0.0

    @property
    def per_executor(self) -> float:
        return self.steady_rate / self.parallelism

    def per_batch(self, cpu: float) -> float:
        return cpu / self.steady_batches if self.steady_batches else 0.0

    def per_million(self, cpu: float) -> float:
        return cpu / self.steady_records * 1e6 if self.steady_records else 0.0


def _ms(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp() * 1000


def side_of(parallelism: int, progress: list[dict], samples: list[CpuSample]) -> Side:
    """A side's rates and CPU from its progress lines (batches with input) and CPU samples."""
    bs = [b for b in progress if b.get("input_rows", 0) > 0]
    if len(bs) < 2:
        raise SystemExit(f"parallelism {parallelism}: {len(bs)} batch(es) with input; raise --events or lower --batch")
    start = _ms(bs[0]["timestamp"])
    ends = [_ms(b["timestamp"]) + b["duration_ms"]["triggerExecution"] for b in bs]
    rest = bs[1:]
    steady_start = _ms(rest[0]["timestamp"])
    steady_records = sum(b["input_rows"] for b in rest)
    a, z = cpu_at(samples, steady_start / 1000), cpu_at(samples, max(ends) / 1000)
    return Side(parallelism, sum(b["input_rows"] for b in bs), len(bs),
                rate=sum(b["input_rows"] for b in bs) / ((max(ends) - start) / 1000),
                steady_rate=steady_records / ((max(ends) - steady_start) / 1000),
                steady_records=steady_records, steady_batches=len(rest),
                driver_py_cpu=z.driver_py - a.driver_py, driver_jvm_cpu=z.driver_jvm - a.driver_jvm,
                executor_cpu=z.executors - a.executors, executor_py_cpu=z.executors_py - a.executors_py,
                broker_cpu=z.broker - a.broker)


def produce_input(settings: Settings, spec, events: int, partitions: int, seed: int) -> None:
    from streamops.kafka.admin import TopicSpec, ensure_topics
    from streamops.kafka.produce import produce
    from streamops.spec import load_job

    job = load_job(spec, settings.repo)()
    topic = spec.input_topics[0]
    ensure_topics(settings.kafka_bootstrap, [TopicSpec(name=topic, partitions=partitions)])
    produce(settings.kafka_bootstrap, topic, job.generate(events, seed), partitions=partitions)


def run_side(home: Path, spec, parallelism: int, events: int, batch: int, partitions: int, seed: int,
             checkout: Path | None = None, commit_on: str | None = None) -> Side:
    """One side on a fresh platform; ``checkout``: another revision's tree, run with this venv (the
    baseline); ``commit_on``: where this tree's driver commits (the spec's ``commit_on``)."""
    settings = isolated_settings(home)
    try:
        manager.up(settings, only=["kafka", "spark"])
        produce_input(settings, spec, events, partitions, seed)
        env = {**os.environ, **settings.env(), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": settings.host}
        if checkout is not None:
            env.update({"PYTHONPATH": str(checkout), "STREAMOPS_REPO": str(checkout)})
        log = settings.state_dir / "bench-driver.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "streamops.spark.driver", "--app", spec.name, "--master",
                 settings.spark_master_url, "--parallelism", str(parallelism), "--exit-at-end",
                 "--max-offsets-per-trigger", str(batch), "--trigger-interval", "0 seconds",
                 *(["--commit-on", commit_on] if commit_on else [])],
                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=checkout or settings.state_dir)
            sampler = CpuSampler(proc.pid)
            sampler.start()
            try:
                rc = proc.wait(timeout=1800)
            finally:
                sampler.stop()
                if proc.poll() is None:
                    proc.kill()
        if rc != 0:
            raise SystemExit(f"driver exited {rc}; log: {log}\n" + log.read_text()[-3000:])
        path = settings.state_dir / "apps" / spec.name / "batches.jsonl"
        progress = [json.loads(line) for line in path.read_text().splitlines()]
        return side_of(parallelism, progress, sampler.samples)
    finally:
        manager.down(settings)


# -- the tables -----------------------------------------------------------------------------------------
def report(sides: dict[tuple[str, int], list[Side]]) -> str:
    """One row per metric and side (revision, parallelism); ratios to the first side."""
    base = sides[next(iter(sides))]
    base_rate = statistics.median(s.steady_rate for s in base)
    rows = []
    metrics = [
        ("records/s, all batches", lambda s: s.rate, "{:,.0f}"),
        ("records/s, steady (batches 2..n)", lambda s: s.steady_rate, "{:,.0f}"),
        ("records/s per executor, steady", lambda s: s.per_executor, "{:,.0f}"),
        ("records per batch, steady", lambda s: s.steady_records / s.steady_batches, "{:,.0f}"),
        ("driver CPU s per batch: Python", lambda s: s.per_batch(s.driver_py_cpu), "{:.3f}"),
        ("driver CPU s per batch: JVM", lambda s: s.per_batch(s.driver_jvm_cpu), "{:.3f}"),
        ("driver CPU s per million records", lambda s: s.per_million(s.driver_py_cpu + s.driver_jvm_cpu), "{:.2f}"),
        ("executor CPU s per million records", lambda s: s.per_million(s.executor_cpu), "{:.2f}"),
        ("- of which their JVMs", lambda s: s.per_million(s.executor_cpu - s.executor_py_cpu), "{:.2f}"),
        ("- of which their Python workers", lambda s: s.per_million(s.executor_py_cpu), "{:.2f}"),
        ("broker CPU s per million records", lambda s: s.per_million(s.broker_cpu), "{:.2f}"),
    ]
    for name, get, fmt in metrics:
        for (rev, p), runs in sides.items():
            lo, med, hi = summary([get(s) for s in runs])
            ref = statistics.median([get(s) for s in base])
            rows.append([name, rev, p, fmt.format(lo), fmt.format(med), fmt.format(hi), f"{med / ref:.2f}" if ref else "-"])
    (rev0, p0) = next(iter(sides))
    head = f"steady records/s of {rev0} at parallelism {p0}: {base_rate:,.0f} (median of {len(base)} runs)\n\n"
    return head + table(["metric", "revision", "parallelism", "min", "median", "max",
                         f"ratio to {rev0} x{p0} (median)"], rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--app", default="user_activity")
    ap.add_argument("--parallelism", default="1,2")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--batch", type=int, default=50_000, help="records per trigger")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--baseline-rev", default="", help="also run each parallelism with this revision (a git "
                    "worktree, this venv) on the same records, alternating with this tree")
    ap.add_argument("--commit-on", default="", help="this tree once per value, e.g. driver,executors (the spec's "
                    "commit_on; default: the spec's)")
    args = ap.parse_args(argv)
    from streamops.spec import default_spec_path, get_app, load_specs

    spec = get_app(load_specs(default_spec_path(REPO)), args.app)
    levels = [int(p) for p in args.parallelism.split(",") if p]
    modes = {f"this tree, commit on {m}" if m else "this tree": m or None
             for m in (args.commit_on.split(",") if args.commit_on else [""])}
    revs = [*modes, *([args.baseline_rev] if args.baseline_rev else [])]
    sides: dict[tuple[str, int], list[Side]] = {(r, p): [] for p in levels for r in revs}
    with tempfile.TemporaryDirectory(prefix="streamops-bench-scaling-") as tmp, \
            baseline_tree(args.baseline_rev, Path(tmp) / "baseline", jars=True) as baseline:
        checkouts: dict[str, Path | None] = {**dict.fromkeys(modes), **({args.baseline_rev: baseline} if baseline else {})}
        for run in range(args.runs):
            order = [(r, p) for p in levels for r in revs]
            for rev, p in (order if run % 2 == 0 else list(reversed(order))):
                s = run_side(Path(tmp) / f"run-{run}-p{p}-{len(sides[(rev, p)])}-{revs.index(rev)}", spec, p,
                             args.events, args.batch, args.partitions, seed=run, checkout=checkouts[rev],
                             commit_on=modes.get(rev))
                sides[(rev, p)].append(s)
                print(f"run {run + 1} {rev} parallelism {p}: {s.steady_rate:,.0f} rec/s steady ({s.rate:,.0f} all), "
                      f"{s.steady_batches} steady batches, driver CPU {s.per_batch(s.driver_py_cpu):.3f} s (Python) + "
                      f"{s.per_batch(s.driver_jvm_cpu):.3f} s (JVM) per batch, executors "
                      f"{s.per_million(s.executor_cpu):.1f} CPU s per million records", flush=True)
    print(f"\n{args.app}: {args.events:,} records, {args.partitions} partitions, {args.batch:,} per trigger, "
          f"Spark standalone (2 workers), {args.runs} runs\n")
    print(report(sides))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
