"""``streamops verify``'s reading of the checkpoint's state: through the declared job's serde, a
failure named by its error class and root cause, the state files' checksums."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from streamops.state.verify.expectations import state_frame
from streamops.state.verify.outputs import emitted
from streamops.state.verify.state_read import checksum_failures, read_state, unreadable_reason

JAVA_TRACE = """An error occurred while calling o52.getResult.
: org.apache.spark.SparkException: Exception thrown in awaitResult:
\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:70)
Caused by: org.apache.spark.SparkException: [CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during \
loading state.  SQLSTATE: 58030
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotLoadStore(QueryExecutionErrors.scala:2846)
Caused by: java.io.IOException: Stream is corrupted
\tat net.jpountz.lz4.LZ4BlockInputStream.refill(LZ4BlockInputStream.java:250)
"""


def test_unreadable_reason_names_error_class_and_root_cause() -> None:
    reason = unreadable_reason(RuntimeError(JAVA_TRACE))
    assert reason.startswith("[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during loading state.")
    assert reason.endswith("(root cause: java.io.IOException: Stream is corrupted)")
    assert unreadable_reason(FileNotFoundError("no such dir")) == "FileNotFoundError: no such dir"


# -- reading state through the declared job -----------------------------------------------------------
def test_read_state_gives_states_and_the_emitted_rows_for_the_quality_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs.user_activity import UserActivity
    from streamops.state import store

    states = {"u1": {"last_login_ts": None, "purchases": 2, "total_cents": 1235, "events": 7},
              "u2": {"last_login_ts": 5, "purchases": 0, "total_cents": 0, "events": 1}}
    monkeypatch.setattr(store, "read_states", lambda spark, job_cls, ckpt, batch: dict(states))
    st = read_state(UserActivity, None, Path("/nowhere"), 3)
    assert st.readable and st.values == states and st.rows == 2
    frame = state_frame(st.table)
    assert list(frame.columns) == ["user_id", "last_login_ts", "purchases", "total_amount", "events"]
    assert str(frame["last_login_ts"].dtype) == "Int64"
    assert frame.set_index("user_id").loc["u1", "total_amount"] == 12.35
    assert emitted(UserActivity, states)["u2"] == {"user_id": "u2", "last_login_ts": 5, "purchases": 0,
                                                     "total_amount": 0.0, "events": 1}


def test_read_state_of_an_empty_store(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs.user_activity import UserActivity
    from streamops.state import store

    monkeypatch.setattr(store, "read_states", lambda *a: {})
    st = read_state(UserActivity, None, Path("/nowhere"), 0)
    assert st.readable and st.values == {} and st.table is None and st.rows == 0


def test_read_state_failure_is_a_result_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs.user_activity import UserActivity
    from streamops.state import store

    def broken(*a):
        raise RuntimeError(JAVA_TRACE)

    monkeypatch.setattr(store, "read_states", broken)
    st = read_state(UserActivity, None, Path("/nowhere"), 3)
    assert not st.readable and "Stream is corrupted" in st.error and st.values == {}


# -- checksums ------------------------------------------------------------------------------------
def write_with_crc(path: Path, data: bytes, chunk: int = 512) -> None:
    """A file plus its Hadoop ChecksumFileSystem sidecar (``.NAME.crc``: magic, chunk, CRC32s)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    sums = b"".join(struct.pack(">I", zlib.crc32(data[i:i + chunk])) for i in range(0, len(data), chunk))
    path.with_name(f".{path.name}.crc").write_bytes(b"crc\x00" + struct.pack(">i", chunk) + sums)


def test_checksum_failures_name_the_changed_file(tmp_path: Path) -> None:
    state = tmp_path / "ckpt" / "state"
    write_with_crc(state / "0" / "0" / "1.changelog", bytes(range(256)) * 5)
    write_with_crc(state / "0" / "1" / "1.changelog", b"")
    write_with_crc(state / "0" / "_metadata" / "metadata", b'{"operatorId":0}')
    assert checksum_failures(state) == []
    target = state / "0" / "0" / "1.changelog"
    data = bytearray(target.read_bytes())
    data[700] ^= 0xFF
    target.write_bytes(bytes(data))
    assert checksum_failures(state) == ["state/0/0/1.changelog"]
    target.write_bytes(bytes(data[:-1]))  # truncated: the chunk count no longer matches either
    assert checksum_failures(state) == ["state/0/0/1.changelog"]
    assert checksum_failures(tmp_path / "missing") == []
