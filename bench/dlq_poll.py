"""The CPU of one DLQ asset watcher's poll (``DlqRecordsTrigger``), as the triggerer spends it for
each app every 2 s for as long as Airflow runs.

    .venv/bin/python bench/dlq_poll.py [--app user_activity] [--polls 50] [--runs 5]

One embedded broker, the app's DLQ topic with a few records. Side by side in one process, per run,
``--polls`` polls of each way:

- **spec file parsed per poll** (the watcher before 2026-12-07): ``open_spec_file`` then
  ``dlq.new_records``;
- **kept spec file**: ``SpecFile.refresh`` (a ``stat`` while the file is unchanged) then
  ``dlq.new_records``, as the watcher polls now.

Reported: the process's CPU milliseconds per poll (all threads, librdkafka's included), min /
median / max over the runs, and the ratio of medians to the first row.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import isolated_settings, summary, table


def _cpu_ms_per_poll(poll, polls: int) -> float:
    t0 = time.process_time()
    for _ in range(polls):
        poll()
    return (time.process_time() - t0) / polls * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", default="user_activity")
    ap.add_argument("--polls", type=int, default=50)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    from confluent_kafka import Producer

    from streamops.kafka.admin import TopicSpec, ensure_topics
    from streamops.observe.dlq import new_records
    from streamops.platform import manager
    from streamops.specfile import open_spec_file

    with tempfile.TemporaryDirectory(prefix="bench-dlq-poll-") as tmp:
        settings = isolated_settings(Path(tmp) / "home")
        spec_file = open_spec_file(settings.repo, settings.state_dir)
        spec = spec_file.specs[args.app]
        manager.up(settings, only=["kafka"])
        try:
            b = settings.kafka_bootstrap
            ensure_topics(b, [TopicSpec(name=spec.dlq_topic, partitions=spec.input_partitions)])
            p = Producer({"bootstrap.servers": b})
            for i in range(10):
                p.produce(spec.dlq_topic, key=str(i).encode(), value=b"bad")
            assert p.flush(30) == 0
            assert new_records(settings, spec) is not None  # the poll finds the records

            def parsed() -> None:
                new_records(settings, open_spec_file(settings.repo, settings.state_dir).specs.get(args.app))

            def kept() -> None:
                spec_file.refresh()
                new_records(settings, spec_file.specs.get(args.app))

            ways = {"spec file parsed per poll (before)": parsed, "kept spec file (now)": kept}
            got: dict[str, list[float]] = {name: [] for name in ways}
            for _ in range(args.runs):
                for name, poll in ways.items():
                    got[name].append(_cpu_ms_per_poll(poll, args.polls))
        finally:
            manager.down(settings)
    stats = {name: summary(v) for name, v in got.items()}
    base = next(iter(stats.values()))[1]
    rows = [[name, *(f"{x:.1f}" for x in st), f"{st[1] / base:.2f}"] for name, st in stats.items()]
    print(f"{args.app}: CPU ms per DLQ poll, {args.polls} polls x {args.runs} runs, side by side")
    print(table(["way", "min ms", "median ms", "max ms", "ratio"], rows))


if __name__ == "__main__":
    main()
