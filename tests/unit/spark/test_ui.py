"""The Spark UI reader waits out a driver too busy to answer one read (test_resize read a busy
driver's executors and failed on a single 10 s timeout)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from streamops.spark import ui


class _SlowFirst(BaseHTTPRequestHandler):
    calls: list[str] = []

    def do_GET(self) -> None:  # http.server calls it by this name
        self.calls.append(self.path)
        if len(self.calls) == 1:
            time.sleep(1.5)  # past the reader's timeout: the first read gives up
        body = json.dumps([{"id": "driver"}, {"id": "1", "isActive": True}, {"id": "2", "isActive": False}]).encode()
        status = 404 if "missing" in self.path else 200
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    _SlowFirst.calls = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _SlowFirst)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", _SlowFirst.calls
    srv.shutdown()
    srv.server_close()


def test_a_read_that_times_out_is_tried_again(server, monkeypatch) -> None:
    url, calls = server
    monkeypatch.setattr(ui, "_get", _short(ui._get))
    assert set(ui.executors(url, "app-1")) == {"1"}
    assert calls == ["/api/v1/applications/app-1/executors"] * 2


def test_an_http_error_is_an_answer_not_retried(server) -> None:
    url, calls = server
    calls.append("warm")  # no slow first call
    with pytest.raises(ui.urllib.error.HTTPError):
        ui._get(url, "missing", timeout=5)
    assert calls == ["warm", "/api/v1/missing"]


def test_a_driver_that_never_answers_fails_after_the_attempts() -> None:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)  # accepts, never answers
    try:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            ui._get(f"http://127.0.0.1:{sock.getsockname()[1]}", "x", timeout=0.3, attempts=2)
        assert time.monotonic() - t0 >= 0.6
    finally:
        sock.close()


def _short(get):
    return lambda url, path, **kw: get(url, path, timeout=0.5, attempts=3)


def test_the_task_readers_read_only_the_stages_they_report(monkeypatch) -> None:
    stages = [{"stageId": 3, "attemptId": 0, "schedulingPool": "query"},
              {"stageId": 4, "attemptId": 0, "schedulingPool": "warmup"},
              {"stageId": 5, "attemptId": 1, "schedulingPool": "query"}]
    tasks = {3: [{"executorId": "0", "duration": 100}],
             4: [{"executorId": "1", "duration": 1500}, {"executorId": "1", "duration": 500}, {"index": 2}],
             5: [{"executorId": "0", "duration": 200}]}
    read: list[str] = []

    def get(_url: str, path: str):
        read.append(path)
        if path.endswith("/stages"):
            return stages
        return tasks[int(path.split("/stages/")[1].split("/")[0])]

    monkeypatch.setattr(ui, "_get", get)
    assert [(st["stageId"], t.get("executorId")) for st, t in ui.stage_tasks("u", "a", after_stage=3)] == \
        [(4, "1"), (4, "1"), (4, None), (5, "0")]
    assert "applications/a/stages/5/1/taskList?length=1000" in read
    read.clear()
    assert ui.pool_tasks("u", "a", {"warmup"}) == {"1": (2, 2.0)}
    assert read == ["applications/a/stages", "applications/a/stages/4/0/taskList?length=1000"]
