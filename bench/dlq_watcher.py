"""Why the DLQ assets are not watched by the Kafka provider's message-queue trigger (issue 25): how
fast its watchers fire when several apps' watchers share the triggerer, and how fast one gets
through DLQ records a digest already counted.

    .venv/bin/python bench/dlq_watcher.py [--watchers 9] [--records 12] [--gap 3] [--backlog 2000]

One embedded broker. Per configuration, ``--watchers`` watchers run in one event loop as the
triggerer runs them: the provider's ``AwaitMessageTrigger`` (what ``KafkaMessageQueueTrigger``
dispatches to), started again after each event and a second after a failure, all in the
connection's one consumer group (``components.kafka_connection``). One watches a topic that does
not exist (an app never deployed), the rest topics that stay empty, but one:

- **live**: it receives ``--records`` records, ``--gap`` s apart. Reported: the records that fired
  an event, the watcher's failed starts on the missing topic, and seconds from a record's send to
  its event (min/median/max).
- **backlog**: ``--backlog`` records a digest already counted (the filter, as ``dlq_record`` does,
  lets them pass without an event) are there, then one new record. Reported: the counted records
  the watcher got through per second, and whether the new record fired within 120 s.

Configurations: the provider's defaults (classic group protocol, 1 s polls) and the best found
(the consumer group protocol, KIP-848, and 0.1 s polls; the provider's polls share asgiref's one
``sync_to_async`` thread). ``DlqRecordsTrigger``, which the platform uses, reads the topic's end
offsets (one request per poll) whatever the backlog, so it has no row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import isolated_settings, summary, table

#: send time per record key, read by ``fired_key`` in the same process
_SENT: dict[str, float] = {}


#: records the filter let pass without an event (a digest counted them)
_SKIPPED: list[float] = []


def fired_key(message: Any) -> dict[str, Any] | None:
    """The watchers' apply_function: the record's key and how long after its send it fired; None
    (no event, as ``assets.dlq_record`` for a counted record) for a ``counted-`` record."""
    key = message.key().decode()
    if key.startswith("counted-"):
        _SKIPPED.append(time.time())
        return None
    return {"key": key, "latency_s": time.time() - _SENT.get(key, time.time())}


async def _watch(topic: str, conn_id: str, poll_timeout: float, fired: list[dict], starts: dict[str, list[int]]):
    from airflow.providers.apache.kafka.triggers.await_message import AwaitMessageTrigger

    while True:  # the triggerer: a trigger that ended (or failed) is started again
        trigger = AwaitMessageTrigger(topics=[topic], kafka_config_id=conn_id, apply_function=f"{__name__}.fired_key",
                                      poll_timeout=poll_timeout, poll_interval=0)
        starts.setdefault(topic, [0, 0])[0] += 1
        try:
            async for event in trigger.run():
                fired.append(event.payload)
                break
        except Exception:  # noqa: BLE001 - a failed start, counted
            starts[topic][1] += 1
            await asyncio.sleep(1)
        finally:
            await trigger.cleanup()


async def _one(bootstrap: str, name: str, extra: dict[str, str], poll_timeout: float, args, run: int) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    tag = f"{re.sub('[^a-z0-9]+', '-', name.lower()).strip('-')}-{run}"
    topics = [f"dlq-{tag}-w{i}" for i in range(args.watchers - 1)]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
    for f in admin.create_topics([NewTopic(t, 3, 1) for t in topics]).values():
        f.result()
    conn_id = f"bench_{abs(hash(tag))}"
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
        {"conn_type": "kafka", "extra": {**extra, "group.id": f"watchers-{tag}"}})
    fired: list[dict] = []
    starts: dict[str, list[int]] = {}
    missing = f"dlq-{tag}-missing"
    tasks = [asyncio.create_task(_watch(t, conn_id, poll_timeout, fired, starts)) for t in [*topics, missing]]
    await asyncio.sleep(5)  # every watcher joined
    producer = Producer({"bootstrap.servers": bootstrap})
    keys = []
    if args.scenario == "backlog":
        for i in range(args.backlog):
            producer.produce(topics[0], key=f"counted-{i}".encode(), value=b"{not json")
        producer.flush(30)
        _SKIPPED.clear()
        t0 = time.time()
        key = f"{tag}-new"
        _SENT[key] = time.time()
        producer.produce(topics[0], key=key.encode(), value=b"{not json")
        producer.flush(10)
        while time.time() < t0 + 120 and not fired:
            await asyncio.sleep(0.2)
        took = time.time() - t0
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return {"skipped_per_s": len(_SKIPPED) / took, "new_fired_s": fired[0]["latency_s"] if fired else None}
    for i in range(args.records):
        key = f"{tag}-{i}"
        _SENT[key] = time.time()
        producer.produce(topics[0], key=key.encode(), value=b"{not json")
        producer.flush(10)
        keys.append(key)
        await asyncio.sleep(args.gap)
    deadline = time.time() + 20
    while time.time() < deadline and len({f["key"] for f in fired} & set(keys)) < len(keys):
        await asyncio.sleep(0.2)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    lat = [f["latency_s"] for f in fired if f["key"] in keys]
    return {"fired": len({f["key"] for f in fired} & set(keys)), "sent": len(keys), "latency": lat,
            "failed_starts": starts.get(missing, [0, 0])[1]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--watchers", type=int, default=9, help="watchers in the triggerer (one on a missing topic)")
    ap.add_argument("--records", type=int, default=12)
    ap.add_argument("--gap", type=float, default=3.0, help="seconds between records")
    ap.add_argument("--backlog", type=int, default=2000, help="counted records before the new one (backlog)")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    from streamops.platform import manager
    from streamops.platform.components import kafka_connection

    with tempfile.TemporaryDirectory(prefix="bench-dlq-watcher-") as tmp:
        settings = isolated_settings(Path(tmp) / "home")
        os.environ.setdefault("AIRFLOW_HOME", str(Path(tmp) / "airflow"))
        platform_extra = json.loads(kafka_connection(settings)["AIRFLOW_CONN_STREAMOPS_KAFKA"])["extra"]
        classic = {k: v for k, v in platform_extra.items() if k != "group.protocol"}
        configs = [("classic protocol, 1 s polls (the provider's defaults)", classic, 1.0),
                   ("classic protocol, 0.1 s polls", classic, 0.1),
                   ("consumer protocol, 1 s polls", platform_extra, 1.0),
                   ("consumer protocol, 0.1 s polls", platform_extra, 0.1)]
        manager.up(settings, only=["kafka"])
        try:
            args.scenario = "live"
            results = {name: [asyncio.run(_one(settings.kafka_bootstrap, name, extra, pt, args, r))
                              for r in range(args.runs)] for name, extra, pt in configs}
            args.scenario = "backlog"
            backlog = {name: asyncio.run(_one(settings.kafka_bootstrap, "b" + name, extra, pt, args, 0))
                       for name, extra, pt in (configs[0], configs[-1])}
        finally:
            manager.down(settings)
    base = statistics.median([x for r in results[configs[0][0]] for x in r["latency"]] or [float("nan")])
    rows = []
    for name, runs in results.items():
        lat = [x for r in runs for x in r["latency"]]
        lo, med, hi = summary(lat) if lat else (float("nan"),) * 3
        rows.append([name, f"{sum(r['fired'] for r in runs)}/{sum(r['sent'] for r in runs)}",
                     sum(r["failed_starts"] for r in runs), f"{lo:.2f}", f"{med:.2f}", f"{hi:.2f}",
                     f"{med / base:.1f}" if lat else "-"])
    print(f"{args.watchers} watchers in one group (one on a missing topic), {args.records} records "
          f"{args.gap:g} s apart, {args.runs} run(s); seconds from a record's send to its event")
    print(table(["configuration", "fired", "failed starts", "min s", "median s", "max s", "median ratio"], rows))
    print(f"\nbacklog: {args.backlog} counted records, then a new one ({args.watchers} watchers)")
    print(table(["configuration", "counted records passed per s", "the new record's event after"],
                [[name, f"{r['skipped_per_s']:.1f}", f"{r['new_fired_s']:.1f} s" if r["new_fired_s"] is not None
                  else "none within 120 s"] for name, r in backlog.items()]))


if __name__ == "__main__":
    main()
