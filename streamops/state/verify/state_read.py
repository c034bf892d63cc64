"""Reading the checkpoint's state for ``streamops verify``: the state store at the verified batch
through the job's serde (``read_state``; a failure is a result, named by ``unreadable_reason``)
and the state files' Hadoop checksums (``checksum_failures``)."""

from __future__ import annotations

import re
import struct
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamops.state.check import SAMPLES

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class StateRead:
    """The state store at the verified batch (or why it could not be read)."""

    values: dict[str, Any] = field(default_factory=dict)
    table: pa.Table | None = None
    rows: int = 0
    error: str | None = None
    corrupt_files: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def readable(self) -> bool:
        return self.error is None

    def summary(self) -> dict[str, Any]:
        return {"readable": self.readable, "keys": len(self.values), "rows": self.rows, "error": self.error,
                "corrupt_files": self.corrupt_files[:SAMPLES], "corrupt_file_count": len(self.corrupt_files),
                "seconds": round(self.seconds, 2)}


def checksum_failures(state_dir: Path) -> list[str]:
    """Files under ``state_dir`` whose bytes do not match their Hadoop ``.NAME.crc`` sidecar.

    Why our own check: a corrupted RocksDB changelog shows up in Spark as "Stream is corrupted"
    with no file name; the sidecars (CRC32 per 512-byte chunk) name the file. A file changed by
    a concurrent writer between the two reads is read again once before it is reported.
    """
    bad = []
    if not state_dir.is_dir():
        return bad
    for crc in sorted(state_dir.rglob(".*.crc")):
        data = crc.with_name(crc.name[1:-4])
        for _attempt in range(2):
            try:
                ok = _crc_matches(crc.read_bytes(), data.read_bytes())
            except FileNotFoundError:  # removed by state maintenance meanwhile
                ok = True
            if ok:
                break
        else:
            bad.append(str(data.relative_to(state_dir.parent)))
    return bad


def _crc_matches(sidecar: bytes, data: bytes) -> bool:
    if len(sidecar) < 8 or sidecar[:4] != b"crc\x00":
        return False
    (chunk,) = struct.unpack(">i", sidecar[4:8])
    if chunk <= 0:
        return False
    sums = sidecar[8:]
    expected_chunks = (len(data) + chunk - 1) // chunk
    if len(sums) != 4 * expected_chunks:
        return False
    for i in range(expected_chunks):
        if zlib.crc32(data[i * chunk:(i + 1) * chunk]) != struct.unpack(">I", sums[4 * i:4 * i + 4])[0]:
            return False
    return True


_ERROR_CLASS = re.compile(r"(\[[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*\][^\n]*?)(?:\s+SQLSTATE: \w+)?\s*$")


def unreadable_reason(exc: BaseException) -> str:
    """One line from a (Java) stack trace: Spark's error class and the root cause."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    error_class = next((m.group(1).strip() for ln in lines if (m := _ERROR_CLASS.search(ln))), None)
    causes = [ln.removeprefix("Caused by: ") for ln in lines if ln.startswith("Caused by: ")]
    root = causes[-1] if causes else None
    if error_class and root and error_class not in root:
        return f"{error_class} (root cause: {root})"[:500]
    first = error_class or root or (lines[0] if lines else "")
    return f"{type(exc).__name__}: {first}"[:500] if not error_class else first[:500]


def read_state(job_cls: Any, spark: Any, checkpoint: Path, batch: int) -> StateRead:
    """Read the state store through the job's serde; any failure becomes ``error`` (not a crash).
    ``table`` is what the job emits for that state (the data-quality suite's rows)."""
    import pyarrow as pa

    from streamops.state.store import read_states

    start = time.monotonic()
    try:
        values = read_states(spark, job_cls, str(checkpoint), batch)
    except Exception as exc:  # noqa: BLE001  # Py4JJavaError, pyspark errors, OSError: all mean unreadable
        return StateRead(error=unreadable_reason(exc), seconds=time.monotonic() - start)
    job = job_cls()
    rows = [v for k, s in values.items() for v in job.emit(k, s).values()]  # in the job's field order
    return StateRead(values, pa.Table.from_pylist(rows) if rows else None, len(values),
                     seconds=time.monotonic() - start)
