"""Failures around an app, not inside it: the platform never lets a driver skip output silently.

A checkpoint deleted by hand (or left half-replaced by an interrupted operation), and batch
markers a broker lost, used to make the next driver recompute batches and write nothing for them,
with lag 0. Now the driver and deploy refuse, naming the repair, and the repair is exact. A
record too big for its DLQ copy used to fail its batch for ever; now the copy is cut.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from streamops.app.marker import last_marker
from streamops.app.topics import H_REASON, H_TRUNCATED, transactional_id
from streamops.checkpoints import layout, lineage
from streamops.job import BAD_KEY
from streamops.kafka.admin import TopicSpec, end_offsets, ensure_topics, recreate_topic
from streamops.kafka.config import KafkaConfig
from streamops.kafka.read import latest_per_key, read_topic
from streamops.kafka.security import kafka_config
from streamops.lifecycle.replace import rewind_marker
from streamops.platform import manager
from streamops.spark.query.records import DLQ_MAX_BYTES
from streamops.spec import default_spec_path, get_app, load_specs

APP = "user_activity"
LOCAL = "local[2]"


def _driver(app) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamops.spark.driver", "--app", APP, "--master", LOCAL,
                           "--exit-at-end"], check=False, env=app.env, capture_output=True, text=True, timeout=300,
                          cwd=app.settings.state_dir)


def _sinks(app) -> dict:
    b = app.settings.kafka_bootstrap
    return {t: end_offsets(b, t) for t in ("user-profiles", "user_activity-profiles-changelog", "user-events.dlq")}


def _exact(app, records: int) -> None:
    report = app.check()
    assert report["ok"] and report["input_records"] == records, json.dumps(report["views"], indent=1)[:3000]


def test_poison_records_a_deleted_checkpoint_or_lost_batches_never_lose_output(app_factory) -> None:
    """A 2 MB poison record, batch markers lost (by hand, then by a broker SIGKILLed right after a
    commit) and a checkpoint deleted by hand: refused with the repair, or exact; never wrong."""
    app = app_factory("ua-lineage", master=LOCAL)
    spec = get_app(load_specs(default_spec_path(app.settings.repo)), APP)
    ensure_topics(app.settings.kafka_bootstrap, [TopicSpec(name="user-events", partitions=6,
                                                           config={"max.message.bytes": "4000000"})])
    app.produce(4_000, users=500, seed=11)
    # a poison record: 2 MB of invalid JSON, whose whole DLQ copy no Kafka message could hold
    big = Producer({"bootstrap.servers": app.settings.kafka_bootstrap, "message.max.bytes": 4_000_000})
    big.produce("user-events", key=b"u-big", value=b"{" + b"x" * 2_000_000)
    assert big.flush(30) == 0
    app.run_to_end("--max-offsets-per-trigger", "1000")  # the app moves on past it
    _exact(app, 4_001)
    (copy,) = [m for m in read_topic(app.settings.kafka_bootstrap, "user-events.dlq") if m.key() == b"u-big"]
    headers = dict(copy.headers())
    assert len(copy.value()) == DLQ_MAX_BYTES and copy.value() == (b"{" + b"x" * 2_000_000)[:DLQ_MAX_BYTES]
    assert json.loads(headers[H_TRUNCATED]) == {"key_bytes": 5, "value_bytes": 2_000_001}
    batch = app.committed_batch()

    # the broker lost the transactions of the last two batches (here: the marker is set back by hand)
    rewind_marker(app.settings, spec, app.kafka, batch - 2)
    r = _driver(app)
    assert r.returncode == 2, r.stderr[-3000:]
    assert f"lost the transactions of batches {batch - 1}..{batch}" in r.stderr
    rewind_marker(app.settings, spec, app.kafka, batch)

    # the usual Spark habit: the checkpoint of a stopped app deleted by hand, then more input
    shutil.rmtree(app.checkpoint)
    app.produce(1_000, users=500, seed=12)
    before = _sinks(app)
    r = _driver(app)
    assert r.returncode == 2, r.stderr[-3000:]
    assert "missing or new" in r.stderr and f"batches 0..{batch} again and write nothing" in r.stderr
    assert f"streamops reset {APP} --to-earliest" in r.stderr
    assert not (app.checkpoint / "commits").exists() and _sinks(app) == before  # refused before Spark started

    manager.up(app.settings, only=["supervisor"])
    try:
        r = app.cli("deploy", APP, "--json")
        assert r.returncode == 2 and "missing or new" in json.loads(r.stdout)["error"], r.stdout + r.stderr
    finally:
        manager.down(app.settings, only=["supervisor"])

    # the repair it names: everything computed again, exactly once, from a new checkpoint
    r = app.cli("reset", APP, "--to-earliest", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    app.run_to_end("--max-offsets-per-trigger", "2500")
    _exact(app, 5_001)
    marker = last_marker(app.kafka, spec.commits_topic, APP)
    assert marker["checkpoint_id"] == lineage.checkpoint_id(app.checkpoint) is not None
    assert marker["batch_id"] == layout.last_committed_batch(app.checkpoint)

    # the broker SIGKILLed within a moment of a batch's commit, for real: it loses that transaction
    # (ENVIRONMENT.md) after Spark wrote the commit file. The next driver finds nothing lost and
    # goes on exactly, or refuses, naming the lost batches (or input) and the repair, which is exact
    app.produce(6_000, users=500, seed=31)
    first = app.committed_batch()
    app.start("--max-offsets-per-trigger", "400")
    try:
        app.wait_for(lambda: layout.last_committed_batch(app.checkpoint) > first + 1, what="two new batches")
        seen = layout.last_committed_batch(app.checkpoint)
        deadline = time.time() + 120
        while layout.last_committed_batch(app.checkpoint) == seen:  # the next commit file ...
            assert time.time() < deadline, app.log_tail()
            time.sleep(0.005)
        assert manager.crash(app.settings, "kafka")  # ... and the broker dies at once
    finally:
        app.kill()
    manager.up(app.settings, only=["kafka"])
    committed = layout.last_committed_batch(app.checkpoint)
    r = _driver(app)
    records = sum(hi for _lo, hi in end_offsets(app.settings.kafka_bootstrap, "user-events").values())
    print(f"broker killed after batch {committed} committed: the next driver exited {r.returncode}")
    if r.returncode == 2:  # it lost something, and says what and how to repair it
        lost_batches = "lost the transactions of batches" in r.stderr and f"..{committed}" in r.stderr
        lost_input = "read input records that are no longer there" in r.stderr
        assert lost_batches or lost_input, r.stderr[-3000:]
        r = app.cli("reset", APP, "--to-earliest", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        app.run_to_end("--max-offsets-per-trigger", "3000")
    else:
        assert r.returncode == 0, r.stderr[-3000:]
    _exact(app, records)


def test_marker_reads_never_guess(kafka: str, monkeypatch) -> None:
    from streamops.app import marker
    from streamops.kafka.admin import TopicSpec, ensure_topics
    from streamops.spark import commit

    kafka = KafkaConfig.plaintext(kafka)  # the test broker: PLAINTEXT
    # no commits topic yet: no marker (it was -1, where callers expect a dict or None)
    assert marker.last_marker(kafka, "_streamops-never-deployed-commits", "never-deployed") is None
    assert marker.last_committed_batch(kafka, "_streamops-never-deployed-commits", "never-deployed") == -1

    topic = "_streamops-lineage-probe-commits"
    ensure_topics(kafka, [TopicSpec(name=topic, partitions=1)])
    committer = commit.BatchCommitter(kafka, "lineage-probe", topic)
    try:
        assert committer.commit(0, []) == 0
    finally:
        committer.close()
    assert marker.last_marker(kafka, topic, "lineage-probe")["batch_id"] == 0

    # a read that cannot reach the end of the topic in time is an error, not the markers read so far
    ticks = iter(range(0, 10**6, 100))
    monkeypatch.setattr(marker, "time", SimpleNamespace(monotonic=lambda: float(next(ticks)), time=time.time))
    with pytest.raises(marker.MarkerReadError, match="could not read _streamops-lineage-probe-commits"):
        marker.last_marker(kafka, topic, "lineage-probe", timeout=5)


def _leave_open_transaction(bootstrap: str, transactional_id: str, topic: str, partition: int | None = None) -> None:
    """A producer that dies in a transaction (kill -9 after its record reached the broker)."""
    dying = subprocess.Popen([sys.executable, "-c", (
        "import time; from confluent_kafka import Producer\n"
        f"p = Producer({{'bootstrap.servers': '{bootstrap}', 'transactional.id': '{transactional_id}'}})\n"
        "p.init_transactions(30); p.begin_transaction()\n"
        f"p.produce('{topic}', key=b'open', value=b'1'{'' if partition is None else f', partition={partition}'})\n"
        "p.flush(10); print('open', flush=True); time.sleep(600)")], stdout=subprocess.PIPE, text=True)
    try:
        assert dying.stdout.readline().strip() == "open"
    finally:
        dying.kill()
        dying.wait()


def test_a_transaction_a_killed_driver_left_open_is_aborted_before_an_operation_reads(kafka: str) -> None:
    """A transaction left open by a driver killed mid-batch hides, under read_committed, every
    committed record after it (a write-back of an undo, another writer): what an operation saved
    then was short. ``abort_open_transaction`` (an operation's stop step) aborts it, as a starting
    driver does, so everything committed is read."""
    from streamops.app.marker import abort_open_transaction

    topic = "crash-safety-open-transaction"
    recreate_topic(kafka, TopicSpec(name=topic, partitions=1))
    p = Producer({"bootstrap.servers": kafka})
    p.produce(topic, key=b"before", value=b"1")
    assert p.flush(30) == 0
    _leave_open_transaction(kafka, transactional_id("probe-app"), topic)
    p.produce(topic, key=b"after", value=b"1")
    assert p.flush(30) == 0
    assert [m.key() for m in read_topic(kafka, topic)] == [b"before"]  # read_committed stops there
    abort_open_transaction(KafkaConfig.plaintext(kafka), "probe-app")
    assert [m.key() for m in read_topic(kafka, topic)] == [b"before", b"after"]


def test_an_open_transaction_is_named_not_read_past_silently(platform_factory) -> None:
    """A transactional producer that dies in a transaction leaves it open until its transaction
    timeout, or until its transactional id is used again (a starting driver); until then the last
    stable offset stays below it, and every record committed after it is invisible to
    read_committed readers. Reads that must see everything committed (check, an operation's saved
    copies, rebuild-state) stopped there and returned what they had: the short chaos run's check
    once reported keys and DLQ records missing that a later check found. Now they name the open
    transaction; the broker is SIGKILLed and restarted on top, and keeps it open (its state is in
    ``__transaction_state``), until the id is used again: then everything is read."""
    from streamops.app.marker import abort_open_transaction
    from streamops.kafka.exceptions import OpenTransactionError

    s = platform_factory("open-transaction")
    manager.up(s, only=["kafka"])
    b, topic = s.kafka_bootstrap, "open-txn"
    ensure_topics(b, [TopicSpec(name=topic, partitions=1)])
    code = textwrap.dedent(f"""
        import os
        from confluent_kafka import Producer
        p = Producer({{"bootstrap.servers": "{b}", "transactional.id": "{transactional_id('dies-in-it')}",
                       "transaction.timeout.ms": 600000, "log_level": 0}})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("{topic}", key=b"committed-before", value=b"1")
        p.commit_transaction(30)
        p.begin_transaction()
        p.produce("{topic}", key=b"in-the-open-transaction", value=b"1")
        assert p.flush(30) == 0
        os.kill(os.getpid(), 9)  # dies in the transaction
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, check=False)
    assert r.returncode == -9, r.stderr
    other = Producer({"bootstrap.servers": b})
    other.produce(topic, key=b"committed-after", value=b"1")
    assert other.flush(30) == 0
    manager.crash(s, "kafka")  # a broker crash on top: the open transaction survives it
    manager.up(s, only=["kafka"])

    assert [m.key() for m in read_topic(b, topic)] == [b"committed-before"]  # what the short reads returned
    with pytest.raises(OpenTransactionError, match="open-txn: a transaction has stayed open"):
        list(read_topic(b, topic, past_open_transactions=True, stall_timeout=3))
    abort_open_transaction(kafka_config(s), "dies-in-it")  # what a starting driver does
    assert [m.key() for m in read_topic(b, topic, past_open_transactions=True)] == [
        b"committed-before", b"committed-after"]


def test_reset_undo_writes_back_keys_byte_for_byte(platform, tmp_path) -> None:
    """What reset saves and its undo writes back: a key that is not UTF-8 comes back unchanged (it
    was decoded with backslash escapes and re-encoded, so it came back as another key). What
    rebuild-state reads from the changelog is the key as written, or a refusal."""
    from confluent_kafka import Producer

    from streamops.kafka.admin import TopicSpec, recreate_topic
    from streamops.kafka.read import latest_per_key
    from streamops.lifecycle.topic_copies import save_latest, write_back

    s = platform.ensure("kafka")
    topic = TopicSpec(name="crash-safety-raw-keys", partitions=2)
    recreate_topic(s.kafka_bootstrap, topic)
    keys = {b"\xff\xfebinary": b"1", "caf\u00e9".encode(): b"2", b"plain": b"3"}
    p = Producer({"bootstrap.servers": s.kafka_bootstrap})
    for k, v in keys.items():
        p.produce(topic.name, key=k, value=v)
    assert p.flush(30) == 0
    assert save_latest(kafka_config(s), topic.name, tmp_path / "saved.parquet") == 3

    recreate_topic(s.kafka_bootstrap, topic)  # what the reset does to the changelog
    p.produce(topic.name, key=b"gained\x80", value=b"4")  # a key written after the reset
    assert p.flush(30) == 0
    out = write_back(kafka_config(s), tmp_path / "saved.parquet", topic.name, tombstones=True)
    assert out == {"keys": 3, "tombstones": 1}
    assert latest_per_key(s.kafka_bootstrap, topic.name, decode=lambda v: v, raw_keys=True) == keys

    # rebuild-state seeds state from the changelog: a UTF-8 key is kept as it was written; one that
    # is not (no job wrote it) is refused, instead of coming back as another key
    from streamops.lifecycle.maintenance import ForeignChangelogKeyError, read_changelog

    spec = SimpleNamespace(name=APP, changelog_topic=topic.name)
    recreate_topic(s.kafka_bootstrap, topic)
    p.produce(topic.name, key="caf\u00e9".encode(), value=b"2")
    assert p.flush(30) == 0
    assert read_changelog(kafka_config(s), spec) == {"caf\u00e9": b"2"}
    p.produce(topic.name, key=b"\xff\xfebinary", value=b"1")
    assert p.flush(30) == 0
    with pytest.raises(ForeignChangelogKeyError, match=r"holds the key b'\\xff\\xfebinary', which is not UTF-8"):
        read_changelog(kafka_config(s), spec)


def _topics(app) -> dict:
    b = app.settings.kafka_bootstrap
    return {t: latest_per_key(b, t, decode=lambda v: v, raw_keys=True)
            for t in ("user_activity-profiles-changelog", "user-profiles")}


def test_a_reset_killed_or_failing_half_way_is_undone_exactly(app_factory) -> None:
    """A reset killed -9 (or failing) after it replaced the checkpoint and emptied the changelog,
    before it rewound the marker: `streamops undo` puts checkpoint, changelog, output and marker
    back, and the app goes on exactly. It used to say "nothing to undo"."""
    from streamops.ledger import Ledger

    app = app_factory("ua-journal", master=LOCAL)
    spec = get_app(load_specs(default_spec_path(app.settings.repo)), APP)
    app.produce(3_000, users=400, seed=21)
    app.run_to_end("--max-offsets-per-trigger", "1500")
    _exact(app, 3_000)
    batch, ckpt_id, topics = app.committed_batch(), lineage.checkpoint_id(app.checkpoint), _topics(app)
    ledger = Ledger.open(app.settings.ledger_db_url)
    try:
        # killed or failing before the marker rewind, and killed between deleting the changelog
        # and creating it again (no changelog left: the undo saves that as empty, then writes back)
        for n, (failpoint, action, code) in enumerate((("reset.rewind", "kill", -9), ("reset.rewind", "raise", 1),
                                                       ("changelog.deleted", "kill", -9))):
            r = app.cli("reset", APP, "--to-earliest", env={"STREAMOPS_FAILPOINTS": f"{failpoint}={action}"})
            assert r.returncode == code, r.stdout + r.stderr
            op = ledger.operations(APP, limit=1)[0]
            assert op["kind"] == "reset" and op["outcome"] == ("running" if action == "kill" else "failed")
            steps = ["stop", "saved", "set-aside", "install", "changelog-recreate", "rewind"]
            assert [s["step"] for s in op["journal"]] == steps[:6 if failpoint == "reset.rewind" else 5]
            assert layout.last_committed_batch(app.checkpoint) is None  # the half-done reset's checkpoint
            if failpoint == "reset.rewind":
                assert _topics(app)["user_activity-profiles-changelog"] == {}
            else:
                listed = AdminClient({"bootstrap.servers": app.settings.kafka_bootstrap}).list_topics(timeout=10)
                assert "user_activity-profiles-changelog" not in listed.topics
            if n == 0:  # the driver will not run on what it left: the marker counts another checkpoint
                refused = _driver(app)
                assert refused.returncode == 2 and "missing or new" in refused.stderr, refused.stderr[-2000:]
                assert f"streamops undo {APP} OP" in refused.stderr

            plan = json.loads(app.cli("undo", APP, str(op["id"]), "--dry-run", "--json").stdout)
            assert plan["dry_run"] and plan["outcome"] == "failed" and plan["restore_batch"] == batch
            if action == "kill":
                assert "abandoned: its process" in plan["error"]
            r = app.cli("undo", APP, str(op["id"]), "--json")
            assert r.returncode == 0, r.stdout + r.stderr
            undone = json.loads(r.stdout)
            assert undone["written"]["changelog"]["keys"] == len(topics["user_activity-profiles-changelog"])
            saved = next(s for s in ledger.get_operation(undone["operation_id"])["journal"] if s["step"] == "saved")
            assert saved["saved"]["changelog"]["keys"] == 0  # what the reset left: an empty changelog, or none
            assert layout.last_committed_batch(app.checkpoint) == batch
            assert lineage.checkpoint_id(app.checkpoint) == ckpt_id and _topics(app) == topics
            marker = last_marker(app.kafka, spec.commits_topic, APP)
            assert (marker["batch_id"], marker["checkpoint_id"]) == (batch, ckpt_id)
            r = app.cli("undo", APP, str(op["id"]))
            assert r.returncode == 2 and f"already undone by operation #{undone['operation_id']}" in r.stderr
    finally:
        ledger.close()

    # and the app goes on from its own checkpoint, exactly once
    app.produce(1_000, users=400, seed=22)
    app.run_to_end("--max-offsets-per-trigger", "1500")
    _exact(app, 4_000)
    r = app.cli("undo", APP, "99999")
    assert r.returncode == 2 and "no operation #99999" in r.stderr

    # the input topic deleted and created again, refilled past the offsets read before, and the
    # app reset: the rejected records of the new life reach the DLQ, also at offsets whose
    # records of the previous life were already there (they were left out as "already emitted")
    recreate_topic(app.settings.kafka_bootstrap, TopicSpec(name="user-events", partitions=6))
    app.produce(6_000, users=400, seed=23)
    # ... and a driver killed mid-batch left its transaction open on the output, with a record
    # committed after it: the reset aborts it before it saves the output, so its saved copy (what
    # an undo writes back) has that record too; it used to stop at the open transaction
    b = app.settings.kafka_bootstrap
    keys_before = len(latest_per_key(b, "user-profiles", decode=lambda v: v))
    _leave_open_transaction(b, transactional_id(APP), "user-profiles")
    probe = Producer({"bootstrap.servers": b})
    probe.produce("user-profiles", key=b"written-after-the-open-transaction", value=b"{}")
    assert probe.flush(30) == 0
    r = app.cli("reset", APP, "--to-earliest", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["saved"]["output"]["keys"] == keys_before + 1
    probe.produce("user-profiles", key=b"written-after-the-open-transaction", value=None)  # not the app's
    assert probe.flush(30) == 0
    app.run_to_end("--max-offsets-per-trigger", "2000")
    report = app.check()
    assert report["ok"] and report["input_records"] == 6_000, json.dumps(report["views"], indent=1)[:3000]
    dlq = next(v for v in report["views"] if v["view"] == "dlq")
    assert dlq["expected"] > 0 and dlq["expected"] == dlq["actual"], dlq
    marker = last_marker(app.kafka, spec.commits_topic, APP)
    assert sorted(marker["input_recreated"]["user-events"]) == [str(p) for p in range(6)]




def test_a_bounded_run_ends_after_a_restart_past_its_last_batch_or_with_nothing_to_read(app_factory,
                                                                                      monkeypatch) -> None:
    """``--exit-at-end`` decides from the checkpoint, not the query's progress. The sink fails once
    after its batch's transaction committed, before Spark's commit log has the batch: the query
    restarts in the driver, replays the batch without writing it twice, and the run ends, exact.
    Then a run on the checkpoint already at the end of its input: no batch to run, it ends at once
    and writes nothing (it used to wait for a progress report that never came, until killed; so
    did a query restarted right after its last batch: a heartbeat write failed so in a suite run)."""
    app = app_factory("ua-bounded-end", master=LOCAL)
    app.produce(3_000, users=300, seed=12)
    # and a poison key: valid JSON whose user id is a lone surrogate, which UTF-8 cannot encode; it
    # used to fail every batch that read it (the DLQ now has it as bad_key)
    p = Producer({"bootstrap.servers": app.settings.kafka_bootstrap})
    p.produce("user-events", key=b"u-bad", value=b'{"user_id": "u\\ud800", "event_type": "login", "amount": 0, "ts": 5}')
    assert p.flush(30) == 0
    monkeypatch.setenv("STREAMOPS_FAILPOINTS", "sink.committed=once")  # the driver's environment
    app.run_to_end("--max-offsets-per-trigger", "1000", "--trigger-interval", "0 seconds", timeout=240)
    monkeypatch.delenv("STREAMOPS_FAILPOINTS")
    log = app.log_tail(400)
    assert "failpoint sink.committed fired" in log and "restart 1/10 from the checkpoint" in log, log[-3000:]
    _exact(app, 3_001)
    (bad,) = [m for m in read_topic(app.settings.kafka_bootstrap, "user-events.dlq") if m.key() == b"u-bad"]
    assert dict(bad.headers())[H_REASON] == BAD_KEY.encode()
    batch, sinks = app.committed_batch(), _sinks(app)

    app.run_to_end("--trigger-interval", "0 seconds", timeout=90)
    assert app.committed_batch() == batch and _sinks(app) == sinks
    _exact(app, 3_001)
