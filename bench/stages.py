"""Where a micro-batch's time goes, per job shape: Spark's own per-stage task metrics (its event
log) beside the driver's timers, for batches 2..n of each app (issue 39).

    .venv/bin/python bench/stages.py [--apps user_activity,orders,...] [--runs 3] \
        [--events user_activity=300000,orders=100000,...] [--batch 50000] [--master local[2]] [--keep DIR] \
        [--baseline-rev REV]
    .venv/bin/python bench/stages.py --from-logs DIR   # the tables again from a --keep folder (no Spark)

For each run and app: a fresh broker (temporary state dir, free ports; stopped in ``finally``),
``--events`` records from the app's own generator (``Job.generate``, seed = run number), then
``python -m streamops.spark.driver --app APP --exit-at-end --max-offsets-per-trigger B`` with
B = min(``--batch``, events / 5) (several batches), its JVM launched with Spark's event log on
(``PYSPARK_SUBMIT_ARGS``, which pyspark's java_gateway hands spark-submit: ``spark.eventLog.enabled``,
``.dir``, and one uncompressed file, ``.compress=false``, ``.rolling.enabled=false``, both on by
default in Spark 4; nothing in the product changes). While it runs, its heartbeat (``driver.json``,
rewritten after each batch's commit) is read every 20 ms for the sink's timers of each batch
(compute, encode, commit: the heartbeat is the only place the driver writes them).

The first batch with input (Python workers, state stores and code paths warming up) is left out;
over the others, per run:

- executor rows (Spark's task metrics, summed per stage: Executor Run Time): each stage's
  category from the operators of its RDDs' scopes: ``read`` (the Kafka scan), ``parse``
  (MapInArrow and the other Python map operators), ``state update`` (a state store or group-state
  operator), joined with ``+`` when one stage holds several; ``collect`` (the job's last stage,
  whose rows go to the driver) when it holds none of them; ``other <stage name>`` otherwise.
  ``of which shuffle write/fetch wait``: those parts of the task time. Share: of all task time.
- driver rows (wall): the batch's Spark jobs (submission to end, overlaps counted once; event log)
  and ``driver between jobs`` = triggerExecution - the jobs' wall, split into toArrow beyond its
  jobs (the rows reaching Python), encode, produce+commit (the Kafka transaction), the sink after
  its commit, and Spark outside the sink (offsets, planning, WAL: triggerExecution - addBatch).
  Share: of triggerExecution.

Each row is in microseconds per input record (min/median/max over runs). With ``--baseline-rev``
each run also runs that revision (a git worktree, this venv and jars) on the same records right
after this tree's, and a last table per app gives both sides' median executor time and
triggerExecution per record and their ratios. ``--keep DIR`` copies
each run's event log, progress lines and sink timers to DIR; ``--from-logs DIR`` reports them again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench._common import baseline_tree, driver_module, isolated_settings, summary, table
from streamops.host.files import read_json

APPS = ("user_activity", "orders", "page_stats", "sessions", "enriched_orders", "recent_pages")
DEFAULT_EVENTS = {"user_activity": 300_000}
OTHER_EVENTS = 100_000

# -- Spark's event log (field names as core's JsonProtocol writes them) -------------------------------
#: the local property MicroBatchExecution sets on the query thread: every job of a batch carries it
BATCH_ID_PROPERTY = "streaming.sql.batchId"
JOB_DESCRIPTION_PROPERTY = "spark.job.description"
EVENTS = ("SparkListenerJobStart", "SparkListenerJobEnd", "SparkListenerStageCompleted", "SparkListenerTaskEnd")

#: operator names (an RDD scope's name is its SparkPlan's nodeName) by what they do
READ_OPS = re.compile(r"^(MicroBatchScan|ContinuousScan)\b|kafka", re.IGNORECASE)
PARSE_OPS = re.compile(r"^(Python)?(MapInArrow|MapInPandas|ArrowEvalPython|BatchEvalPython)")
STATE_OPS = re.compile(r"^(StateStore(Save|Restore)|FlatMapGroupsInPandasWithState|FlatMapGroupsWithState"
                       r"|TransformWithState|StreamingSymmetricHashJoin|StreamingDeduplicate"
                       r"|SessionWindowStateStore|StreamingGlobalLimit)")


@dataclass(frozen=True)
class JobRow:
    job_id: int
    batch_id: int | None
    submitted_ms: int
    completed_ms: int | None
    stage_ids: tuple[int, ...]
    description: str = ""

    @property
    def result_stage(self) -> int | None:
        """The job's last stage (created after its parents: the largest id), whose results go to the driver."""
        return max(self.stage_ids) if self.stage_ids else None


@dataclass
class TaskSums:
    """One stage's task metrics, summed over its tasks (times in ms, Spark's CPU time in ns)."""

    tasks: int = 0
    failed: int = 0
    run_ms: int = 0
    cpu_ns: int = 0
    gc_ms: int = 0
    deserialize_ms: int = 0
    result_bytes: int = 0
    input_records: int = 0
    shuffle_read_records: int = 0
    shuffle_read_bytes: int = 0
    fetch_wait_ms: int = 0
    shuffle_write_records: int = 0
    shuffle_write_bytes: int = 0
    shuffle_write_ns: int = 0

    def add(self, event: dict) -> None:
        m = event.get("Task Metrics") or {}
        self.tasks += 1
        self.failed += (event.get("Task End Reason") or {}).get("Reason", "Success") != "Success"
        self.run_ms += m.get("Executor Run Time", 0)
        self.cpu_ns += m.get("Executor CPU Time", 0)
        self.gc_ms += m.get("JVM GC Time", 0)
        self.deserialize_ms += m.get("Executor Deserialize Time", 0)
        self.result_bytes += m.get("Result Size", 0)
        self.input_records += (m.get("Input Metrics") or {}).get("Records Read", 0)
        sr, sw = m.get("Shuffle Read Metrics") or {}, m.get("Shuffle Write Metrics") or {}
        self.shuffle_read_records += sr.get("Total Records Read", 0)
        self.shuffle_read_bytes += sr.get("Remote Bytes Read", 0) + sr.get("Local Bytes Read", 0)
        self.fetch_wait_ms += sr.get("Fetch Wait Time", 0)
        self.shuffle_write_records += sw.get("Shuffle Records Written", 0)
        self.shuffle_write_bytes += sw.get("Shuffle Bytes Written", 0)
        self.shuffle_write_ns += sw.get("Shuffle Write Time", 0)


@dataclass(frozen=True)
class StageRow:
    stage_id: int
    attempt: int
    name: str
    num_tasks: int
    job_id: int | None
    batch_id: int | None
    #: the operators of the stage's RDDs (their scopes' names, one per scope id, by RDD id)
    ops: tuple[str, ...]
    is_result: bool
    category: str
    submitted_ms: int | None
    completed_ms: int | None
    metrics: TaskSums = field(default_factory=TaskSums)


@dataclass(frozen=True)
class EventLog:
    jobs: list[JobRow]
    stages: list[StageRow]


def event_name(line: str) -> str | None:
    """The event's name without parsing the line (Spark writes ``Event`` first), else by parsing it."""
    if line.startswith('{"Event":"'):
        return line[10:line.find('"', 10)]
    try:
        return json.loads(line).get("Event")
    except ValueError:
        return None


def batch_of(properties: dict) -> int | None:
    """The streaming batch a job ran for: its ``streaming.sql.batchId`` property, else ``batch = N``
    in its description (as MicroBatchExecution writes it), else None (not a batch's job)."""
    value = properties.get(BATCH_ID_PROPERTY)
    if value not in (None, ""):
        return int(value)
    m = re.search(r"\bbatch = (\d+)", properties.get(JOB_DESCRIPTION_PROPERTY) or "")
    return int(m[1]) if m else None


def stage_ops(stage_info: dict) -> tuple[str, ...]:
    """The operators a stage runs: the names of its RDDs' scopes (``Scope`` is RDDOperationScope's
    JSON text, ``{"id": "3", "name": "Exchange"}``), one per scope id, in the order of the RDDs' ids."""
    seen: dict[str, str] = {}
    for rdd in sorted(stage_info.get("RDD Info") or [], key=lambda r: r.get("RDD ID", 0)):
        scope = rdd.get("Scope")
        if isinstance(scope, str):
            try:
                scope = json.loads(scope)
            except ValueError:
                scope = None
        if isinstance(scope, dict) and scope.get("name"):
            seen.setdefault(str(scope.get("id", scope["name"])), scope["name"])
    return tuple(seen.values())


def categorize(ops: Iterable[str], is_result: bool, name: str) -> str:
    """A stage's category from its operators (see the module docstring); never a guess."""
    ops = list(ops)
    parts = [label for label, pattern in (("read", READ_OPS), ("parse", PARSE_OPS), ("state update", STATE_OPS))
             if any(pattern.search(op) for op in ops)]
    if parts:
        return "+".join(parts)
    return "collect" if is_result else f"other {name}"


def parse_event_log(lines: Iterable[str]) -> EventLog:
    """A Spark event log (JSON lines) -> its jobs and completed stages, task metrics summed per stage."""
    jobs: dict[int, JobRow] = {}
    stage_infos: dict[tuple[int, int], dict] = {}
    sums: dict[tuple[int, int], TaskSums] = {}
    for line in lines:
        name = event_name(line)
        if name not in EVENTS:
            continue
        e = json.loads(line)
        if name == "SparkListenerJobStart":
            props = e.get("Properties") or {}
            jobs[e["Job ID"]] = JobRow(e["Job ID"], batch_of(props), e.get("Submission Time", 0), None,
                                       tuple(e.get("Stage IDs") or ()), props.get(JOB_DESCRIPTION_PROPERTY) or "")
        elif name == "SparkListenerJobEnd" and e["Job ID"] in jobs:
            j = jobs[e["Job ID"]]
            jobs[j.job_id] = JobRow(j.job_id, j.batch_id, j.submitted_ms, e.get("Completion Time"), j.stage_ids,
                                    j.description)
        elif name == "SparkListenerStageCompleted":
            info = e["Stage Info"]
            stage_infos[(info["Stage ID"], info.get("Stage Attempt ID", 0))] = info
        else:
            key = (e["Stage ID"], e.get("Stage Attempt ID", 0))
            sums.setdefault(key, TaskSums()).add(e)
    job_of = {s: j for j in sorted(jobs.values(), key=lambda j: -j.job_id) for s in j.stage_ids}  # first job wins
    stages = []
    for (sid, attempt), info in sorted(stage_infos.items()):
        job = job_of.get(sid)
        ops = stage_ops(info)
        is_result = job is not None and job.result_stage == sid
        stages.append(StageRow(sid, attempt, info.get("Stage Name", ""), info.get("Number of Tasks", 0),
                               job.job_id if job else None, job.batch_id if job else None, ops, is_result,
                               categorize(ops, is_result, info.get("Stage Name", "")),
                               info.get("Submission Time"), info.get("Completion Time"),
                               sums.get((sid, attempt), TaskSums())))
    return EventLog(sorted(jobs.values(), key=lambda j: j.job_id), stages)


# -- one batch: the event log's stages and jobs beside the driver's progress line and sink timers ------
@dataclass(frozen=True)
class SinkTimers:
    """The sink's timers of one batch (the driver's heartbeat, ``driver.sink``), in seconds."""

    compute: float  # df.toArrow(): the batch's Spark job(s) and the rows reaching Python
    encode: float  # output, changelog and DLQ records encoded on the driver
    commit: float  # the Kafka transaction (produce + commit)
    sink: float  # the three together


def sink_timers(heartbeats: Iterable[dict]) -> dict[int, SinkTimers]:
    """Each batch's sink timers from snapshots of the heartbeat (a replayed batch's are left out)."""
    out: dict[int, SinkTimers] = {}
    for hb in heartbeats:
        if not isinstance(hb, dict) or hb.get("batch_id") is None or "compute_seconds" not in hb \
                or hb.get("replayed"):
            continue
        out[int(hb["batch_id"])] = SinkTimers(hb["compute_seconds"], hb["encode_seconds"], hb["commit_seconds"],
                                              hb["sink_seconds"])
    return out


@dataclass(frozen=True)
class BatchProfile:
    batch_id: int
    input_rows: int
    trigger_ms: float
    add_batch_ms: float
    jobs: tuple[JobRow, ...]
    stages: tuple[StageRow, ...]
    sink: SinkTimers | None

    @property
    def jobs_wall_ms(self) -> float:
        """The batch's Spark jobs' wall: the union of their intervals (submission to end)."""
        spans = sorted((j.submitted_ms, j.completed_ms) for j in self.jobs if j.completed_ms is not None)
        total, end = 0.0, None
        for start, stop in spans:
            if end is None or start > end:
                total += stop - start
                end = stop
            elif stop > end:
                total += stop - end
                end = stop
        return total


def batch_profiles(log: EventLog, progress: Iterable[dict], sinks: dict[int, SinkTimers]) -> list[BatchProfile]:
    """One profile per progress line that read input, in batch order."""
    out = []
    for line in sorted(progress, key=lambda p: p["batch_id"]):
        if not line.get("input_rows"):
            continue
        b = line["batch_id"]
        d = line.get("duration_ms") or {}
        out.append(BatchProfile(b, line["input_rows"], d.get("triggerExecution", 0), d.get("addBatch", 0),
                                tuple(j for j in log.jobs if j.batch_id == b),
                                tuple(s for s in log.stages if s.batch_id == b), sinks.get(b)))
    return out


# -- one run's rows ---------------------------------------------------------------------------------------
EXECUTOR, DRIVER = "executor (task time)", "driver (wall)"


@dataclass(frozen=True)
class Row:
    section: str
    name: str
    us_per_record: float
    share: float  # of the batch's task time (executor rows) or of its triggerExecution (driver rows)
    detail: str = ""


def run_rows(profiles: list[BatchProfile], skip: int = 1) -> tuple[list[Row], list[BatchProfile]]:
    """The rows of one run over its batches after the first ``skip`` (warm-up), and those batches.
    Batches without sink timers (a heartbeat the poll missed) are left out of the driver rows' sums."""
    measured = profiles[skip:]
    if not measured:
        return [], []
    n = len(measured)
    records = sum(b.input_rows for b in measured)

    def us(ms: float) -> float:
        return ms * 1000 / records

    stages = [s for b in measured for s in b.stages]
    task_ms = sum(s.metrics.run_ms for s in stages) or 1
    rows = []
    for cat in sorted({s.category for s in stages}, key=lambda c: min(s.stage_id for s in stages if s.category == c)):
        group = [s for s in stages if s.category == cat]
        run = sum(s.metrics.run_ms for s in group)
        cpu = sum(s.metrics.cpu_ns for s in group) / 1e6
        gc = sum(s.metrics.gc_ms for s in group)
        detail = (f"{len(group) / n:g} stage(s), {sum(s.metrics.tasks for s in group) / n:g} tasks; "
                  f"JVM CPU {cpu / run:.0%}, GC {gc / run:.0%} of run" if run else f"{len(group) / n:g} stage(s)")
        read = sum(s.metrics.input_records for s in group)
        if read:  # a source scanned twice reads its records twice
            detail += f"; reads {read / records:.2g}x the input records"
        rows.append(Row(EXECUTOR, cat, us(run), run / task_ms, detail))
    for name, ms in (("of which shuffle write", sum(s.metrics.shuffle_write_ns for s in stages) / 1e6),
                     ("of which shuffle fetch wait", sum(s.metrics.fetch_wait_ms for s in stages))):
        rows.append(Row(EXECUTOR, name, us(ms), ms / task_ms))
    rows.append(Row(EXECUTOR, "all stages", us(task_ms), 1.0,
                    f"{len(stages) / n:g} stages, {sum(s.metrics.tasks for s in stages) / n:g} tasks per batch"))
    rows += _driver_rows(measured, records)
    return rows, measured


def _driver_rows(measured: list[BatchProfile], records: int) -> list[Row]:
    timed = [b for b in measured if b.sink is not None]
    if not timed:
        return []
    records = sum(b.input_rows for b in timed)
    trig = sum(b.trigger_ms for b in timed) or 1
    jobs = sum(b.jobs_wall_ms for b in timed)
    compute, encode, commit, sink = (sum(getattr(b.sink, f) for b in timed) * 1000
                                     for f in ("compute", "encode", "commit", "sink"))
    add_batch = sum(b.add_batch_ms for b in timed)
    parts = [("Spark jobs", jobs, f"{sum(len(b.jobs) for b in timed) / len(timed):g} job(s) per batch"),
             ("driver between jobs", trig - jobs, "triggerExecution - the jobs' wall:"),
             ("- toArrow beyond its jobs", compute - jobs, "the rows reaching Python"),
             ("- encode", encode, "output, changelog, DLQ records"),
             ("- produce+commit", commit, "the Kafka transaction"),
             ("- sink after its commit", add_batch - sink, "heartbeat, reports"),
             ("- Spark outside the sink", trig - add_batch, "offsets, planning, WAL, commit log"),
             ("triggerExecution", trig, f"{len(timed)} batches, {records / len(timed):,.0f} records each")]
    return [Row(DRIVER, name, ms * 1000 / records, ms / trig, detail) for name, ms, detail in parts]


def summarize(runs: list[list[Row]]) -> list[list[object]]:
    """Table rows: min/median/max over runs of each row's us/record and share (a row a run lacks: 0)."""
    order: dict[tuple[str, str], str] = {}
    for rows in runs:
        for r in rows:
            order.setdefault((r.section, r.name), r.detail)
    out = []
    for (section, name), detail in order.items():
        got = [{(r.section, r.name): r for r in rows}.get((section, name)) for rows in runs]
        us = summary([r.us_per_record if r else 0.0 for r in got])
        share = summary([r.share if r else 0.0 for r in got])
        out.append([section, name, *(f"{v:,.1f}" for v in us), *(f"{v:.0%}" for v in share), detail])
    return out


HEADERS = ["where", "row", "us/record min", "median", "max", "share min", "median", "max", "per batch (first run)"]


def stage_listing(batch: BatchProfile) -> list[str]:
    """One line per stage of a batch: id, category, tasks, operators."""
    return [f"  stage {s.stage_id} ({s.category}, {s.num_tasks} tasks{', result' if s.is_result else ''}): "
            f"{', '.join(s.ops)}" for s in batch.stages]


# -- running the driver -------------------------------------------------------------------------------------
#: what the driver's JVM is launched with: the event log on, one uncompressed file (Spark 4 compresses and
#: rolls it by default: ``spark.eventLog.compress``, ``spark.eventLog.rolling.enabled``)
EVENT_LOG_CONF = {"spark.eventLog.enabled": "true", "spark.eventLog.compress": "false",
                  "spark.eventLog.rolling.enabled": "false"}
COMPRESSED = (".lz4", ".lzf", ".snappy", ".zstd")


def event_log_submit_args(log_dir: Path, existing: str | None = None) -> str:
    """``PYSPARK_SUBMIT_ARGS`` turning the event log on (read by pyspark's java_gateway when it launches
    the driver's JVM with spark-submit; it must end with ``pyspark-shell``), after any given ones."""
    words = shlex.split(existing or "")
    if words and words[-1] == "pyspark-shell":
        words = words[:-1]
    for key, value in {**EVENT_LOG_CONF, "spark.eventLog.dir": log_dir.resolve().as_uri()}.items():
        words += ["--conf", f"{key}={value}"]
    return shlex.join([*words, "pyspark-shell"])


def event_log_files(log_dir: Path) -> list[Path]:
    """The files of the one event log Spark wrote in ``log_dir``, in order: ``APP_ID`` (or
    ``APP_ID.inprogress``, a context never stopped), or rolled, ``eventlog_v2_APP_ID/events_N_APP_ID``."""
    singles = sorted(p for p in log_dir.iterdir() if p.is_file())
    rolled = sorted(log_dir.glob("eventlog_v2_*"))
    if len(singles) + len(rolled) != 1:
        found = sorted(str(p.relative_to(log_dir)) for p in log_dir.rglob("*"))
        raise SystemExit(f"expected one event log in {log_dir}, found {found}")
    files = singles or sorted(rolled[0].glob("events_*"), key=lambda p: int(p.name.split("_")[1]))
    bad = [p.name for p in files if p.name.removesuffix(".inprogress").endswith(COMPRESSED)]
    if bad or not files:
        raise SystemExit(f"{log_dir}: no uncompressed event log ({bad or 'no events files'})")
    return files


@dataclass
class RunData:
    event_log: list[Path]
    progress: list[dict]
    sinks: dict[int, SinkTimers]


def run_driver(settings, app: str, batch: int, master: str, log_dir: Path, checkout: Path | None = None,
               commit_on: str | None = None) -> RunData:
    """The app's driver to the end of its input with the event log on; its heartbeat polled meanwhile.
    ``checkout``: another revision's tree (``--baseline-rev``), whose code the driver and its Python
    workers then run, with this venv and this checkout's jars."""
    log_dir.mkdir(parents=True, exist_ok=True)
    app_dir = settings.state_dir / "apps" / app
    env = {**os.environ, **settings.env(), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": settings.host,
           "PYSPARK_SUBMIT_ARGS": event_log_submit_args(log_dir, os.environ.get("PYSPARK_SUBMIT_ARGS"))}
    if checkout is not None:
        env.update({"PYTHONPATH": str(checkout), "STREAMOPS_REPO": str(checkout),
                    "STREAMOPS_JARS_DIR": os.environ.get("STREAMOPS_JARS_DIR", str(REPO / ".jars"))})
    out_path = settings.state_dir / "bench-job.log"
    heartbeats = []
    with open(out_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", driver_module(checkout), "--app", app, "--master", master,
                                 "--exit-at-end", "--max-offsets-per-trigger", str(batch),
                                 "--trigger-interval", "0 seconds", *(["--commit-on", commit_on] if commit_on else [])],
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=checkout or settings.state_dir)

        def snapshot() -> None:
            hb = read_json(app_dir / "driver.json")
            if hb is not None and (not heartbeats or hb != heartbeats[-1]):
                heartbeats.append(hb)

        while proc.poll() is None:
            snapshot()
            time.sleep(0.02)
        snapshot()  # the last batch's heartbeat, written just before the driver exited
    if proc.returncode != 0:
        raise SystemExit(f"{app} exited {proc.returncode}; log: {out_path}\n" + out_path.read_text()[-3000:])
    progress = [json.loads(line) for line in (app_dir / "batches.jsonl").read_text().splitlines() if line.strip()]
    return RunData(event_log_files(log_dir), progress, sink_timers(heartbeats))


def keep(data: RunData, into: Path) -> None:
    """The run's raw material, for ``--from-logs``: the event log (one file), progress lines, sink timers."""
    into.mkdir(parents=True, exist_ok=True)
    with open(into / "eventlog.jsonl", "wb") as out:
        for part in data.event_log:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out)
    (into / "batches.jsonl").write_text("".join(json.dumps(p) + "\n" for p in data.progress))
    (into / "sinks.json").write_text(json.dumps({b: vars(t) for b, t in data.sinks.items()}, indent=1))


def load_kept(folder: Path) -> RunData:
    sinks = {int(b): SinkTimers(**t) for b, t in json.loads((folder / "sinks.json").read_text()).items()}
    progress = [json.loads(line) for line in (folder / "batches.jsonl").read_text().splitlines() if line.strip()]
    return RunData([folder / "eventlog.jsonl"], progress, sinks)


def profile(data: RunData) -> list[BatchProfile]:
    def lines():
        for part in data.event_log:
            with open(part) as f:
                yield from f

    return batch_profiles(parse_event_log(lines()), data.progress, data.sinks)


def totals(runs: list[list[BatchProfile]]) -> tuple[float, float]:
    """Medians over runs of the executor's task time and the batch's triggerExecution, us per record."""
    rows = [{r.name: r.us_per_record for r in run_rows(p)[0]} for p in runs]
    return (summary([r.get("all stages", 0.0) for r in rows])[1],
            summary([r.get("triggerExecution", 0.0) for r in rows])[1])


def compare(app: str, sides: dict[str, list[list[BatchProfile]]], baseline: str) -> None:
    """One line per side: the medians of ``totals`` and their ratio to the baseline's."""
    base = totals(sides[baseline])
    rows = []
    for side, runs in sides.items():
        ex, trig = totals(runs)
        rows.append([app, side, f"{ex:,.1f}", f"{ex / base[0]:.2f}", f"{trig:,.1f}", f"{trig / base[1]:.2f}",
                     f"{base[1] / trig:.2f}"])
    print()
    print(table(["app", "side", "executor us/record (median)", "ratio", "triggerExecution us/record (median)",
                 "ratio", "records/s ratio"], rows))


def report(app: str, runs: list[list[BatchProfile]], caption: str) -> None:
    results = [run_rows(p) for p in runs]
    print(f"\n{app}: {caption}, batches 2..n ({', '.join(str(len(m)) for _r, m in results)} per run)\n", flush=True)
    print(table(HEADERS, summarize([r for r, _m in results])))
    first = next((m[0] for _r, m in results if m), None)
    if first is not None:
        print(f"\nthe stages of batch {first.batch_id} (run 1; {len(first.jobs)} job(s)):")
        print("\n".join(stage_listing(first)))
    missing = sum(1 for _r, m in results for b in m if b.sink is None)
    if missing:
        print(f"({missing} batch(es) without sink timers: the heartbeat poll missed them; left out of driver rows)")


def parse_events(text: str, apps: list[str]) -> dict[str, int]:
    """``--events``: N for every app, or APP=N,... (the others keep their defaults)."""
    out = {a: DEFAULT_EVENTS.get(a, OTHER_EVENTS) for a in apps}
    if text.isdigit():
        return dict.fromkeys(apps, int(text))
    for kv in filter(None, text.split(",")):
        k, v = kv.split("=")
        if k in out:
            out[k] = int(v)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--apps", default=",".join(APPS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--events", default="", help="N (every app) or APP=N,... (default: user_activity "
                    f"{DEFAULT_EVENTS['user_activity']:,}, the others {OTHER_EVENTS:,})")
    ap.add_argument("--batch", type=int, default=50_000, help="records per trigger, at most a fifth of an app's")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--keep", type=Path, help="copy each run's event log, progress and sink timers here")
    ap.add_argument("--from-logs", type=Path, help="report a --keep folder again (runs nothing)")
    ap.add_argument("--baseline-rev", default="", help="also run this revision (a git worktree, this venv) on the "
                    "same records, alternating with this tree, and print the ratios")
    ap.add_argument("--commit-on", default="", help="this tree's driver commits there (the spec's commit_on)")
    args = ap.parse_args()
    if args.from_logs:
        for app_dir in sorted(p for p in args.from_logs.iterdir() if p.is_dir()):
            runs = [profile(load_kept(r)) for r in sorted(app_dir.glob("run-*")) if (r / "eventlog.jsonl").exists()]
            report(app_dir.name, runs, f"kept in {args.from_logs}")
        return
    from bench.apps import produce_input
    from streamops.platform import manager

    apps = [a for a in args.apps.split(",") if a]
    events = parse_events(args.events, apps)
    with tempfile.TemporaryDirectory(prefix="streamops-bench-stages-") as tmp, \
            baseline_tree(args.baseline_rev, Path(tmp) / "baseline") as checkout:
        # the sides of each run, in turn: this tree, then the baseline (same seed, a fresh broker each)
        sides: dict[str, Path | None] = {"this tree": None, **({args.baseline_rev: checkout} if checkout else {})}
        for app in apps:
            batch = min(args.batch, events[app] // 5)
            runs: dict[str, list[list[BatchProfile]]] = {side: [] for side in sides}
            for run in range(args.runs):
                for side, tree in sides.items():
                    label = f"run-{run}" if tree is None else f"baseline-{args.baseline_rev}-run-{run}"
                    settings = isolated_settings(Path(tmp) / f"{app}-{label}")
                    try:
                        manager.up(settings, only=["kafka"])
                        produce_input(settings, app, events[app], seed=run)
                        data = run_driver(settings, app, batch, args.master, Path(tmp) / f"{app}-{label}-eventlog",
                                          tree, commit_on=args.commit_on or None)
                        if args.keep:
                            keep(data, args.keep / app / label)
                        runs[side].append(profile(data))
                        print(f"run {run + 1} {app} ({side}): {len(runs[side][-1])} batches with input", flush=True)
                    finally:
                        manager.down(settings)
                        if args.keep and (settings.state_dir / "bench-job.log").exists():  # the driver's output
                            (args.keep / app / label).mkdir(parents=True, exist_ok=True)
                            shutil.copy(settings.state_dir / "bench-job.log", args.keep / app / label / "driver.log")
                        shutil.rmtree(settings.state_dir, ignore_errors=True)
            for side, got in runs.items():
                report(app, got, f"{events[app]:,} records, {batch:,} per batch, master {args.master}, "
                                 f"{args.runs} runs" + ("" if side == "this tree" else f", {side}"))
            if checkout is not None:
                compare(app, runs, args.baseline_rev)


if __name__ == "__main__":
    main()
