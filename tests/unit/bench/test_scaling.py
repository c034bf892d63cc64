"""bench/scaling.py's pure parts: /proc's stat lines, CPU between two moments, a side's rates and CPU."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.scaling import CLK_TCK, CpuSample, Side, cpu_at, descendants, proc_cpu, proc_ppid, side_of


def stat_line(pid: int, comm: str, ppid: int, utime: int, stime: int) -> str:
    """A /proc/PID/stat line (proc(5)): utime and stime are fields 14 and 15, in clock ticks."""
    fields = ["S", str(ppid), *["0"] * 9, str(utime), str(stime), *["0"] * 30]
    return f"{pid} ({comm}) " + " ".join(fields)


def test_proc_stat_is_read_after_the_command_even_with_spaces_and_parentheses() -> None:
    line = stat_line(42, "java (main) x", 7, utime=3 * CLK_TCK, stime=CLK_TCK // 2)
    assert proc_ppid(line) == 7
    assert proc_cpu(line) == pytest.approx(3.5)


def test_descendants_follow_the_tree_not_the_pids() -> None:
    procs = {1: (0, 0.0, "init"), 10: (1, 0.0, "driver"), 11: (10, 0.0, "jvm"), 12: (11, 0.0, "getconf"),
             20: (1, 0.0, "other"), 21: (20, 0.0, "child of other")}
    assert descendants(procs, 10) == {11, 12}
    assert descendants(procs, 12) == set()


def test_cpu_between_samples_is_interpolated() -> None:
    samples = [CpuSample(10.0, 1.0, 2.0, 4.0, 1.0, 0.0), CpuSample(12.0, 3.0, 2.0, 8.0, 3.0, 4.0)]
    mid = cpu_at(samples, 11.5)
    assert (mid.driver_py, mid.driver_jvm, mid.executors, mid.executors_py, mid.broker) == pytest.approx(
        (2.5, 2.0, 7.0, 2.5, 3.0))
    assert cpu_at(samples, 5.0) == samples[0] and cpu_at(samples, 20.0) == samples[-1]


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat()


def test_a_side_counts_the_steady_batches_only_for_its_rates_and_cpu() -> None:
    t0 = 1_000_000.0
    progress = [
        {"timestamp": _iso(t0), "input_rows": 0, "duration_ms": {"triggerExecution": 100}},  # no input: left out
        {"timestamp": _iso(t0 + 1), "input_rows": 10_000, "duration_ms": {"triggerExecution": 4000}},  # first
        {"timestamp": _iso(t0 + 5), "input_rows": 10_000, "duration_ms": {"triggerExecution": 1000}},
        {"timestamp": _iso(t0 + 6), "input_rows": 10_000, "duration_ms": {"triggerExecution": 1000}},
    ]
    samples = [CpuSample(t0, 0.0, 0.0, 0.0), CpuSample(t0 + 5, 1.0, 10.0, 20.0, 5.0, 2.0),
               CpuSample(t0 + 7, 1.5, 12.0, 30.0, 11.0, 3.0)]
    side = side_of(2, progress, samples)
    assert side.records == 30_000 and side.batches == 3
    assert side.rate == pytest.approx(30_000 / 6) and side.steady_rate == pytest.approx(20_000 / 2)
    assert side.per_executor == pytest.approx(5_000)
    assert (side.driver_py_cpu, side.driver_jvm_cpu, side.executor_cpu) == pytest.approx((0.5, 2.0, 10.0))
    assert (side.executor_py_cpu, side.broker_cpu) == pytest.approx((6.0, 1.0))
    assert side.per_batch(side.driver_jvm_cpu) == pytest.approx(1.0)
    assert side.per_million(side.executor_cpu) == pytest.approx(500.0)


def test_a_side_with_one_batch_has_no_steady_part() -> None:
    progress = [{"timestamp": _iso(1.0), "input_rows": 5, "duration_ms": {"triggerExecution": 10}}]
    with pytest.raises(SystemExit, match="1 batch"):
        side_of(1, progress, [CpuSample(0.0, 0.0, 0.0, 0.0)])


def test_thread_kinds_drop_the_trailing_number_only() -> None:
    from bench.scaling import thread_group

    assert thread_group("GC Thread#1") == thread_group("GC Thread#0") == "GC Thread"
    assert thread_group("C2 CompilerThre") == "C2 CompilerThre"
    assert thread_group("pool-3-thread-12") == "pool-3-thread"
    assert thread_group("12") == "12"  # nothing but a number keeps it
    assert thread_group("Executor task l") == thread_group("Executor task i") == "Executor task"


def test_thread_cpu_between_two_moments_takes_the_samples_around_them() -> None:
    from bench.scaling import threads_between

    samples = [(10.0, {"GC Thread": 1.0}), (11.0, {"GC Thread": 1.5, "VM Thread": 0.2}),
               (13.0, {"GC Thread": 2.5, "VM Thread": 0.7, "stream executio": 3.0})]
    assert threads_between(samples, 10.5, 12.0) == pytest.approx(
        {"GC Thread": 1.5, "VM Thread": 0.7, "stream executio": 3.0})
    assert threads_between(samples, 11.0, 11.0) == {}  # nothing spent between: left out
    assert threads_between(samples, 5.0, 10.5) == pytest.approx({"GC Thread": 0.5, "VM Thread": 0.2})
    assert threads_between([], 0.0, 1.0) == {}


def test_this_process_threads_are_read_by_name() -> None:
    import os
    import threading

    from bench.scaling import thread_cpus

    ready, done = threading.Event(), threading.Event()

    def spin() -> None:
        ready.set()
        done.wait()

    t = threading.Thread(target=spin, name="named-thread")
    t.start()
    ready.wait()
    try:
        threads = thread_cpus(os.getpid())
        assert threading.get_native_id() in threads and t.native_id in threads
        assert all(cpu >= 0.0 for _name, cpu in threads.values())
    finally:
        done.set()
        t.join()
    assert thread_cpus(-1) == {}


def test_a_run_in_windows_splits_the_jit_from_the_rest_per_batch() -> None:
    from bench.scaling import windows_of

    t0 = 1_000_000.0
    bs = [{"timestamp": _iso(t0 + i), "input_rows": 10, "duration_ms": {"triggerExecution": 500 + i}} for i in range(12)]
    # CPU so far by thread kind: the driver's C2 and query thread, an executor's C1 and tasks
    at = lambda t, c2, q, c1, tasks: (t, {"driver: C2 CompilerThre": c2, "driver: stream executio": q,
                                          "executor: C1 CompilerThre": c1, "executor: Executor task": tasks})
    samples = [at(t0 + 0.9, 0.0, 0.0, 0.0, 0.0), at(t0 + 9.6, 9.0, 4.5, 1.8, 9.0), at(t0 + 11.6, 10.0, 5.5, 2.0, 11.0)]
    first, second = windows_of(bs, samples)
    assert (first.first, first.last, second.first, second.last) == (1, 9, 10, 11)
    assert first.trigger_ms == 505  # the median of batches 1..9's 501..509
    assert (first.driver_jit, first.driver_rest, first.executor_jit, first.executor_rest) == pytest.approx(
        (1.0, 0.5, 0.2, 1.0))
    assert (second.driver_jit, second.driver_rest, second.executor_jit, second.executor_rest) == pytest.approx(
        (0.5, 0.5, 0.1, 1.0))


def _side(threads: dict[str, float], batches: int = 2) -> Side:
    return Side(1, 100, batches + 1, 10.0, 10.0, 100, batches, 0.0, sum(threads.values()), 0.0, jvm_threads=threads)


def test_the_thread_table_keeps_the_largest_kinds_of_each_side_and_adds_up_the_rest() -> None:
    from bench.scaling import thread_report

    runs = [_side({"driver: C2 CompilerThre": 2.0, "driver: stream executio": 1.0, "driver: VM Thread": 0.5,
                   "executor: Executor task": 4.0}),
            _side({"driver: C2 CompilerThre": 4.0, "driver: stream executio": 1.0, "driver: VM Thread": 0.3,
                   "executor: Executor task": 2.0})]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in thread_report({("this tree", 1): runs},
                                                                                        top=2).splitlines()[2:]]
    by_kind = {r[0]: r[3:] for r in rows}
    assert list(by_kind) == ["driver: C2 CompilerThre", "driver: stream executio", "driver: (other)",
                             "executor: Executor task", "executor: (other)"]
    assert by_kind["driver: C2 CompilerThre"] == ["1.000", "1.500", "2.000", "68%"]  # per batch; of 2.2 s median
    assert by_kind["driver: (other)"] == ["0.150", "0.200", "0.250", "9%"]  # VM Thread, the third kind
    assert by_kind["executor: Executor task"][:3] == ["1.000", "1.500", "2.000"]
    assert by_kind["executor: (other)"][:3] == ["0.000", "0.000", "0.000"]
