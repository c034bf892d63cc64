"""``commit_on: executors`` on Apache Kafka and Spark's connector: the tasks make and write a
batch's records, each partition in its own transaction with its marker group, and the driver
commits the batch marker alone (``spark.driver.task_commit``). Exact after a failure between the
tasks' commits and the driver's marker (the replayed batch's partitions write nothing), after a
reset (the rewind's epoch makes the new checkpoint's batches written again, and its DLQ filter
keeps each rejected record once), and for a job with stream time killed with SIGKILL (its clock
rows reach the driver through the tasks' totals)."""

from __future__ import annotations

import json
import zlib

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from streamops.app.marker import last_marker
from streamops.app.topics import task_group
from streamops.checkpoints import layout
from streamops.kafka.admin import partitions
from streamops.kafka.read import read_topic
from streamops.spark.commit import EPOCH_SHIFT
from streamops.spark.query.records import dlq_entry
from streamops.spec import default_spec_path, get_app, load_specs

LOCAL = "local[2]"
EXECUTORS = ("--commit-on", "executors")
pytestmark = pytest.mark.timeout(900)


def _exact(app, records: int | None = None) -> dict:
    report = app.check()
    views = {v["view"]: v for v in report["views"]}
    assert report["ok"], json.dumps(views, indent=1)[:3000]
    if records is not None:
        assert report["input_records"] == records
    return views


def _task_markers(app, spec, count: int) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": app.settings.kafka_bootstrap})
    out = {}
    for p in range(count):
        group = task_group(spec.name, p)
        fut = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(spec.commits_topic, 0)])])[group]
        out[p] = fut.result(30).topic_partitions[0].offset
    return out


def _placed_as_the_driver_places(app, topic: str) -> int:
    """Every keyed record is on the partition librdkafka's consistent_random partitioner picks."""
    n = len(partitions(app.settings.kafka_bootstrap, topic))
    seen = 0
    for m in read_topic(app.settings.kafka_bootstrap, topic):
        if m.key():
            assert m.partition() == zlib.crc32(m.key()) % n, (topic, m.key(), m.partition())
            seen += 1
    return seen


def test_user_activity_committed_by_its_tasks_is_exact_after_a_failure_between_commits_and_a_reset(
        app_factory, monkeypatch) -> None:
    app = app_factory("ua-tasks", master=LOCAL)
    spec = get_app(load_specs(default_spec_path(app.settings.repo)), "user_activity")
    app.produce(6_000, users=300, seed=21)
    # batch 0's tasks commit, then the sink fails before the driver's marker: the query restarts and
    # replays batch 0, whose partitions all find their marker and write nothing
    monkeypatch.setenv("STREAMOPS_FAILPOINTS", "sink.tasks_committed=once")
    app.run_to_end(*EXECUTORS, "--max-offsets-per-trigger", "2000", "--trigger-interval", "0 seconds")
    monkeypatch.delenv("STREAMOPS_FAILPOINTS")
    log = app.log_tail(400)
    assert "failpoint sink.tasks_committed fired" in log and "restart 1/10 from the checkpoint" in log, log[-3000:]
    views = _exact(app, 6_000)
    assert views["dlq"]["expected"] == views["dlq"]["actual"] > 0
    last = app.committed_batch()
    marker = last_marker(app.kafka, spec.commits_topic, spec.name)
    assert marker["batch_id"] == last and marker["writer_epoch"] == 0
    # the marker counts the records the tasks wrote, which are all there is (no record came from the driver)
    out = {t: sum(1 for _ in read_topic(app.settings.kafka_bootstrap, t))
           for t in (spec.live_output_topic, spec.changelog_topic, spec.dlq_topic)}
    assert out[spec.dlq_topic] == views["dlq"]["expected"]
    # a writer per state partition (the DLQ branch shares the aggregation's exchange, so the union keeps
    # its partitioning); each committed every batch, records or none
    writers = spec.state_partitions
    assert _task_markers(app, spec, writers) == {p: last for p in range(writers)}
    assert _placed_as_the_driver_places(app, spec.live_output_topic) == out[spec.live_output_topic]
    assert _placed_as_the_driver_places(app, spec.changelog_topic) == out[spec.changelog_topic]

    # more input, then a reset to the earliest offsets: the new checkpoint's batch 0 holds all of it
    # in one batch. Its number is below the task markers', but the rewind's epoch makes it written
    # (without it, every partition would skip it and the new records' effects would be missing)
    app.produce(3_000, users=500, seed=22)
    r = app.cli("reset", "user_activity", "--to-earliest", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    app.run_to_end(*EXECUTORS, "--trigger-interval", "0 seconds")
    assert app.committed_batch() == 0
    views = _exact(app, 9_000)
    assert views["dlq"]["duplicates"] == 0 and views["dlq"]["expected"] == views["dlq"]["actual"]
    marker = last_marker(app.kafka, spec.commits_topic, spec.name)
    assert marker["writer_epoch"] == 1
    assert _task_markers(app, spec, writers) == {p: (1 << EPOCH_SHIFT) | 0 for p in range(writers)}
    dlq = [dlq_entry(m.headers())[0] for m in read_topic(app.settings.kafka_bootstrap, spec.dlq_topic)]
    assert len(dlq) == len(set(dlq)) == views["dlq"]["expected"]


# extended (``make test-all``): the tasks' clock rows are summed by the accumulator under
# test_task_records and test_sink in ``make test``, and the tasks' commit through a failure and
# a reset by the test above
@pytest.mark.extended
def test_a_stream_time_job_committed_by_its_tasks_is_exact_through_a_kill(
        app_factory) -> None:
    app = app_factory("sessions-tasks", master=LOCAL, app="sessions")
    spec = get_app(load_specs(default_spec_path(app.settings.repo)), "sessions")
    r = app.cli("produce", "sessions", "--events", "4000", "--seed", "3", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    app.start(*EXECUTORS, "--max-offsets-per-trigger", "700", "--trigger-interval", "1 second")
    app.wait_for(lambda: app.committed_batch() >= 1, what="two batches")
    app.kill()
    _exact(app)  # as of that batch's watermark
    app.start(*EXECUTORS, "--trigger-interval", "1 second")
    app.wait_for(lambda: app.committed_batch() >= 0 and layout.committed_offsets(app.checkpoint).get("clicks")
                 and sum(layout.committed_offsets(app.checkpoint)["clicks"].values()) >= 4_000,
                 timeout=300, what="the input read")
    # the clocks the tasks summed reached the driver: the watermark moved with the input
    batch = app.committed_batch()
    assert layout.batch_watermark(app.checkpoint, batch) is not None
    assert app.stop() == 0
    views = _exact(app)
    assert views["dlq"]["expected"] == views["dlq"]["actual"] > 0
    writers = spec.state_partitions
    markers = _task_markers(app, spec, writers)
    assert set(markers.values()) == {app.committed_batch()}
