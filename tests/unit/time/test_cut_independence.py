"""Property: a job with stream time gives the same output, changelog, DLQ and state whatever the
batch cut, equal to ``check``'s fold (``stream_time``; the app's own parse, group function and
driver step, run as Spark runs them by ``tests.fixtures.stream_sim``)."""

from __future__ import annotations

import random
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs import sessions
from streamops.job import Record, find_job
from streamops.state.oracle import fold_input, normalized
from tests.fixtures.stream_sim import run_batches

pytestmark = pytest.mark.unit
PARTITIONS = [("clicks", p) for p in range(3)]


def _records(job_module, events: int, seed: int, **gen) -> list[Record]:
    offsets = dict.fromkeys(range(3), 0)
    out = []
    for k, v in job_module.generate(events, seed=seed, **gen):
        p = zlib.crc32(k) % 3
        out.append(Record("clicks", p, offsets[p], k, v, None))
        offsets[p] += 1
    return out


def cut(records: list[Record], sizes: str | int, seed: int) -> list[list[Record]]:
    """Micro-batches: each takes up to ``sizes`` records (or a random number) from every partition."""
    rng = random.Random(seed)
    queues = {p: [r for r in records if r.partition == p] for _t, p in PARTITIONS}
    batches = []
    while any(queues.values()):
        batch = []
        for q in queues.values():
            n = rng.randint(0, 9) if sizes == "random" else int(sizes)
            batch += q[:n]
            del q[:n]
        batches.append(batch)
    return batches


def assert_same(job_cls, records: list[Record], batches: list[list[Record]]) -> None:
    expected = fold_input(job_cls, records, PARTITIONS)
    got = run_batches(job_cls, batches, PARTITIONS)
    assert got.output == expected.output
    assert got.dlq == expected.rejected
    assert got.dlq_count == len(expected.rejected)  # each rejected record once
    assert {k: normalized(job_cls, s) for k, s in got.states.items()} == expected.states


@pytest.mark.parametrize("sizes", [1, 2, 7, "random"])
def test_sessions_are_the_same_whatever_the_batch_cut(sizes) -> None:
    job_cls = find_job(sessions)
    records = _records(sessions, 600, seed=3, users=20, step_ms=20_000)
    expected = fold_input(job_cls, records, PARTITIONS)
    # the sample has what the property is about: late clicks, closed sessions, quiet users
    assert "late" in expected.rejected.values()
    assert len(expected.output) > 20
    assert_same(job_cls, records, cut(records, sizes, seed=1))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), events=st.integers(1, 300), users=st.integers(1, 12),
       step=st.sampled_from([1_000, 60_000, 600_000]), sizes=st.sampled_from([1, 2, 7, "random"]),
       cut_seed=st.integers(0, 1000))
def test_any_input_any_cut(seed, events, users, step, sizes, cut_seed) -> None:
    job_cls = find_job(sessions)
    records = _records(sessions, events, seed=seed, users=users, step_ms=step)
    assert_same(job_cls, records, cut(records, sizes, cut_seed))
