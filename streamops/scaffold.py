"""``streamops new-app NAME``: a job file that works, its spec entry and a unit test that passes.

The job is a small ``update`` job (count and total of a number per key) to edit into the real one;
the test runs the lint checks that need no Spark on the job's own sample and checks one state by
hand, so it keeps passing while the job is changed only if the job stays sound. The test imports
only the public API (``streamops.job``, ``streamops.testing``); the spec entry is the minimal one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from streamops.exceptions import UsageError

JOB = '''"""App ``{name}``: per key, how many events and the total of their ``amount``.

Input: JSON ``{{"key": str, "amount": number, "ts": epoch ms}}`` on ``{name}-input``, keyed by key;
``ts`` within ``[MIN_TS, MAX_TS]``, the event times the platform accepts (``streamops.stream_time``).
Edit ``parse``, the state and ``update`` into your job; ``streamops app lint {name}`` checks it.
docs/writing-a-job.md explains each piece.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from streamops.job import Job, Record, Reject, is_int, is_text, json_object
from streamops.stream_time import MAX_TS, MIN_TS

Event = dict[str, Any]
State = dict[str, Any]  # {{"events": int, "total": float, "last_ts": int}}


class {cls}(Job[Event, State]):
    key_name = "key"

    def parse(self, record: Record) -> Event | Reject:
        obj = json_object(record.value)  # the object, or Reject("invalid_json" / "not_an_object")
        if isinstance(obj, Reject):
            return obj
        if not is_text(obj.get("key")):
            return Reject("missing_key")
        amount = obj.get("amount")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(amount):
            return Reject("bad_amount")
        if not is_int(obj.get("ts"), MIN_TS, MAX_TS):
            return Reject("bad_ts")
        return {{"key": obj["key"], "amount": amount, "ts": obj["ts"]}}

    def key(self, event: Event) -> str:
        return event["key"]

    def initial(self, key: str) -> State:
        return {{"events": 0, "total": 0, "last_ts": None}}

    def update(self, key: str, state: State, events: Sequence[Event]) -> State:
        last = state["last_ts"]
        for e in events:
            last = e["ts"] if last is None else max(last, e["ts"])
        return {{"events": state["events"] + len(events),
                "total": round(state["total"] + sum(e["amount"] for e in events), 6), "last_ts": last}}

    def emit(self, key: str, state: State) -> Mapping[str, Any]:
        return {{key: {{"key": key, **state}}}}

    def generate(self, events: int, seed: int) -> Iterator[tuple[bytes | None, bytes]]:
        rng = random.Random(seed)
        for i in range(events):
            key = f"k{{int(rng.random() * 50):02d}}"
            if rng.random() < 0.01:
                yield key.encode(), b"not json"
            else:
                yield key.encode(), json.dumps({{"key": key, "amount": int(rng.random() * 1000) / 100,
                                                 "ts": 1_767_225_600_000 + i * 100}}).encode()
'''

TEST = '''"""{name}'s job without Kafka or Spark: the lint checks that need neither, and one key by hand.

It imports only the public API (``streamops.job``, ``streamops.testing``), so it keeps working
across streamops releases while the job stays sound.
"""

from __future__ import annotations

from jobs.{name} import {cls}
from streamops.job import Record, Reject
from streamops.testing import assert_job_sound, fold, sample_records


def test_the_job_is_sound_on_its_own_sample() -> None:
    # declaration, parse, serde round trip, batch split: `streamops app lint {name} --no-spark`
    assert_job_sound({cls}, sample_records({cls}, topic="{name}-input", events=2000))


def test_one_key_by_hand() -> None:
    values = [b'{{"key": "a", "amount": 1.5, "ts": 10}}', b'{{"key": "a", "amount": 2, "ts": 5}}', b"oops"]
    records = [Record("{name}-input", 0, i, b"a", v) for i, v in enumerate(values)]
    assert isinstance({cls}().parse(records[2]), Reject)
    folded = fold({cls}, records)  # what `streamops check {name}` expects the running app to hold
    assert folded.states == {{"a": {{"events": 2, "total": 3.5, "last_ts": 10}}}}
    assert folded.output == {{"a": {{"key": "a", "events": 2, "total": 3.5, "last_ts": 10}}}}
    assert folded.rejected == {{("{name}-input", 0, 2): "invalid_json"}}
'''

#: the minimal entry: every other field has a default (docs/configuration.md lists them), e.g. the
#: changelog ``{name}-state-changelog``, the DLQ ``{name}-dlq``, hourly savepoints, parallelism 1..2
SPEC = '''
  {name}:  # every other field has a default: docs/configuration.md
    job: jobs.{name}
    input_topics: [{name}-input]
    output_topic: {name}-output
'''


@dataclass
class Scaffold:
    files: list[Path] = field(default_factory=list)


def class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_") if part) or "App"


def scaffold(repo: Path, name: str, *, dry_run: bool = False) -> Scaffold:
    """Write the three pieces; refuses to overwrite a file that exists."""
    from streamops.spec import default_spec_path

    cls = class_name(name)
    job, test, spec = repo / "jobs" / f"{name}.py", repo / "tests" / "unit" / "jobs" / f"test_{name}.py", \
        default_spec_path(repo)
    for path in (job, test):
        if path.exists():
            raise UsageError(f"{path} exists: refusing to overwrite it (pick another name or remove it)")
    out = Scaffold([job, spec, test])
    if dry_run:
        return out
    job.write_text(JOB.format(name=name, cls=cls))
    test.parent.mkdir(parents=True, exist_ok=True)
    test.write_text(TEST.format(name=name, cls=cls))
    text = spec.read_text()
    spec.write_text(text.rstrip("\n") + "\n" + SPEC.format(name=name))
    return out
