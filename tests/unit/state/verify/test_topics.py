"""``streamops verify``'s topic scans (Kafka faked): latest value per key as of the batch, progress
lines, the fast JSON decoder."""

from __future__ import annotations

import json

import pytest

from streamops.state.verify.topics import decode_json, progress_line, scan_topic


def test_progress_line() -> None:
    assert progress_line("x:", 250, 1000, width=8) == "x: [##------]  25% 250/1,000"
    assert progress_line("x:", 5, None) == "x: 5"
    assert "100%" in progress_line("x:", 12, 10)


# -- topic scans (Kafka faked) ---------------------------------------------------------------------
class Msg:
    def __init__(self, key, value, batch=None):
        self._k, self._v = key, value
        self._h = None if batch is None else [("streamops.batch_id", str(batch).encode())]

    def key(self):
        return self._k

    def value(self):
        return self._v

    def headers(self):
        return self._h


def test_scan_topic_latest_per_key_as_of_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamops.kafka import admin, read
    from streamops.spark.query.records import batch_of

    msgs = [
        Msg(b"a", b'{"n": 1}', batch=1), Msg(b"b", b'{"n": 1}', batch=1), Msg(b"c", b'{"n": 1}', batch=1),
        Msg(b"a", b'{"n": 2}', batch=2), Msg(b"b", None),  # tombstone (no header: not the job's)
        Msg(b"c", b'{"n": 3}', batch=3),  # a batch after the verified one: ignored
        Msg(None, b'{"n": 9}', batch=1), Msg(b"d", b"{not json", batch=2), Msg(b"\xff", b'{"n": 5}'),
    ]
    monkeypatch.setattr(read, "read_topic", lambda bootstrap, topic, **kw: iter(msgs))
    monkeypatch.setattr(admin, "end_offsets", lambda bootstrap, topic, **kw: {0: (0, len(msgs))})
    lines: list[str] = []
    r = scan_topic("x:1", "t", view="changelog", max_batch=2, batch_of=batch_of, progress=lines.append)
    assert r.values == {"a": {"n": 2}, "c": {"n": 1}, "d": {"undecodable": "{not json"}, "\\xff": {"n": 5}}
    assert (r.records, r.tombstones, r.later, r.undecodable) == (9, 1, 1, ["d"])
    assert "100%" in lines[-1] and "later batches ignored" in lines[-1]
    # without a batch hook every record counts
    assert scan_topic("x:1", "t", view="output").values["c"] == {"n": 3}


@pytest.mark.parametrize("raw", [
    b'{"a":1}', b' {"a": 1} ', b'{"a":1}x', b"[1,2]", b"nul", b"", b"\xff", b'{"a":NaN}',
    '{"é":"ü"}'.encode(), b'\xef\xbb\xbf{"a":1}', '{"a":1}'.encode("utf-16"),
])
def test_decode_json_agrees_with_json_loads(raw: bytes) -> None:
    def outcome(f):
        try:
            return repr(f(raw))
        except ValueError as exc:
            return type(exc).__name__

    assert outcome(decode_json) == outcome(json.loads)
