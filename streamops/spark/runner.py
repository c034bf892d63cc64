"""The streaming runtime every job uses: read the input, run the job's query, commit each
micro-batch exactly once, report a heartbeat, and stop gracefully at a batch boundary.

A job supplies two pure pieces — ``build(raw_df) -> DataFrame`` and
``to_records(arrow_table, batch_id) -> list[OutRecord]`` — and calls ``run_app``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from streamops.settings import Settings
from streamops.spec import AppSpec

log = logging.getLogger("streamops.runtime")


@dataclass
class RunOptions:
    master: str | None = None
    parallelism: int | None = None
    #: stop by itself once the input end offsets seen at start have been committed (benchmarks)
    exit_at_end: bool = False
    extra_conf: dict[str, str] = field(default_factory=dict)


def app_dir(settings: Settings, app: str) -> Path:
    return settings.state_dir / "apps" / app


def heartbeat_path(settings: Settings, app: str) -> Path:
    return app_dir(settings, app) / "driver.json"


def write_heartbeat(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload))
    tmp.replace(path)


def ensure_app_topics(settings: Settings, spec: AppSpec) -> None:
    from streamops.kafka.admin import TopicSpec, ensure_topics

    compact = {"cleanup.policy": "compact"}
    ensure_topics(settings.kafka_bootstrap, [
        *(TopicSpec(name=t, partitions=spec.input_partitions) for t in spec.input_topics),
        TopicSpec(name=spec.output_topic, partitions=spec.input_partitions),
        TopicSpec(name=spec.changelog_topic, partitions=spec.input_partitions, config=compact),
        TopicSpec(name=spec.dlq_topic, partitions=spec.input_partitions),
        TopicSpec(name=spec.commits_topic, partitions=1, config=compact),
    ])


def _reached(end_offset_json: str | dict | None, targets: dict[str, dict[str, int]]) -> bool:
    if not end_offset_json:
        return False
    got = json.loads(end_offset_json) if isinstance(end_offset_json, str) else end_offset_json
    return all(int(got.get(t, {}).get(p, -1)) >= off for t, parts in targets.items() for p, off in parts.items())


def run_app(
    spec: AppSpec,
    settings: Settings,
    *,
    build: Callable,
    to_records: Callable,
    options: RunOptions | None = None,
) -> int:
    """Run the app's query until stopped (SIGTERM/SIGINT: graceful, at a batch boundary)."""
    from streamops.kafka.admin import end_offsets
    from streamops.spark.commit import BatchCommitter
    from streamops.spark.kafka_io import read_kafka
    from streamops.spark.session import build_session, checkpoint_dir

    opts = options or RunOptions()
    ensure_app_topics(settings, spec)
    spark = build_session(spec, settings, master=opts.master, parallelism=opts.parallelism,
                          extra=opts.extra_conf)
    spark.sparkContext.setLogLevel("WARN")
    raw = read_kafka(
        spark,
        bootstrap_servers=settings.kafka_bootstrap,
        subscribe=",".join(spec.input_topics),
        starting_offsets=spec.starting_offsets,
        max_offsets_per_trigger=spec.max_offsets_per_trigger,
        fail_on_data_loss=True,
    )
    committer = BatchCommitter(settings.kafka_bootstrap, spec.name, spec.commits_topic)
    hb = heartbeat_path(settings, spec.name)
    started = time.time()
    stats = {"batches": 0, "records": 0}

    def sink(df, batch_id: int) -> None:
        t0 = time.monotonic()
        table = df.toArrow()  # always evaluate: the state store must advance even on a replay
        records = to_records(table, batch_id)
        written = committer.commit(batch_id, records)
        stats["batches"] += 1
        stats["records"] += len(records)
        write_heartbeat(hb, {
            "app": spec.name, "pid": os.getpid(), "app_id": spark.sparkContext.applicationId,
            "status": "running", "batch_id": batch_id, "replayed": written is None,
            "records": len(records), "sink_seconds": round(time.monotonic() - t0, 3),
            "heartbeat_ms": int(time.time() * 1000), "started_ms": int(started * 1000),
        })

    query = (
        build(raw)
        .writeStream.queryName(spec.name)
        .outputMode("update")
        .foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint_dir(settings, spec)))
        .trigger(processingTime=spec.trigger_interval)
        .start()
    )
    stop = threading.Event()

    def request_stop(signum, _frame):
        log.warning("signal %s: stopping %s at the next batch boundary", signum, spec.name)
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    targets = None
    if opts.exit_at_end:
        targets = {t: {str(p): hi for p, (_lo, hi) in end_offsets(settings.kafka_bootstrap, t).items()}
                   for t in spec.input_topics}
    try:
        while query.isActive:
            if targets is not None:
                progress = query.lastProgress
                if progress and _reached(progress["sources"][0].get("endOffset"), targets) and \
                        committer.last_committed >= progress["batchId"]:
                    stop.set()
            if stop.is_set():
                # graceful: wait (bounded) for the running trigger to finish, then stop
                deadline = time.monotonic() + max(60.0, 10 * spec.trigger_seconds)
                while query.status.get("isTriggerActive") and time.monotonic() < deadline:
                    time.sleep(0.05)
                query.stop()
                break
            time.sleep(0.2)
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
    finally:
        committer.close()
        write_heartbeat(hb, {**(json.loads(hb.read_text()) if hb.exists() else {}),
                             "status": "stopped", "heartbeat_ms": int(time.time() * 1000)})
        spark.stop()
    return 0
