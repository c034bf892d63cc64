"""``streamops produce`` without a broker: argument checks, the token bucket, the progress bar."""

from __future__ import annotations

import io

import pytest

from streamops.cli import main
from streamops.cli.produce import ProgressBar
from streamops.kafka.produce import PACE_STEP_S, TokenBucket, paced_wait


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize(
    "argv,needle",
    [
        pytest.param(["--events", "-1", "--users", "5"], "--events", id="negative-events"),
        pytest.param(["--events", "ten", "--users", "5"], "--events", id="non-int-events"),
        pytest.param(["--events", "10", "--users", "0"], "--users", id="zero-users"),
        pytest.param(["--events", "10", "--users", "5", "--rate", "0"], "--rate", id="zero-rate"),
        pytest.param(["--events", "10", "--users", "5", "--rate", "-3"], "--rate", id="negative-rate"),
        pytest.param(["--events", "10", "--users", "5", "--rate", "nan"], "--rate", id="nan-rate"),
        pytest.param(["--events", "10", "--users", "5", "--rate", "inf"], "--rate", id="inf-rate"),
        pytest.param(["--events", "10", "--users", "5", "--bad-ratio", "1.5"], "--bad-ratio", id="ratio>1"),
        pytest.param(["--events", "10", "--users", "5", "--bad-ratio", "-0.1"], "--bad-ratio", id="ratio<0"),
        pytest.param(["--events", "10", "--users", "5", "--skew", "zipf:0"], "--skew", id="zipf-zero"),
        pytest.param(["--events", "10", "--users", "5", "--skew", "pareto:2"], "--skew", id="unknown-skew"),
        pytest.param(["--events", "10", "--users", "5", "--skew", "zipf"], "--skew", id="zipf-no-exponent"),
        pytest.param(["--events", "10", "--users", "5", "--partitions", "0"], "--partitions", id="zero-partitions"),
        pytest.param(["--events", "10", "--users", "5", "--bootstrap", "localhost"], "--bootstrap", id="no-port"),
        pytest.param(["--events", "10", "--users", "5", "--bootstrap", "h:99999"], "--bootstrap", id="bad-port"),
    ],
)
def test_usage_errors_exit_2_and_name_the_option(argv: list[str], needle: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["produce", "some-topic", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage: streamops produce" in err and needle in err, err


@pytest.mark.parametrize(("target", "argv", "needle"), [
    ("some-topic", ["--users", "5"], "--events N is required"),
    ("some-topic", ["--events", "10"], "needs --users K"),
    ("some-topic", ["--from-file", "x.jsonl"], "--from-file needs an app"),
    ("page_stats", ["--events", "10", "--users", "5"], "--users apply to a raw topic"),
    ("page_stats", [], "exactly one of --events N or --from-file"),
    ("page_stats", ["--events", "1", "--from-file", "x.jsonl"], "exactly one of --events N or --from-file"),
    ("page_stats", ["--from-file", "/nonexistent/x.jsonl"], "--from-file /nonexistent/x.jsonl"),
])
def test_usage_errors_found_by_the_command_exit_2(target: str, argv: list[str], needle: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Which options apply depends on whether the target is an app or a raw topic."""
    assert main(["produce", target, *argv]) == 2
    assert needle in capsys.readouterr().err


def test_missing_topic_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["produce", "--events", "1", "--users", "1"])
    assert exc.value.code == 2


def test_help_says_what_it_will_not_do(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["produce", "--help"])
    out = capsys.readouterr().out
    assert "never altered" in out and "--skew" in out


# -- token bucket -------------------------------------------------------------------------------
def test_token_bucket_allows_a_burst_then_paces_at_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(100, burst=5, clock=clock)
    assert [bucket.take() for _ in range(5)] == [0.0] * 5
    assert bucket.take() == pytest.approx(0.01)
    clock.t += 0.01
    assert bucket.take() == pytest.approx(0.01)


def test_token_bucket_long_run_average_is_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(2000, clock=clock)
    start = clock.t
    for _ in range(4000):
        clock.t += bucket.take()  # the caller sleeps exactly as told
    assert clock.t - start == pytest.approx((4000 - bucket.burst) / 2000)
    assert clock.t - start >= 1.9


def test_pacing_sleeps_in_steps_and_keeps_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1000, clock=clock)
    start = clock.t
    waits = []
    for _ in range(3000):
        w = paced_wait(bucket)
        if w:
            waits.append(w)
            clock.t += w  # the caller sleeps as told
        clock.t += 0.00002  # sending one record takes a little time
    assert min(waits) >= PACE_STEP_S  # never a sub-step sleep per record (that would spin)
    assert len(waits) <= 3000 * 0.001 / PACE_STEP_S + 1
    assert clock.t - start == pytest.approx((3000 - bucket.burst) / 1000, abs=PACE_STEP_S)


def test_token_bucket_does_not_save_up_beyond_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, burst=2, clock=clock)
    clock.t += 3600
    assert [bucket.take() > 0 for _ in range(3)] == [False, False, True]


@pytest.mark.parametrize("rate", [0, -1, float("nan")])
def test_token_bucket_rejects_a_non_positive_rate(rate: float) -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate)


# -- progress bar -------------------------------------------------------------------------------
class TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_redraws_at_most_10_times_per_second_on_a_tty() -> None:
    clock, out = FakeClock(), TTY()
    bar = ProgressBar(1000, out, clock=clock)
    for i in range(1000):
        clock.t += 0.001  # one second in total
        bar.update(i + 1)
    bar.close()
    draws = out.getvalue().count("\r")
    assert 9 <= draws <= 12  # ~10 per second plus the final draw
    last = out.getvalue().rsplit("\r", 1)[1]
    assert "100.0%" in last and "1,000/1,000" in last and last.endswith("\n")


def test_progress_bar_writes_plain_lines_when_not_a_tty() -> None:
    clock, out = FakeClock(), io.StringIO()
    bar = ProgressBar(50, out, clock=clock)
    for i in range(50):
        clock.t += 0.1  # five seconds
        bar.update(i + 1)
    bar.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert 5 <= len(lines) <= 7
    assert lines[-1].startswith("[" + "#" * 30 + "]")


def test_progress_bar_render_midway() -> None:
    clock = FakeClock()
    bar = ProgressBar(200, io.StringIO(), width=10, clock=clock)
    clock.t += 2
    text = bar.render(100)
    assert text.startswith("[#####.....]  50.0%  100/200  50 ev/s  ETA")
    assert "2s" in text


def test_progress_bar_with_zero_total() -> None:
    bar = ProgressBar(0, io.StringIO())
    assert "100.0%" in bar.render(0)
