"""``host.files.write_json``: whole and atomic, also with two threads writing one file at once
(a driver's batch and its progress listener both write its heartbeat)."""

from __future__ import annotations

import threading
from pathlib import Path

from streamops.host.files import read_json, write_json


def test_two_threads_writing_one_file_never_fail_and_leave_a_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "apps" / "a" / "driver.json"
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def writer(name: str) -> None:
        start.wait()
        try:
            for i in range(300):
                write_json(path, {"writer": name, "i": i, "pad": "x" * 2000})
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("batch", "listener")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []  # a shared temp name made one writer's rename fail (FileNotFoundError)
    last = read_json(path)
    assert last["i"] == 299 and last["writer"] in ("batch", "listener") and len(last["pad"]) == 2000
    assert [p.name for p in path.parent.iterdir()] == ["driver.json"]  # no temp file left behind
