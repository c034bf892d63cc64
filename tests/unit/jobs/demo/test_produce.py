"""``streamops produce`` without a broker: argument checks, the token bucket, the progress bar."""

from __future__ import annotations

import ast
import io
import json
import re
from typing import ClassVar

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
        pytest.param(["--events", "10", "--users", "5", "--bootstrap", "localhost"], "--bootstrap", id="no-port"),
        pytest.param(["--events", "10", "--users", "5", "--bootstrap", "h:99999"], "--bootstrap", id="bad-port"),
    ],
)
def test_usage_errors_exit_2_and_name_the_option(argv: list[str], needle: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["produce", "user-events", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "usage: streamops produce" in err and needle in err, err


def _spec_topics() -> list[str]:
    """Every topic the repo's apps read (a user's apps too)."""
    from streamops.settings import default_repo
    from streamops.spec import default_spec_path, load_specs

    return sorted({t for s in load_specs(default_spec_path(default_repo())).values() for t in s.input_topics})


@pytest.mark.parametrize(("target", "argv", "needle"), [
    ("some-topic", ["--events", "10"], "'some-topic' is neither an app nor a topic an app reads"),
    ("some-topic", ["--events", "10"], "topics they read: " + ", ".join(_spec_topics())),
    ("user-events", ["--users", "5"], "give exactly one of --events N or --from-file"),
    ("page_stats", [], "exactly one of --events N or --from-file"),
    ("page_stats", ["--events", "1", "--from-file", "x.jsonl"], "exactly one of --events N or --from-file"),
    ("page_stats", ["--from-file", "/nonexistent/x.jsonl"], "--from-file /nonexistent/x.jsonl"),
    ("page_stats", ["--from-file", "x.jsonl", "--bad-ratio", "0.1"], "--bad-ratio go to the job's generate()"),
    ("page_stats", ["--events", "10", "--skew", "zipf:1"], ("PageStats.generate() does not take skew (it takes "
                                                           "users, bad_ratio)")),
    ("orders", ["--events", "10", "--users", "3"], "Orders.generate() does not take users (it takes bad_ratio)"),
    ("user-events", ["--events", "10", "--users", "5", "--skew", "zipf:0"], ("--skew: user_activity: "
                                                                             "UserActivity.generate() refused them")),
    ("user-events", ["--events", "10", "--skew", "pareto:2"], "skew must be 'zipf:S'"),
    ("user_activity", ["--events", "10", "--skew", "zipf"], "--skew"),
])
def test_usage_errors_found_by_the_command_exit_2(target: str, argv: list[str], needle: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Found before any broker is asked (none runs here): the target, the sources, the options the
    job's generate() takes and refuses."""
    assert main(["produce", target, *argv, "--bootstrap", "127.0.0.1:1"]) == 2
    assert needle in capsys.readouterr().err


def test_missing_topic_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["produce", "--events", "1", "--users", "1"])
    assert exc.value.code == 2


def test_help_names_the_partitioner_and_what_it_will_not_do(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["produce", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "never altered" in out and "--skew" in out
    assert "Kafka's default partitioner" in out and "toPositive(murmur2(key)) % partitions" in out
    assert "one key stays in one partition" in out


# -- targets resolved through the spec (a throwaway checkout) -----------------------------------------
@pytest.fixture
def job_repo(tmp_path, monkeypatch: pytest.MonkeyPatch):
    from tests.fixtures.job_repo import NO_GENERATE, TWO_TOPICS, write_repo

    root, _pkg = write_repo(tmp_path / "repo", {"two": TWO_TOPICS.format(A="clicks", B="views"),
                                                "nogen": NO_GENERATE},
                            {"two_topics": ("two", ["clicks", "views"], 4), "nogen": ("nogen", ["raw"], 2),
                             "other": ("nogen", ["views"], 2)})
    monkeypatch.setenv("STREAMOPS_REPO", str(root))
    monkeypatch.chdir(tmp_path)  # nothing of the real checkout on the way
    return root


@pytest.mark.parametrize(("target", "argv", "needle"), [
    ("nogen", ["--events", "10"], "nogen's job (NoGenerate in testjobs_"),
    ("raw", ["--events", "10"], "declares no generate(): use --from-file F.jsonl"),
    ("views", ["--events", "10"], "views is read by apps with different jobs: two_topics (testjobs_"),
    ("two_topics", ["--from-file", "a.jsonl"], ("two_topics reads several topics (clicks, views): give "
                                                "--from-file TOPIC=F.jsonl")),
    ("clicks", ["--from-file", "views=a.jsonl"], "this run feeds clicks, not views"),
    ("two_topics", ["--from-file", "clicks=a.jsonl", "--from-file", "clicks=b.jsonl"], "two files for clicks"),
])
def test_the_app_of_a_topic_and_its_generator_are_found_in_the_spec(job_repo, target: str, argv: list[str],
                                                                      needle: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (job_repo.parent / "a.jsonl").write_text('{"user": "u"}\n')
    (job_repo.parent / "b.jsonl").write_text('{"user": "u"}\n')
    assert main(["produce", target, *argv, "--bootstrap", "127.0.0.1:1"]) == 2
    assert needle in capsys.readouterr().err


def test_generated_records_feed_every_input_topic_of_an_app_or_the_one_named(job_repo) -> None:
    from streamops.cli.produce import _generated, resolve_target
    from streamops.settings import Settings
    from streamops.spec import default_spec_path, load_job, load_specs

    settings = Settings.from_env()
    specs = load_specs(default_spec_path(settings.repo))
    app = resolve_target(specs, "two_topics")
    job_cls = load_job(app.spec, settings.repo)
    both = list(_generated(job_cls, app.spec, app, 300, 1, {}))
    assert app.topics == ("clicks", "views") and len(both) == 300
    assert {t for t, _k, _v in both} == {"clicks", "views"}
    one = resolve_target(specs, "clicks")
    assert one.spec.name == "two_topics" and one.topics == ("clicks",)
    only = list(_generated(job_cls, one.spec, one, 300, 1, {}))
    assert only == [r for r in both if r[0] == "clicks"]
    assert list(_generated(job_cls, app.spec, app, 300, 1, {"users": 3})) != both


#: a job whose generate() refuses the options it is given, naming each one's type and value
ECHO_OPTIONS = """
import json

from streamops.job import Job


class EchoOptions(Job):
    def parse(self, record):
        return {"k": "x"}

    def key(self, event):
        return event["k"]

    def initial(self, key):
        return 0

    def update(self, key, state, events):
        return state + len(events)

    def generate(self, events, seed, *, users=None, bad_ratio=None, skew=None):
        given = {"users": users, "bad_ratio": bad_ratio, "skew": skew}
        raise ValueError("GOT " + json.dumps({k: [type(v).__name__, v] for k, v in given.items() if v is not None}))
"""
#: the table in docs/writing-a-job.md "Sample input": `--flag value` | `keyword=value` (a/the `type` ...
DOCUMENTED_OPTION = re.compile(r"^\| `(--[\w-]+) ([^`]+)` \| `(\w+)=([^`]+)` \((?:an?|the) `(\w+)`", re.MULTILINE)


def test_generate_options_arrive_as_the_docs_say(tmp_path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """What ``produce --users/--bad-ratio/--skew`` hand a job's generate(), through the command
    itself: the docs' table of them (``--skew zipf:1.2`` is the string ``"zipf:1.2"``) is true."""
    from streamops.cli.produce import GENERATE_OPTIONS
    from tests.fixtures.job_repo import REPO, write_repo

    rows = DOCUMENTED_OPTION.findall((REPO / "docs" / "writing-a-job.md").read_text())
    assert {(flag, kw) for flag, _arg, kw, _value, _type in rows} == set(GENERATE_OPTIONS.items()), rows
    root, _pkg = write_repo(tmp_path / "repo", {"echo": ECHO_OPTIONS}, {"echo": ("echo", ["echo-in"], 1)})
    monkeypatch.setenv("STREAMOPS_REPO", str(root))
    monkeypatch.chdir(tmp_path)
    for flag, arg, kw, value, type_name in rows:
        assert main(["produce", "echo", "--events", "1", flag, arg, "--bootstrap", "127.0.0.1:1"]) == 2
        err = capsys.readouterr().err
        assert f"{flag}: echo: EchoOptions.generate() refused them: GOT " in err, err
        got = json.loads(err.split("refused them: GOT ", 1)[1].splitlines()[0])
        assert got == {kw: [type_name, ast.literal_eval(value)]}, (flag, arg, got)


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


# -- several topics in one run (a fake client: what would be sent where) --------------------------------
class FakeProducer:
    sent: ClassVar[list[tuple[str, bytes | None, bytes | None, int]]] = []

    def __init__(self, conf: dict) -> None:
        assert conf["partitioner"] == "murmur2_random"  # librdkafka's Java-compatible murmur2
        FakeProducer.sent = []

    def produce(self, topic, value, key, partition) -> None:
        FakeProducer.sent.append((topic, key, value, partition))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        return 0

    def purge(self) -> None:
        pass


def test_produce_to_topics_counts_per_topic_and_round_robins_keyless_records_per_topic(monkeypatch) -> None:
    from streamops.kafka import produce as mod

    monkeypatch.setattr(mod, "Producer", FakeProducer)
    records = [("a", None, b"1"), ("b", None, b"2"), ("a", b"k", b"3"), ("a", None, b"4"), ("b", None, b"5"),
               ("a", None, b"6")]
    result = mod.produce_to_topics("127.0.0.1:1", records, partitions={"a": 2, "b": 3})
    assert result.records == 6 and result.per_topic == {"a": 4, "b": 2} and result.topic == "a, b"
    assert [(t, p) for t, _k, _v, p in FakeProducer.sent] == [("a", 0), ("b", 0), ("a", -1), ("a", 1), ("b", 1),
                                                               ("a", 0)]
    with pytest.raises(ValueError, match="a record for topic 'c', which is not one of a, b"):
        mod.produce_to_topics("127.0.0.1:1", [("c", None, b"x")], partitions={"a": 2, "b": 3})
    one = mod.produce("127.0.0.1:1", "a", [(None, b"x"), (b"k", b"y")], partitions=2)
    assert one.per_topic == {"a": 2} and one.topic == "a"
