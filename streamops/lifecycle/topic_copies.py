"""What an operation keeps of a topic it is about to replace, and how an undo writes it back.

A reset recreates the changelog (brokers refuse to delete records from a compacted topic) and the
app then upserts new values into its output; an undo puts both back. What is kept is each
topic's latest value per key (the view a compacted topic and every reader of it has), as parquet
with keys and values as the bytes they are.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamops.kafka.config import KafkaConfig
from streamops.spec import AppSpec

#: the file each saved topic goes to, by role
SAVED = {"changelog": "changelog.parquet", "output": "output.parquet"}


def save_topics(kafka: KafkaConfig, spec: AppSpec, folder: Path, *, output: str | None,
                progress: Callable[[str], None] = lambda _m: None,
                changelog_missing_ok: bool = False) -> dict[str, Any]:
    """The changelog's (and ``output``'s) latest value per key into ``folder``:
    ``{role: {"topic", "keys"}}``.

    ``changelog_missing_ok``: a changelog that does not exist is saved empty. An undo needs it:
    the operation it reverses may have been killed between deleting the changelog and creating it
    again, and what that left (no changelog) is what an undo of the undo would put back."""
    saved: dict[str, Any] = {}
    for role, topic in (("changelog", spec.changelog_topic), ("output", output)):
        if topic is None:
            continue
        progress(f"{spec.name}: saving the latest value per key of {topic} ...")
        saved[role] = {"topic": topic, "keys": save_latest(kafka, topic, folder / SAVED[role],
                                                           missing_ok=changelog_missing_ok and role == "changelog")}
    return saved


def save_latest(kafka: KafkaConfig, topic: str, path: Path, *, missing_ok: bool = False) -> int:
    """``topic``'s latest value per key into a parquet file, keys as the bytes they are
    (``missing_ok``: a topic that does not exist as an empty file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streamops.kafka.exceptions import TopicNotFoundError
    from streamops.kafka.read import latest_per_key

    try:
        latest = latest_per_key(kafka, topic, decode=lambda v: v, raw_keys=True, past_open_transactions=True)
    except TopicNotFoundError:
        if not missing_ok:
            raise
        latest = {}
    pq.write_table(pa.table({"key": pa.array(list(latest), pa.binary()),
                             "value": pa.array(list(latest.values()), pa.binary())}), path)
    return len(latest)


def recreate_changelog(kafka: KafkaConfig, spec: AppSpec) -> None:
    """The app's changelog topic, deleted and created empty with its own settings
    (failpoint ``changelog.deleted``: between the two)."""
    from streamops.app.topics import app_topic_specs
    from streamops.host import failpoints
    from streamops.kafka.admin import recreate_topic

    recreate_topic(kafka, app_topic_specs(spec)["changelog"],
                   deleted=lambda: failpoints.hit("changelog.deleted"))


def write_back(kafka: KafkaConfig, path: Path, topic: str, *, tombstones: bool) -> dict[str, int]:
    """Append the saved latest values to ``topic`` (and tombstones for keys it gained since)."""
    import pyarrow.parquet as pq

    from streamops.app.topics import SINK_PARTITIONER
    from streamops.kafka.admin import partitions
    from streamops.kafka.produce import produce
    from streamops.kafka.read import latest_per_key

    table = pq.read_table(path)
    keys, values = table.column("key").to_pylist(), table.column("value").to_pylist()
    extra: list[bytes] = []
    if tombstones:
        have = set(keys)
        extra = [k for k in latest_per_key(kafka, topic, decode=lambda v: v, raw_keys=True,
                                           past_open_transactions=True) if k not in have]
    n = len(partitions(kafka, topic))
    # the app's partitioner: a key's write-back must land in the partition its other records are in
    produce(kafka, topic, [*zip(keys, values, strict=True), *((k, None) for k in extra)],
            partitions=n, config={"partitioner": SINK_PARTITIONER})
    return {"keys": len(keys), "tombstones": len(extra)}
