"""bench/stages.py's pure parts: Spark's event log -> stages per batch -> rows per run, on a small
synthetic event log shaped as Spark's JsonProtocol writes it (its field names, one JSON object a line)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from bench.stages import (
    DRIVER,
    EXECUTOR,
    BatchProfile,
    JobRow,
    SinkTimers,
    batch_of,
    batch_profiles,
    categorize,
    event_log_files,
    event_log_submit_args,
    keep,
    load_kept,
    parse_event_log,
    parse_events,
    profile,
    run_rows,
    sink_timers,
    stage_ops,
    summarize,
)


# -- a synthetic event log ----------------------------------------------------------------------------
def rdd(rdd_id: int, scope_id: int, scope: str, name: str = "MapPartitionsRDD") -> dict:
    return {"RDD ID": rdd_id, "Name": name, "Scope": json.dumps({"id": str(scope_id), "name": scope}),
            "Callsite": "toArrow at NativeMethodAccessorImpl.java:0", "Parent IDs": [rdd_id - 1],
            "Storage Level": {"Use Disk": False, "Use Memory": False, "Deserialized": False, "Replication": 1},
            "Barrier": False, "DeterministicLevel": "DETERMINATE", "Number of Partitions": 4,
            "Number of Cached Partitions": 0, "Memory Size": 0, "Disk Size": 0}


def stage_info(sid: int, ops: list[tuple[int, str]], tasks: int, submitted: int | None = None,
               completed: int | None = None, name: str = "toArrow at NativeMethodAccessorImpl.java:0") -> dict:
    info = {"Stage ID": sid, "Stage Attempt ID": 0, "Stage Name": name, "Number of Tasks": tasks,
            "RDD Info": [rdd(100 * sid + i, scope_id, op) for i, (scope_id, op) in enumerate(ops)],
            "Parent IDs": [], "Details": "org.apache.spark.sql.Dataset.toArrow", "Accumulables": [],
            "Resource Profile Id": 0, "Shuffle Push Enabled": False, "Shuffle Push Mergers Count": 0}
    if submitted is not None:
        info["Submission Time"] = submitted
    if completed is not None:
        info["Completion Time"] = completed
    return info


def job_start(job_id: int, at: int, stages: list[dict], props: dict) -> dict:
    return {"Event": "SparkListenerJobStart", "Job ID": job_id, "Submission Time": at, "Stage Infos": stages,
            "Stage IDs": [s["Stage ID"] for s in stages], "Properties": props}


def job_end(job_id: int, at: int) -> dict:
    return {"Event": "SparkListenerJobEnd", "Job ID": job_id, "Completion Time": at,
            "Job Result": {"Result": "JobSucceeded"}}


def task_end(sid: int, run_ms: int, *, cpu_ns: int = 0, gc_ms: int = 0, result: int = 0, records_in: int = 0,
             sw_records: int = 0, sw_ns: int = 0, sr_records: int = 0, wait_ms: int = 0,
             reason: str = "Success") -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": sid, "Stage Attempt ID": 0, "Task Type": "ResultTask",
            "Task End Reason": {"Reason": reason},
            "Task Info": {"Task ID": 1, "Index": 0, "Attempt": 0, "Launch Time": 0, "Executor ID": "driver",
                          "Host": "127.0.0.1", "Locality": "PROCESS_LOCAL", "Speculative": False,
                          "Getting Result Time": 0, "Finish Time": run_ms, "Failed": reason != "Success",
                          "Killed": False, "Accumulables": []},
            "Task Metrics": {
                "Executor Deserialize Time": 3, "Executor Deserialize CPU Time": 2_000_000,
                "Executor Run Time": run_ms, "Executor CPU Time": cpu_ns, "Peak Execution Memory": 0,
                "Result Size": result, "JVM GC Time": gc_ms, "Result Serialization Time": 0,
                "Memory Bytes Spilled": 0, "Disk Bytes Spilled": 0,
                "Shuffle Read Metrics": {"Remote Blocks Fetched": 0, "Local Blocks Fetched": 4,
                                         "Fetch Wait Time": wait_ms, "Remote Bytes Read": 0,
                                         "Remote Bytes Read To Disk": 0,
                                         "Local Bytes Read": 10 * sr_records, "Total Records Read": sr_records},
                "Shuffle Write Metrics": {"Shuffle Bytes Written": 10 * sw_records, "Shuffle Write Time": sw_ns,
                                          "Shuffle Records Written": sw_records},
                "Input Metrics": {"Bytes Read": 0, "Records Read": records_in},
                "Output Metrics": {"Bytes Written": 0, "Records Written": 0},
                "Updated Blocks": []}}


def stage_completed(info: dict) -> dict:
    return {"Event": "SparkListenerStageCompleted", "Stage Info": info}


SCAN, PARSE = "MicroBatchScan", "MapInArrow"
READ_STAGE = [(1, SCAN), (2, "WholeStageCodegen (1)"), (3, "Exchange")]
PARSE_STAGE = [(3, "Exchange"), (4, PARSE), (5, "WholeStageCodegen (2)"), (6, "Exchange")]
STATE_STAGE = [(6, "Exchange"), (7, "StateStoreRestore"), (8, "StateStoreSave"), (3, "Exchange"), (9, PARSE),
               (10, "Union")]


def batch_lines(batch: int, job_id: int, first_stage: int, t0: int, *, by_description: bool = False) -> list[dict]:
    """One aggregate-shaped batch: read (6 tasks), parse (4), parse + state update (8, the result),
    plus a stage Spark skipped (in the job's stage ids, never completed)."""
    s = first_stage
    stages = [stage_info(s, READ_STAGE, 6), stage_info(s + 1, PARSE_STAGE, 4),
              stage_info(s + 2, [(11, "Exchange")], 4), stage_info(s + 3, STATE_STAGE, 8)]
    props = ({"spark.job.description": f"\nid = q\nrunId = r\nbatch = {batch}"} if by_description else
             {"streaming.sql.batchId": str(batch), "spark.job.description": f"\nid = q\nrunId = r\nbatch = {batch}",
              "sql.streaming.queryId": "q", "spark.sql.execution.id": "7"})
    out = [job_start(job_id, t0, stages, props)]
    out += [task_end(s, 100, cpu_ns=80_000_000, records_in=1000, sw_records=1000, sw_ns=5_000_000) for _ in range(6)]
    out.append(stage_completed(stage_info(s, READ_STAGE, 6, t0 + 5, t0 + 400)))
    out += [task_end(s + 1, 250, cpu_ns=50_000_000, gc_ms=10, sr_records=1500, wait_ms=2, sw_records=900)
            for _ in range(4)]
    out.append(stage_completed(stage_info(s + 1, PARSE_STAGE, 4, t0 + 400, t0 + 900)))
    out += [task_end(s + 3, 150, cpu_ns=100_000_000, result=2048, sr_records=600) for _ in range(8)]
    out.append(stage_completed(stage_info(s + 3, STATE_STAGE, 8, t0 + 900, t0 + 1500)))
    out.append(job_end(job_id, t0 + 1600))
    return out


def synthetic_log() -> list[str]:
    events = [{"Event": "SparkListenerLogStart", "Spark Version": "4.0.0"},
              {"Event": "SparkListenerEnvironmentUpdate", "JVM Information": {}, "Spark Properties": {}},
              # a job of no batch (an executor's warm-up), and one failed task attempt in it
              job_start(0, 500, [stage_info(0, [(0, "Scan ExistingRDD")], 1)], {}),
              task_end(0, 30, reason="ExceptionFailure"), task_end(0, 40),
              stage_completed(stage_info(0, [(0, "Scan ExistingRDD")], 1, 505, 560)), job_end(0, 570)]
    events += batch_lines(0, 1, 1, 1_000)
    events += batch_lines(1, 2, 5, 10_000)
    events += batch_lines(2, 3, 9, 20_000, by_description=True)
    # an event of the SQL listener (a class name with its package): not read
    events.append({"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd", "executionId": 7})
    return [json.dumps(e, separators=(",", ":")) for e in events]


def progress(batch: int, rows: int, trigger: int, add_batch: int) -> dict:
    return {"batch_id": batch, "timestamp": "2026-11-28T10:00:00.000Z", "input_rows": rows,
            "duration_ms": {"addBatch": add_batch, "getBatch": 0, "latestOffset": 5, "queryPlanning": 20,
                            "triggerExecution": trigger, "walCommit": 10}}


PROGRESS = [progress(0, 6000, 5000, 4000), progress(1, 6000, 2000, 1900), progress(2, 6000, 2200, 2100),
            progress(3, 0, 50, 0)]
SINKS = {0: SinkTimers(3.0, 0.5, 0.3, 3.8), 1: SinkTimers(1.7, 0.05, 0.1, 1.85), 2: SinkTimers(1.7, 0.15, 0.1, 1.95)}


# -- the tests -----------------------------------------------------------------------------------------
def test_the_event_log_is_turned_on_through_pyspark_submit_args(tmp_path: Path) -> None:
    d = tmp_path / "event log"
    words = shlex.split(event_log_submit_args(d))
    assert words[-1] == "pyspark-shell"
    confs = dict(w.split("=", 1) for w in words[1:-1:2])
    assert words[:-1:2] == ["--conf"] * 4
    assert confs == {"spark.eventLog.enabled": "true", "spark.eventLog.dir": d.resolve().as_uri(),
                     "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}
    # what was set already stays, before ours, and pyspark-shell stays last, once
    kept = shlex.split(event_log_submit_args(d, "--driver-memory 2g pyspark-shell"))
    assert kept[:2] == ["--driver-memory", "2g"] and kept.count("pyspark-shell") == 1 and kept[-1] == "pyspark-shell"


def test_the_event_log_is_found_as_one_file_or_rolled(tmp_path: Path) -> None:
    single = tmp_path / "single"
    single.mkdir()
    (single / "local-1.inprogress").write_text("{}\n")  # a driver that never stopped its context
    assert event_log_files(single) == [single / "local-1.inprogress"]
    # Spark 4's default layout (rolling on): the events files in their order, not the status file
    rolled = tmp_path / "rolled" / "eventlog_v2_local-2"
    rolled.mkdir(parents=True)
    for name in ("appstatus_local-2", "events_10_local-2", "events_2_local-2"):
        (rolled / name).write_text("")
    assert [p.name for p in event_log_files(tmp_path / "rolled")] == ["events_2_local-2", "events_10_local-2"]
    (tmp_path / "none").mkdir()
    with pytest.raises(SystemExit, match="expected one event log"):
        event_log_files(tmp_path / "none")
    (single / "local-3").write_text("")
    with pytest.raises(SystemExit, match="expected one event log"):
        event_log_files(single)
    zipped = tmp_path / "zipped"
    zipped.mkdir()
    (zipped / "local-4.zstd").write_text("")
    with pytest.raises(SystemExit, match="no uncompressed event log"):
        event_log_files(zipped)


def test_jobs_are_the_batches_by_their_property_or_description() -> None:
    assert batch_of({"streaming.sql.batchId": "12"}) == 12
    assert batch_of({"spark.job.description": "\nid = a\nrunId = b\nbatch = 3"}) == 3
    assert batch_of({"spark.job.description": "toArrow at x"}) is None
    log = parse_event_log(synthetic_log())
    assert [(j.job_id, j.batch_id, j.submitted_ms, j.completed_ms) for j in log.jobs] == [
        (0, None, 500, 570), (1, 0, 1_000, 2_600), (2, 1, 10_000, 11_600), (3, 2, 20_000, 21_600)]
    assert log.jobs[1].stage_ids == (1, 2, 3, 4) and log.jobs[1].result_stage == 4


def test_stages_sum_their_tasks_and_take_their_category_from_their_operators() -> None:
    log = parse_event_log(synthetic_log())
    # the skipped stages (3, 7, 11) never completed: not there
    assert [(s.stage_id, s.batch_id) for s in log.stages] == [
        (0, None), (1, 0), (2, 0), (4, 0), (5, 1), (6, 1), (8, 1), (9, 2), (10, 2), (12, 2)]
    by_id = {s.stage_id: s for s in log.stages}
    read, parse, state = by_id[5], by_id[6], by_id[8]
    assert read.ops == ("MicroBatchScan", "WholeStageCodegen (1)", "Exchange")
    # one per scope: the stage reads two exchanges (two scopes of one name), each RDD of a scope once
    assert state.ops == ("Exchange", "StateStoreRestore", "StateStoreSave", "Exchange", "MapInArrow", "Union")
    assert (read.category, parse.category, state.category) == ("read", "parse", "parse+state update")
    assert (read.is_result, parse.is_result, state.is_result) == (False, False, True)
    assert (read.num_tasks, read.submitted_ms, read.completed_ms) == (6, 10_005, 10_400)
    m = read.metrics
    assert (m.tasks, m.run_ms, m.cpu_ns, m.input_records, m.shuffle_write_records, m.shuffle_write_ns) == (
        6, 600, 480_000_000, 6000, 6000, 30_000_000)
    m = parse.metrics
    assert (m.run_ms, m.gc_ms, m.shuffle_read_records, m.shuffle_read_bytes, m.fetch_wait_ms, m.deserialize_ms) == (
        1000, 40, 6000, 60_000, 8, 12)
    assert (state.metrics.result_bytes, state.metrics.tasks) == (8 * 2048, 8)
    warmup = by_id[0]
    assert (warmup.category, warmup.metrics.tasks, warmup.metrics.failed, warmup.metrics.run_ms) == (
        "collect", 2, 1, 70)


def test_categories_never_guess() -> None:
    assert categorize(["MicroBatchScan", "MapInArrow", "Exchange"], False, "x") == "read+parse"
    assert categorize(["Exchange", "FlatMapGroupsInPandasWithState"], True, "x") == "state update"
    assert categorize(["Exchange", "TransformWithStateInPySpark"], True, "x") == "state update"
    assert categorize(["Exchange", "StreamingSymmetricHashJoin"], True, "x") == "state update"
    assert categorize(["Exchange", "WholeStageCodegen (3)"], True, "x") == "collect"
    assert categorize(["Exchange", "WholeStageCodegen (3)"], False, "count at x:1") == "other count at x:1"
    assert stage_ops({"RDD Info": [{"RDD ID": 2, "Scope": '{"id":"9","name":"B"}'},
                                   {"RDD ID": 1, "Scope": '{"id":"8","name":"A"}'},
                                   {"RDD ID": 3, "Name": "no scope"}, {"RDD ID": 4, "Scope": "not json"}]}) == ("A", "B")


def test_a_batch_s_jobs_wall_is_the_union_of_their_spans() -> None:
    jobs = (JobRow(1, 0, 0, 100, (1,)), JobRow(2, 0, 50, 150, (2,)), JobRow(3, 0, 200, 260, (3,)),
            JobRow(4, 0, 210, 230, (4,)), JobRow(5, 0, 300, None, (5,)))
    assert BatchProfile(0, 1, 0, 0, jobs, (), None).jobs_wall_ms == 210


def test_sink_timers_come_from_the_heartbeat_snapshots() -> None:
    beats = [{"status": "starting"}, {"batch_id": 0, "replayed": True, "compute_seconds": 9, "encode_seconds": 9,
                                      "commit_seconds": 9, "sink_seconds": 27},
             {"batch_id": 1, "replayed": False, "compute_seconds": 1.5, "encode_seconds": 0.2, "commit_seconds": 0.1,
              "sink_seconds": 1.8}, None]
    assert sink_timers(beats) == {1: SinkTimers(1.5, 0.2, 0.1, 1.8)}


def rows_of(rows):
    return {(r.section, r.name): r for r in rows}


def test_a_run_s_rows_leave_out_the_first_batch() -> None:
    profiles = batch_profiles(parse_event_log(synthetic_log()), PROGRESS, SINKS)
    assert [p.batch_id for p in profiles] == [0, 1, 2]  # batch 3 read nothing
    rows, measured = run_rows(profiles)
    assert [b.batch_id for b in measured] == [1, 2]
    r = rows_of(rows)
    records, task_ms = 12_000, 2 * (600 + 1000 + 1200)
    assert [name for section, name in r if section == EXECUTOR] == [
        "read", "parse", "parse+state update", "of which shuffle write", "of which shuffle fetch wait", "all stages"]
    assert r[EXECUTOR, "read"].us_per_record == pytest.approx(2 * 600 * 1000 / records)
    assert r[EXECUTOR, "parse"].share == pytest.approx(2000 / task_ms)
    assert r[EXECUTOR, "read"].detail == "1 stage(s), 6 tasks; JVM CPU 80%, GC 0% of run; reads 1x the input records"
    assert r[EXECUTOR, "of which shuffle write"].us_per_record == pytest.approx(2 * 30 * 1000 / records)
    assert r[EXECUTOR, "all stages"].detail == "3 stages, 18 tasks per batch"
    # the wall: jobs 1.6 s each; triggerExecution 2.0 + 2.2 s; the parts add up to it
    trig = 4200
    assert r[DRIVER, "Spark jobs"].us_per_record == pytest.approx(3200 * 1000 / records)
    assert r[DRIVER, "driver between jobs"].share == pytest.approx(1000 / trig)
    assert r[DRIVER, "- toArrow beyond its jobs"].us_per_record == pytest.approx((3400 - 3200) * 1000 / records)
    assert r[DRIVER, "- encode"].us_per_record == pytest.approx(200 * 1000 / records)
    assert r[DRIVER, "- sink after its commit"].us_per_record == pytest.approx((4000 - 3800) * 1000 / records)
    assert r[DRIVER, "- Spark outside the sink"].us_per_record == pytest.approx(200 * 1000 / records)
    parts = [r[DRIVER, n].share for n in ("- toArrow beyond its jobs", "- encode", "- produce+commit",
                                           "- sink after its commit", "- Spark outside the sink")]
    assert sum(parts) == pytest.approx(r[DRIVER, "driver between jobs"].share)
    assert r[DRIVER, "triggerExecution"].share == 1.0


def test_batches_the_heartbeat_poll_missed_stay_out_of_the_driver_rows_only() -> None:
    profiles = batch_profiles(parse_event_log(synthetic_log()), PROGRESS, {k: v for k, v in SINKS.items() if k != 2})
    r = rows_of(run_rows(profiles)[0])
    assert r[DRIVER, "triggerExecution"].detail.startswith("1 batches")
    assert r[DRIVER, "Spark jobs"].us_per_record == pytest.approx(1600 * 1000 / 6000)
    assert r[EXECUTOR, "all stages"].us_per_record == pytest.approx(5600 * 1000 / 12_000)
    assert run_rows(profiles[:1]) == ([], [])


def test_summary_over_runs() -> None:
    profiles = batch_profiles(parse_event_log(synthetic_log()), PROGRESS, SINKS)
    one, _ = run_rows(profiles)
    other = [r for r in one if r.name != "parse"]
    table = {(row[0], row[1]): row for row in summarize([one, other, one])}
    assert table[EXECUTOR, "parse"][2:8] == ["0.0", "166.7", "166.7", "0%", "36%", "36%"]
    assert table[EXECUTOR, "read"][2:5] == ["100.0", "100.0", "100.0"]


def test_kept_runs_report_again(tmp_path: Path) -> None:
    from bench.stages import RunData

    lines = synthetic_log()
    parts = [tmp_path / "events_1_local-1", tmp_path / "events_2_local-1"]  # a rolled log: kept as one file
    parts[0].write_text("\n".join(lines[:9]) + "\n")
    parts[1].write_text("\n".join(lines[9:]) + "\n")
    keep(RunData(parts, PROGRESS, SINKS), tmp_path / "kept" / "user_activity" / "run-0")
    again = load_kept(tmp_path / "kept" / "user_activity" / "run-0")
    assert again.sinks == SINKS and again.progress == PROGRESS
    assert profile(again) == batch_profiles(parse_event_log(synthetic_log()), PROGRESS, SINKS)


def test_events_option() -> None:
    assert parse_events("", ["user_activity", "orders"]) == {"user_activity": 300_000, "orders": 100_000}
    assert parse_events("20000", ["orders"]) == {"orders": 20_000}
    assert parse_events("orders=5,page_stats=7", ["orders", "sessions"]) == {"orders": 5, "sessions": 100_000}


STAND_IN = '''
import json, os, shlex, sys, time
from pathlib import Path
words = shlex.split(os.environ["PYSPARK_SUBMIT_ARGS"])
conf = dict(w.split("=", 1) for w in words[1:-1:2])
assert conf["spark.eventLog.enabled"] == "true" and words[-1] == "pyspark-shell"
rolled = Path(conf["spark.eventLog.dir"].removeprefix("file://")) / "eventlog_v2_local-1"
rolled.mkdir()
(rolled / "events_1_local-1").write_text(Path(sys.argv[1]).read_text())
app = Path(os.environ["STREAMOPS_HOME"]) / "apps" / sys.argv[2]
app.mkdir(parents=True)
(app / "batches.jsonl").write_text(sys.argv[4])
batches = list(json.loads(sys.argv[3]).items())
for i, (b, t) in enumerate(batches):
    (app / ".driver.json.tmp").write_text(json.dumps({"batch_id": int(b), "replayed": False, **t}))
    (app / ".driver.json.tmp").replace(app / "driver.json")
    if i < len(batches) - 1:  # each heartbeat held long enough for a poller on a busy machine; the last not at all
        time.sleep(1.0)
os._exit(0)
'''


def test_a_run_reads_the_event_log_the_heartbeats_and_the_progress(tmp_path: Path, monkeypatch) -> None:
    """``run_driver`` with a stand-in for the driver (no Spark): it finds the JVM's settings in
    ``PYSPARK_SUBMIT_ARGS`` and writes a rolled event log, the progress and a heartbeat per batch, the
    last one as it exits (which only a read after the exit sees)."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from bench import stages

    log = tmp_path / "events.jsonl"
    log.write_text("\n".join(synthetic_log()) + "\n")
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    timers = {b: {"compute_seconds": t.compute, "encode_seconds": t.encode, "commit_seconds": t.commit,
                  "sink_seconds": t.sink} for b, t in SINKS.items()}
    progress = "".join(json.dumps(p) + "\n" for p in PROGRESS)
    real_popen = subprocess.Popen

    def popen(argv, **kwargs):
        assert argv[1:5] == ["-m", "streamops.spark.driver", "--app", "user_activity"]
        return real_popen([sys.executable, str(script), str(log), "user_activity", json.dumps(timers), progress],
                          **kwargs)

    monkeypatch.setattr(stages.subprocess, "Popen", popen)
    home = tmp_path / "home"
    home.mkdir()
    settings = SimpleNamespace(state_dir=home, host="127.0.0.1", env=lambda: {"STREAMOPS_HOME": str(home)})
    data = stages.run_driver(settings, "user_activity", 4000, "local[2]", tmp_path / "eventlog")
    assert [p.name for p in data.event_log] == ["events_1_local-1"]
    assert data.sinks == SINKS and data.progress == PROGRESS
    assert profile(data) == batch_profiles(parse_event_log(synthetic_log()), PROGRESS, SINKS)
