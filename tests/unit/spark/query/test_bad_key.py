"""A record whose key is not UTF-8 text (a JSON escape of a lone surrogate, ``"\\ud800"``) goes to
the DLQ as ``bad_key`` in every job shape, and ``check``'s fold says the same. It used to fail
its micro-batch (Arrow refuses the string) and so stop the app for ever, whatever the job."""

from __future__ import annotations

import pyarrow as pa
import pytest

from jobs.orders import Orders
from jobs.sessions import Sessions
from jobs.user_activity import UserActivity
from streamops.job import BAD_KEY, Record, Reject, key_or_reject
from streamops.spark.query.plan import JobQuery
from streamops.spark.query.worker import REJECT_LANE, parse_aggregate, parse_update, unpack_row
from streamops.state.oracle import Expected, events_by_key, timed_items

pytestmark = pytest.mark.unit

GOOD = {UserActivity: b'{"user_id": "u1", "event_type": "login", "amount": 0, "ts": 5}',
        Orders: b'{"order_id": "o1", "customer": "c1", "amount_cents": 5, "ts": 5}',
        Sessions: b'{"user": "u1", "page": "/a", "ts": 1767225600000}'}
POISON = {UserActivity: b'{"user_id": "u\\ud800", "event_type": "login", "amount": 0, "ts": 5}',
          Orders: b'{"order_id": "o2", "customer": "c\\ud800", "amount_cents": 5, "ts": 5}',
          Sessions: b'{"user": "u\\udfff", "page": "/a", "ts": 1767225600000}'}


def _batch(values: list[bytes]) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_pydict({
        "key": [b"k"] * n, "value": values, "topic": ["in"] * n, "partition": pa.array([0] * n, pa.int32()),
        "offset": list(range(n)), "timestamp": pa.array([1767225600000000] * n, pa.timestamp("us"))})


def test_key_or_reject() -> None:
    job = Orders()
    assert key_or_reject(job, {"customer": "c1"}) == "c1"
    assert key_or_reject(job, {"customer": "c\ud800"}) == Reject(BAD_KEY)


@pytest.mark.parametrize("job_cls", [UserActivity, Orders, Sessions], ids=lambda c: c.__name__)
def test_the_parse_stage_sends_a_key_utf8_cannot_encode_to_the_dlq(job_cls) -> None:
    batch = _batch([GOOD[job_cls], POISON[job_cls]])
    if job_cls.is_aggregate():
        fn = parse_aggregate(job_cls, JobQuery(job_cls, state_partitions=1).parsed_schema())
    else:
        fn = parse_update(job_cls)
    rows = [r if "row" not in r else {**r, **unpack_row(r["row"])}
            for out in fn(iter([batch])) for r in out.to_pylist() if r.get("lane", 0) <= REJECT_LANE]
    assert [(r["src_offset"], r["reason"]) for r in rows] == [(0, None), (1, BAD_KEY)]
    assert rows[1]["raw_value"] == POISON[job_cls]  # the record as it came, for its DLQ copy


@pytest.mark.parametrize("job_cls", [UserActivity, Orders, Sessions], ids=lambda c: c.__name__)
def test_checks_fold_rejects_it_alike(job_cls) -> None:
    records = [Record("in", 0, i, b"k", v, 1767225600000) for i, v in enumerate([GOOD[job_cls], POISON[job_cls]])]
    out = Expected()
    keys = timed_items(job_cls(), records, out, None)[0] if job_cls.has_time() else events_by_key(job_cls(), records, out)
    assert len(keys) == 1 and out.rejected == {("in", 0, 1): BAD_KEY}
