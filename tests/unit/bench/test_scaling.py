"""bench/scaling.py's pure parts: /proc's stat lines, CPU between two moments, a side's rates and CPU."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.scaling import CLK_TCK, CpuSample, cpu_at, descendants, proc_cpu, proc_ppid, side_of


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
