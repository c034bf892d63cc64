"""``streamops produce`` against a real broker, checked record by record against the oracle;
bounded reads (``read_topic``, ``latest_per_key``) and topic creation.

``produce`` feeds only topics an app reads, so the tests of fresh topics run the CLI in a
throwaway checkout (``STREAMOPS_REPO``) whose spec has an app per topic (``tests.fixtures.job_repo``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from jobs.demo.fold import fold, validate
from jobs.demo.generator import generate, generate_records
from streamops.kafka import TopicSpec, end_offsets, ensure_topics, latest_per_key, partitions, read_topic
from streamops.kafka.admin import DEFAULT_TIMEOUT
from streamops.kafka.exceptions import TopicNotFoundError
from tests.fixtures.job_repo import KEY_TABLE, TWO_TOPICS, write_repo
from tests.unit.test_partitioner import KEYS, kafka_partition

REPO = Path(__file__).resolve().parents[3]
STREAMOPS = [sys.executable, "-m", "streamops.cli"]
SEEDED = {"events": 20_000, "users": 500, "bad_ratio": 0.02, "seed": 7}
SEEDED_ARGS = ["--events", "20000", "--users", "500", "--bad-ratio", "0.02", "--seed", "7"]


def fresh(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


#: topic of each user_activity app of the throwaway checkout (app name = key with _)
TOPICS = {name: fresh(name) for name in ("seeded", "seeded-again", "rate", "human", "existing")}
KEYS_TOPIC, CLICKS, VIEWS = fresh("keys"), fresh("clicks"), fresh("views")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    apps = {name.replace("-", "_"): ("jobs.user_activity", [topic], 6) for name, topic in TOPICS.items()}
    apps["keys"] = ("keys", [KEYS_TOPIC], 7)
    apps["two_topics"] = ("two", [CLICKS, VIEWS], 4)
    root, _ = write_repo(tmp_path_factory.mktemp("checkout"),
                         {"keys": KEY_TABLE.format(KEYS=KEYS), "two": TWO_TOPICS.format(A=CLICKS, B=VIEWS)},
                         apps, link_jobs=True)
    return root


def run(*argv: str, timeout: float = 180, repo: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "STREAMOPS_REPO": str(repo or REPO)}
    return subprocess.run([*STREAMOPS, *argv], check=False, capture_output=True, text=True, timeout=timeout, env=env)


def produce_json(kafka: str, topic: str, *argv: str, repo: Path | None = None) -> dict:
    r = run("produce", topic, *argv, "--bootstrap", kafka, "--json", repo=repo)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", "no progress bar under --json when stderr is not a terminal"
    return json.loads(r.stdout)


def by_partition(kafka: str, topic: str) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
    out: dict[int, list] = defaultdict(list)
    last: dict[int, int] = {}
    for m in read_topic(kafka, topic):
        assert m.offset() > last.get(m.partition(), -1), "offsets must increase within a partition"
        last[m.partition()] = m.offset()
        out[m.partition()].append((m.key(), m.value()))
    return dict(out)


def total(kafka: str, topic: str) -> int:
    try:
        return sum(hi for _lo, hi in end_offsets(kafka, topic).values())
    except TopicNotFoundError:
        return 0


def test_the_readme_command_runs_from_the_console_script_in_any_directory(kafka: str, tmp_path: Path) -> None:
    """The README's `streamops produce user-events ...`: the console script, started outside the
    checkout with nothing of it on the path, finds user_activity (the app that reads user-events)
    and its job's generator; every record lands, each key where Kafka's default partitioner puts it."""
    script = REPO / ".venv" / "bin" / "streamops"
    if not script.exists():
        script = Path(sys.executable).with_name("streamops")
    env = {k: v for k, v in os.environ.items() if k not in ("STREAMOPS_REPO", "PYTHONPATH")}
    before = total(kafka, "user-events")
    r = subprocess.run([str(script), "produce", "user-events", "--events", "100000", "--users", "1000",
                        "--bad-ratio", "0.01", "--seed", "1", "--bootstrap", kafka, "--json"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["app"] == "user_activity" and summary["topic"] == "user-events"
    assert summary["events"] == 100_000 and summary["source"] == "UserActivity.generate"
    assert summary["options"] == {"users": 1000, "bad_ratio": 0.01}
    assert total(kafka, "user-events") - before == 100_000
    n = len(end_offsets(kafka, "user-events"))
    keyed = [(m.key(), m.partition()) for m in read_topic(kafka, "user-events") if m.key() is not None]
    assert len({k for k, _ in keyed}) >= 1000
    assert all(p == kafka_partition(k, n) for k, p in keyed)


@pytest.fixture(scope="module")
def seeded(kafka: str, checkout: Path) -> tuple[str, dict, dict]:
    """One topic loaded by the CLI with the seeded arguments: (topic, summary, records per partition)."""
    topic = TOPICS["seeded"]
    summary = produce_json(kafka, topic, *SEEDED_ARGS, repo=checkout)
    return topic, summary, by_partition(kafka, topic)


def test_produced_topic_folds_to_the_oracle(kafka: str, seeded: tuple[str, dict, dict]) -> None:
    topic, summary, parts = seeded
    expected_records = list(generate_records(**SEEDED))
    assert summary["events"] == 20_000 and summary["app"] == "seeded"
    assert summary["topic_created"] is True and summary["partitions"] == 6
    assert summary["seconds"] > 0 and summary["events_per_s"] > 0

    offsets = end_offsets(kafka, topic)
    assert sorted(offsets) == partitions(kafka, topic) == list(range(6))
    assert all(hi > lo for lo, hi in offsets.values()), f"a partition got no data: {offsets}"
    assert sum(hi - lo for lo, hi in offsets.values()) == 20_000

    records = [kv for recs in parts.values() for kv in recs]
    assert len(records) == 20_000
    checked = [(key, *validate(value)) for key, value in records]
    got_bad = Counter(reason for _, _, reason in checked if reason)
    want_bad = Counter(r.reason for r in expected_records if r.reason)
    assert got_bad == want_bad and sum(want_bad.values()) > 0
    for key, event, _ in checked:
        if event is not None:
            assert key == event["user_id"].encode()

    expected = fold(ev for ev, _ in map(validate, (v for _, v in generate(**SEEDED))) if ev)
    actual = fold(ev for _, ev, _ in checked if ev)
    assert len(actual) == 500
    assert actual == expected

    for p, recs in parts.items():  # a key lives in exactly one partition: Kafka's default partitioner's
        assert all(kafka_partition(k, 6) == p for k, _ in recs if k is not None)


def test_same_seed_gives_byte_identical_partitions(kafka: str, checkout: Path,
                                                   seeded: tuple[str, dict, dict]) -> None:
    _, _, first = seeded
    topic = TOPICS["seeded-again"]
    produce_json(kafka, topic, *SEEDED_ARGS, repo=checkout)
    second = by_partition(kafka, topic)
    assert sorted(second) == sorted(first)
    for p in first:
        assert second[p] == first[p], f"partition {p} differs"


def test_rate_limits_events_per_second(kafka: str, checkout: Path) -> None:
    t0 = time.monotonic()
    summary = produce_json(kafka, TOPICS["rate"], "--events", "4000", "--users", "100", "--rate", "2000",
                           repo=checkout)
    elapsed = time.monotonic() - t0
    assert summary["events"] == 4000
    assert summary["seconds"] >= 1.8, summary
    assert elapsed >= 1.8
    assert summary["events_per_s"] <= 2200


def test_human_output_with_progress_lines(kafka: str, checkout: Path) -> None:
    topic = TOPICS["human"]
    r = run("produce", topic, "--events", "3000", "--users", "10", "--skew", "zipf:1.5", "--bad-ratio", "0.1",
            "--bootstrap", kafka, repo=checkout)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"produced 3,000 records for human to {topic} (3,000 records, 6 partitions, "
                               f"created) in "), r.stdout
    assert "100.0%" in r.stderr and "\r" not in r.stderr  # stderr is not a terminal: plain lines


def test_existing_topic_is_used_as_it_is(kafka: str, checkout: Path) -> None:
    topic = TOPICS["existing"]
    ensure_topics(kafka, [TopicSpec(name=topic, partitions=2)])
    summary = produce_json(kafka, topic, "--events", "100", "--users", "10", repo=checkout)
    assert summary["topic_created"] is False and summary["partitions"] == 2  # not the spec's 6
    summary = produce_json(kafka, topic, "--events", "50", "--users", "10", repo=checkout)
    assert sum(hi - lo for lo, hi in end_offsets(kafka, topic).values()) == 150


def test_keys_land_where_kafkas_default_partitioner_puts_them(kafka: str, checkout: Path) -> None:
    """ascii, unicode, empty and long keys, read back from the broker: the partition is
    toPositive(murmur2(key)) % 7 by the reference transcribed from Kafka's Utils.murmur2."""
    summary = produce_json(kafka, "keys", "--events", str(3 * len(KEYS)), repo=checkout)
    assert summary["events"] == 3 * len(KEYS) and summary["partitions"] == 7
    got = [(m.key(), m.partition()) for m in read_topic(kafka, KEYS_TOPIC)]
    assert sorted(k for k, _ in got) == sorted(KEYS * 3)  # the empty key stays empty, not null
    wrong = [(k[:20], p, kafka_partition(k, 7)) for k, p in got if p != kafka_partition(k, 7)]
    assert not wrong
    assert len({p for _, p in got}) > 3


def test_an_app_with_two_input_topics_is_fed_on_both(kafka: str, checkout: Path) -> None:
    summary = produce_json(kafka, "two_topics", "--events", "600", "--seed", "3", repo=checkout)
    assert summary["events"] == 600 and "topic" not in summary
    assert {t: v["records"] for t, v in summary["topics"].items()} == {CLICKS: 400, VIEWS: 200}
    assert total(kafka, CLICKS) == 400 and total(kafka, VIEWS) == 200
    for topic in (CLICKS, VIEWS):  # one user, one partition, on both topics
        assert all(m.partition() == kafka_partition(m.key(), 4) for m in read_topic(kafka, topic))
    summary = produce_json(kafka, CLICKS, "--events", "600", "--seed", "3", repo=checkout)  # that topic only
    assert summary["app"] == "two_topics" and summary["events"] == 400
    assert total(kafka, CLICKS) == 800 and total(kafka, VIEWS) == 200


def test_a_topic_no_app_reads_is_refused_before_any_broker_call(checkout: Path) -> None:
    r = run("produce", fresh("nobody"), "--events", "10", "--users", "1", "--bootstrap", "127.0.0.1:1",
            repo=checkout)
    assert r.returncode == 2 and "is neither an app nor a topic an app reads" in r.stderr, r.stderr


def test_unreachable_broker_fails_fast_with_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    # it gives up after the client's own timeout (no wall-clock assert: a loaded machine only
    # slows the CLI's start), and the subprocess timeout catches a hang
    r = run("produce", "user-events", "--events", "10", "--users", "1", "--bootstrap", f"127.0.0.1:{port}",
            timeout=60)
    assert r.returncode == 1
    assert r.stderr.startswith(f"error: no Kafka broker answered at 127.0.0.1:{port} "
                               f"within {DEFAULT_TIMEOUT:g}s"), r.stderr
    assert "Traceback" not in r.stderr and "FAIL|rdkafka" not in r.stderr
    assert r.stdout == ""


# -- library: topics and bounded reads ---------------------------------------------------------
def _send(kafka: str, topic: str, records: list[tuple], **conf: object) -> None:
    p = Producer({"bootstrap.servers": kafka, "enable.idempotence": True, **conf})
    for rec in records:
        key, value, *part = rec
        p.produce(topic, value=value, key=key, partition=part[0] if part else -1)
    assert p.flush(10) == 0


def test_ensure_topics_creates_missing_topics_with_their_config(kafka: str) -> None:
    compact, plain = fresh("compact"), fresh("plain")
    specs = [TopicSpec(name=compact, partitions=3, config={"cleanup.policy": "compact"}),
             {"name": plain, "partitions": 1}]
    first = ensure_topics(kafka, specs)
    assert {n: (t.created, t.partitions) for n, t in first.items()} == {compact: (True, 3), plain: (True, 1)}
    again = ensure_topics(kafka, specs)
    assert {n: t.created for n, t in again.items()} == {compact: False, plain: False}
    admin = AdminClient({"bootstrap.servers": kafka})
    configs = admin.describe_configs([ConfigResource("topic", compact)])
    (fut,) = configs.values()
    assert fut.result(10)["cleanup.policy"].value == "compact"


@pytest.mark.parametrize("bad", [{"name": "has space"}, {"name": ""}, {"name": "t", "partitions": 0},
                                 {"name": "t", "replication_factor": 0}, {"name": ".."}])
def test_topic_spec_is_validated(bad: dict) -> None:
    with pytest.raises(ValueError):
        TopicSpec(**bad)


def test_missing_topic_is_reported(kafka: str) -> None:
    name = fresh("missing")
    for call in (lambda: partitions(kafka, name), lambda: end_offsets(kafka, name),
                 lambda: list(read_topic(kafka, name)), lambda: latest_per_key(kafka, name)):
        with pytest.raises(TopicNotFoundError, match=name):
            call()


def test_latest_per_key_applies_tombstones(kafka: str) -> None:
    topic = fresh("latest")
    ensure_topics(kafka, [TopicSpec(name=topic, partitions=3, config={"cleanup.policy": "compact"})])
    _send(kafka, topic, [
        (b"a", b'{"v":1}'), (b"b", b'{"v":1}'), (b"a", b'{"v":2}'), (b"c", b'{"v":1}'),
        (b"b", None), (b"c", b'{"v":2}'), (b"d", None), (b"e", b"null"), (b"f", b'{"v":1}'), (b"f", None),
        (b"f", b'{"v":3}'),
    ])
    assert latest_per_key(kafka, topic) == {"a": {"v": 2}, "c": {"v": 2}, "e": None, "f": {"v": 3}}
    assert latest_per_key(kafka, topic, decode=bytes)["a"] == b'{"v":2}'


def test_read_topic_honours_end_offsets_and_ignores_later_records(kafka: str) -> None:
    topic = fresh("bounded")
    ensure_topics(kafka, [TopicSpec(name=topic, partitions=3)])
    _send(kafka, topic, [(f"k{i}".encode(), f"v{i}".encode(), i % 3) for i in range(30)])

    got = [(m.partition(), m.offset()) for m in read_topic(kafka, topic, end={0: 2, 1: 1000, 2: 0})]
    assert sorted(got) == [(0, 0), (0, 1)] + [(1, o) for o in range(10)]

    it = read_topic(kafka, topic)
    first = next(it)
    _send(kafka, topic, [(b"late", b"late", p) for p in range(3)])  # after the end snapshot
    rest = list(it)
    assert 1 + len(rest) == 30
    assert b"late" not in {m.value() for m in [first, *rest]}
    assert sum(1 for _ in read_topic(kafka, topic)) == 33


def test_read_topic_of_an_empty_topic_returns_at_once(kafka: str) -> None:
    topic = fresh("empty")
    ensure_topics(kafka, [TopicSpec(name=topic, partitions=4)])
    t0 = time.monotonic()
    assert list(read_topic(kafka, topic)) == []
    assert time.monotonic() - t0 < 5


def test_read_topic_reads_committed_records_and_does_not_wait_for_open_transactions(kafka: str) -> None:
    topic = fresh("txn")
    ensure_topics(kafka, [TopicSpec(name=topic, partitions=1)])
    p = Producer({"bootstrap.servers": kafka, "transactional.id": f"tx-{topic}"})
    p.init_transactions(10)
    p.begin_transaction()
    p.produce(topic, key=b"a", value=b"committed-1")
    p.commit_transaction(10)
    p.begin_transaction()
    p.produce(topic, key=b"b", value=b"aborted")
    p.abort_transaction(10)
    p.begin_transaction()
    p.produce(topic, key=b"c", value=b"committed-2")
    p.commit_transaction(10)
    p.begin_transaction()
    p.produce(topic, key=b"d", value=b"open")
    p.flush(10)
    try:
        t0 = time.monotonic()
        values = [m.value() for m in read_topic(kafka, topic)]
        assert values == [b"committed-1", b"committed-2"]
        assert time.monotonic() - t0 < 10
    finally:
        p.abort_transaction(10)
