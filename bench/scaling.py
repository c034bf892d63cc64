"""The same backlog at parallelism 1 and 2 on the Spark standalone cluster: records/s per executor,
and the driver's CPU per batch and per million records (issue 39, item 6).

    .venv/bin/python bench/scaling.py [--parallelism 1,2] [--runs 2] [--events 300000] \
        [--batch 50000] [--users 10000] [--partitions 6] [--app user_activity] [--commit-on driver,executors] \
        [--threads]

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

``--threads`` also reads each JVM thread's CPU (``/proc/PID/task/TID/stat``, by the thread's name with
its number dropped) of the driver's JVM and of the executors': one table of CPU per steady batch by
thread kind (the JIT's compiler threads, GC, the query's thread, the scheduler, the tasks), and one
of the run in windows of batches (1-9, 10-29, 30-99, ...) with the JIT apart from the rest, which
shows when the JIT settles.

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
import re
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


def thread_group(name: str) -> str:
    """A JVM thread's kind from its Linux name (15 characters at most): the trailing number goes, so
    ``GC Thread#0`` and ``GC Thread#1`` add up, as do a pool's threads."""
    if name.startswith("Executor task"):  # a task's thread, renamed per task ("... launch worker", "... i...")
        return "Executor task"
    return re.sub(r"[#\-]*\d+$", "", name).strip() or name


def thread_cpus(pid: int) -> dict[int, tuple[str, float]]:
    """tid -> (its name, CPU-seconds) of every thread of ``pid`` readable now."""
    out: dict[int, tuple[str, float]] = {}
    try:
        tasks = list(os.scandir(f"/proc/{pid}/task"))
    except OSError:
        return out
    for entry in tasks:
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        out[int(entry.name)] = (stat[stat.index("(") + 1:stat.rindex(")")], proc_cpu(stat))
    return out


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
    threads: bool = False  # also the driver's and executors' JVM threads, by kind (``thread_samples``)
    samples: list[CpuSample] = field(default_factory=list)
    thread_samples: list[tuple[float, dict[str, float]]] = field(default_factory=list)  # (at, kind -> CPU so far)
    _thread_last: dict[tuple[int, int], tuple[str, float]] = field(default_factory=dict)  # (pid, tid) -> (kind, CPU)
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
        if self.threads:
            for pid, where in [*((p, "driver") for p in jvm), *((p, "executor") for p in execs)]:
                for tid, (name, cpu) in thread_cpus(pid).items():
                    self._thread_last[(pid, tid)] = (f"{where}: {thread_group(name)}", cpu)
            kinds: dict[str, float] = {}
            for kind, cpu in self._thread_last.values():
                kinds[kind] = kinds.get(kind, 0.0) + cpu
            self.thread_samples.append((s.at, kinds))
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


def threads_between(samples: list[tuple[float, dict[str, float]]], start: float, end: float) -> dict[str, float]:
    """CPU-seconds per thread kind from the last sample at or before ``start`` to the first at or
    after ``end`` (no interpolation: a kind may appear between the two)."""
    if not samples:
        return {}
    a = max((s for s in samples if s[0] <= start), key=lambda s: s[0], default=samples[0])[1]
    z = min((s for s in samples if s[0] >= end), key=lambda s: s[0], default=samples[-1])[1]
    return {k: v - a.get(k, 0.0) for k, v in z.items() if v - a.get(k, 0.0) > 0}


#: batch windows (by index among the batches with input; 0, the first, is left out) of ``windows_of``
WINDOWS = ((1, 10), (10, 30), (30, 100), (100, 300), (300, 1000), (1000, 10**9))
JIT = ("C1 CompilerThre", "C2 CompilerThre")  # HotSpot's compiler threads, by their Linux names


@dataclass(frozen=True)
class Window:
    """Batches ``first``..``last`` of a run: their median trigger time and per batch the JIT's and the
    rest's CPU in the driver's and the executors' JVMs (does the JIT settle, and when?)."""

    first: int
    last: int
    trigger_ms: float
    driver_jit: float
    driver_rest: float
    executor_jit: float
    executor_rest: float


def on_side(cpu: dict[str, float], where: str) -> dict[str, float]:
    """The thread kinds of one side's JVMs ("driver" or "executor") of a kind -> CPU map."""
    return {k: v for k, v in cpu.items() if k.startswith(f"{where}: ")}


def cpu_per_batch(cpu: dict[str, float], where: str, batches: int) -> tuple[float, float]:
    """(the JIT's, the rest's) CPU-seconds per batch of one side's JVMs."""
    mine = on_side(cpu, where)
    jit = sum(mine.get(f"{where}: {j}", 0.0) for j in JIT)
    return jit / batches, (sum(mine.values()) - jit) / batches


def windows_of(bs: list[dict], thread_samples: list[tuple[float, dict[str, float]]]) -> list[Window]:
    out = []
    for lo, hi in WINDOWS:
        part = bs[lo:min(hi, len(bs))]
        if not part:
            break
        start = _ms(part[0]["timestamp"]) / 1000
        end = max(_ms(b["timestamp"]) + b["duration_ms"]["triggerExecution"] for b in part) / 1000
        cpu = threads_between(thread_samples, start, end)
        out.append(Window(lo, lo + len(part) - 1,
                          statistics.median(b["duration_ms"]["triggerExecution"] for b in part),
                          *cpu_per_batch(cpu, "driver", len(part)), *cpu_per_batch(cpu, "executor", len(part))))
    return out


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
    #: "driver: KIND" / "executor: KIND" -> CPU-seconds of those JVM threads over the steady batches
    jvm_threads: dict[str, float] = field(default_factory=dict)
    windows: list[Window] = field(default_factory=list)  # with thread samples: the run in windows of batches

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


def side_of(parallelism: int, progress: list[dict], samples: list[CpuSample],
            thread_samples: list[tuple[float, dict[str, float]]] | None = None) -> Side:
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
                broker_cpu=z.broker - a.broker,
                jvm_threads=threads_between(thread_samples or [], steady_start / 1000, max(ends) / 1000),
                windows=windows_of(bs, thread_samples) if thread_samples else [])


def produce_input(settings: Settings, spec, events: int, partitions: int, seed: int) -> None:
    from streamops.kafka.admin import TopicSpec, ensure_topics
    from streamops.kafka.produce import produce
    from streamops.spec import load_job

    job = load_job(spec, settings.repo)()
    topic = spec.input_topics[0]
    ensure_topics(settings.kafka_bootstrap, [TopicSpec(name=topic, partitions=partitions)])
    produce(settings.kafka_bootstrap, topic, job.generate(events, seed), partitions=partitions)


def run_side(home: Path, spec, parallelism: int, events: int, batch: int, partitions: int, seed: int,
             checkout: Path | None = None, commit_on: str | None = None, threads: bool = False) -> Side:
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
            sampler = CpuSampler(proc.pid, threads=threads)
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
        return side_of(parallelism, progress, sampler.samples, sampler.thread_samples)
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


def thread_report(sides: dict[tuple[str, int], list[Side]], top: int = 10) -> str:
    """The driver's and the executors' JVM CPU per steady batch by thread kind, the largest first
    (``top`` of each); the rest of each in one row."""
    rows = []
    for where in ("driver", "executor"):
        kinds: dict[str, float] = {}
        for s in (s for runs in sides.values() for s in runs):
            for k, v in on_side(s.jvm_threads, where).items():
                kinds[k] = kinds.get(k, 0.0) + v
        shown = sorted(kinds, key=kinds.get, reverse=True)[:top]
        for (rev, p), runs in sides.items():
            mine = [on_side(s.jvm_threads, where) for s in runs]
            total = statistics.median([s.per_batch(sum(m.values())) for s, m in zip(runs, mine)]) or 1.0
            for k in [*shown, f"{where}: (other)"]:
                spent = [m.get(k, 0.0) if k in shown else sum(v for n, v in m.items() if n not in shown) for m in mine]
                lo, med, hi = summary([s.per_batch(c) for s, c in zip(runs, spent)])
                rows.append([k, rev, p, f"{lo:.3f}", f"{med:.3f}", f"{hi:.3f}", f"{med / total:.0%}"])
    return table(["JVM thread (kind)", "revision", "parallelism", "CPU s per batch min", "median", "max",
                  "share of that JVM side's"], rows)


def window_report(sides: dict[tuple[str, int], list[Side]]) -> str:
    """Per window of batches, medians over the runs: the trigger time and the JVMs' CPU per batch."""
    rows = []
    for (rev, p), runs in sides.items():
        for i, w in enumerate(runs[0].windows):
            ws = [s.windows[i] for s in runs if len(s.windows) > i and s.windows[i].first == w.first]
            meds = [statistics.median(getattr(x, f) for x in ws)
                    for f in ("trigger_ms", "driver_jit", "driver_rest", "executor_jit", "executor_rest")]
            rows.append([rev, p, f"{w.first}-{max(x.last for x in ws)}", f"{meds[0]:,.0f}",
                         *(f"{m:.3f}" for m in meds[1:])])
    return table(["revision", "parallelism", "batches", "trigger ms (median)", "driver JVM: JIT CPU s per batch",
                  "driver JVM: the rest", "executor JVMs: JIT", "executor JVMs: the rest"], rows)


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
    ap.add_argument("--threads", action="store_true", help="also the driver's and executors' JVM CPU per batch "
                    "by thread kind (from /proc/PID/task: the JIT, GC, the scheduler, the query's thread, the tasks)")
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
                             commit_on=modes.get(rev), threads=args.threads)
                sides[(rev, p)].append(s)
                print(f"run {run + 1} {rev} parallelism {p}: {s.steady_rate:,.0f} rec/s steady ({s.rate:,.0f} all), "
                      f"{s.steady_batches} steady batches, driver CPU {s.per_batch(s.driver_py_cpu):.3f} s (Python) + "
                      f"{s.per_batch(s.driver_jvm_cpu):.3f} s (JVM) per batch, executors "
                      f"{s.per_million(s.executor_cpu):.1f} CPU s per million records", flush=True)
    print(f"\n{args.app}: {args.events:,} records, {args.partitions} partitions, {args.batch:,} per trigger, "
          f"Spark standalone (2 workers), {args.runs} runs\n")
    print(report(sides))
    if args.threads:
        print("\n" + thread_report(sides))
        print("\nThe JIT over the run (C1 and C2 compiler threads; batch 0 left out):\n\n" + window_report(sides))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
