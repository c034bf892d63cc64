"""What a job's ``generate`` may yield, and how ``app lint`` feeds every input topic of an app."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from streamops.job import Job, JobDeclarationError, Record, Reject, topic_records
from streamops.state.lint import ONE_PARTITION, lint, order_dependence, sample_records
from tests.fixtures.job_repo import TWO_TOPICS, write_repo

REPO = Path(__file__).resolve().parents[2]


def test_pairs_go_to_the_first_topic_and_triples_to_theirs() -> None:
    items = [(b"k1", b"v1"), ("b", b"k2", b"v2"), (None, b"v3"), ("a", None, b"v4")]
    assert list(topic_records(items, ["a", "b"])) == [
        ("a", b"k1", b"v1"), ("b", b"k2", b"v2"), ("a", None, b"v3"), ("a", None, b"v4")]


@pytest.mark.parametrize(("item", "message"), [
    (("c", b"k", b"v"), r"record 1 is for topic 'c', which the app does not read \(its input topics: a, b\)"),
    ((b"only one",), r"record 1 must be \(key, value\) or \(topic, key, value\), got tuple of 1"),
    ([b"k", b"v"], r"record 1 must be .* got list"),
    (("a", b"k", b"v", b"extra"), "got tuple of 4"),
])
def test_a_record_of_another_shape_or_topic_is_named(item, message: str) -> None:
    with pytest.raises(JobDeclarationError, match=message):
        list(topic_records([(b"k", b"v"), item], ["a", "b"], source="X.generate()"))


def test_generate_options_are_read_from_the_signature() -> None:
    from jobs.orders import Orders
    from jobs.page_stats import PageStats
    from jobs.user_activity import UserActivity

    class Any_(Job):
        def generate(self, events, seed, **options):
            yield b"k", b"v"

    assert UserActivity.generate_options() == ("users", "bad_ratio", "skew")
    assert PageStats.generate_options() == ("users", "bad_ratio")
    assert Orders.generate_options() == ("bad_ratio",)
    assert Any_.generate_options() == ("*",)


def test_user_activity_options_reach_its_generator() -> None:
    from jobs.demo.generator import generate
    from jobs.user_activity import UserActivity

    got = list(UserActivity().generate(500, 1, users=7, bad_ratio=0.2, skew="zipf:1.5"))
    assert got == list(generate(500, 7, seed=1, bad_ratio=0.2, skew="zipf:1.5"))
    assert list(UserActivity().generate(400, 2)) == list(generate(400, 20, seed=2, bad_ratio=0.01))


def test_sample_records_of_two_topics_number_offsets_per_topic_and_partition() -> None:
    values = [("a", b"k", b"1"), ("b", b"k", b"2"), (b"k", b"3"), ("b", None, b"4"), ("b", None, b"5")]
    recs = sample_records(Job, ["a", "b"], 3, values)
    by_where = [(r.topic, r.partition, r.offset) for r in recs]
    p = recs[0].partition
    assert by_where == [("a", p, 0), ("b", p, 0), ("a", p, 1), ("b", 0, 0 if p else 1), ("b", 1, 0 if p != 1 else 1)]


# -- one key, one partition ------------------------------------------------------------------------
class Last(Job):
    """Keeps the last value: depends on order (no screen)."""

    def parse(self, record: Record):
        return Reject("empty") if not record.value else {"k": record.value.split(b":")[0].decode(), "v": record.value}

    def key(self, event) -> str:
        return event["k"]

    def initial(self, key: str):
        return None

    def update(self, key: str, state, events: Sequence):
        return events[-1]["v"].decode() if events else state


class Count(Last):
    def update(self, key: str, state, events: Sequence):
        return (state or 0) + len(events)


def _split_sample() -> list[Record]:
    # key "a" in partitions 0 and 1, "b" in partition 2
    return [Record("t", 0, 0, None, b"a:1"), Record("t", 1, 0, None, b"a:2"), Record("t", 2, 0, None, b"b:1"),
            Record("t", 2, 1, None, b"b:2")]


def test_a_key_in_several_partitions_fails_lint_for_an_order_dependent_job() -> None:
    report = lint(Last, _split_sample())
    failed = {c.name: c.detail for c in report.checks if not c.ok}
    assert list(failed) == [ONE_PARTITION]
    detail = failed[ONE_PARTITION]
    assert "1 of 2 keys have records in several partitions, e.g. 'a' in t/0, t/1" in detail
    assert "update() gives key 'a' another state when its events come in another order" in detail
    assert "Spark keeps a key's order only within a partition" in detail


def test_a_key_in_several_partitions_is_fine_for_an_order_independent_job() -> None:
    report = lint(Count, _split_sample())
    assert report.ok, report.checks
    (check,) = [c for c in report.checks if c.name == ONE_PARTITION]
    assert "fine for this job, its result does not depend on order" in check.detail


def test_order_dependence() -> None:
    from jobs.orders import Orders
    from jobs.page_stats import PageStats
    from jobs.user_activity import UserActivity

    assert order_dependence(UserActivity, []) is None
    assert "screen()" in (order_dependence(Orders, []) or "")
    assert "stream time" in (order_dependence(PageStats, []) or "")
    assert order_dependence(Count, _split_sample()) is None


# -- app lint of a two-topic job --------------------------------------------------------------------
def _lint_cli(root: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "STREAMOPS_REPO": str(root)}
    return subprocess.run([sys.executable, "-m", "streamops.cli", "app", "lint", *argv, "--json"], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120, check=False)


def test_app_lint_feeds_every_input_topic(tmp_path: Path) -> None:
    root, _ = write_repo(tmp_path / "repo", {"two": TWO_TOPICS.format(A="clicks", B="views")},
                         {"two_topics": ("two", ["clicks", "views"], 4)})
    r = _lint_cli(root, "two_topics", "--no-spark", "--events", "600", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["topics"] == {"clicks": 400, "views": 200} and report["records"] == 600
    (one,) = [c for c in report["checks"] if c["name"] == ONE_PARTITION]
    assert "keys have records in several partitions" in one["detail"]  # a user is in both topics
    assert "does not depend on order" in one["detail"]


def test_app_lint_from_files_per_topic_keys_each_line_by_the_job(tmp_path: Path) -> None:
    root, _ = write_repo(tmp_path / "repo", {"two": TWO_TOPICS.format(A="clicks", B="views")},
                         {"two_topics": ("two", ["clicks", "views"], 4)})
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"user": f"u{i % 5}"}) + "\n" for i in range(40)))
    (tmp_path / "v.jsonl").write_text("".join(json.dumps({"user": f"u{i % 3}"}) + "\n" for i in range(9)) + "{\n")
    r = _lint_cli(root, "two_topics", "--no-spark", "--from-file", "clicks=c.jsonl", "--from-file", "views=v.jsonl",
                  cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["topics"] == {"clicks": 40, "views": 10}
    r = _lint_cli(root, "two_topics", "--no-spark", "--from-file", "c.jsonl", cwd=tmp_path)
    assert r.returncode == 2 and "give --from-file TOPIC=F.jsonl" in r.stderr


def test_app_lint_from_file_names_the_one_partition_requirement(tmp_path: Path) -> None:
    (tmp_path / "views.jsonl").write_text("".join(
        json.dumps({"page": f"/p{i % 4}", "user": "v1", "ts": 1_767_225_600_000 + i, "duration_ms": 5}) + "\n"
        for i in range(50)))
    r = _lint_cli(REPO, "page_stats", "--no-spark", "--from-file", "views.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    (one,) = [c for c in json.loads(r.stdout)["checks"] if c["name"] == ONE_PARTITION]
    assert one["ok"] and "each of 4 keys has its records in one partition" in one["detail"]
    assert "depends on order needs that" in one["detail"]
    r = subprocess.run([sys.executable, "-m", "streamops.cli", "app", "lint", "--help"], capture_output=True,
                       text=True, check=True)
    assert "one key stays in one partition" in " ".join(r.stdout.split())
