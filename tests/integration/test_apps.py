"""Apps other than the demo, end to end on real Kafka protocol + Spark, each only a spec entry plus
a job file: fed from their own generator through the CLI, run, killed, rebuilt and compacted,
and after every step ``check`` (the job's own update folded in plain Python) is exact."""

from __future__ import annotations

import json

from streamops.checkpoints import compact as cc
from streamops.checkpoints import layout

LOCAL = "local[2]"


def _json(r) -> dict:
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return json.loads(r.stdout)


def _exact(app, input_records: int) -> dict:
    report = app.check()
    views = {v["view"]: v for v in report["views"]}
    assert report["ok"], json.dumps(views, indent=1)[:3000]
    assert report["input_records"] == input_records
    for v in views.values():
        assert (v["missing"], v["extra"], v["different"], v["duplicates"]) == (0, 0, 0, 0), v
    return views


def test_page_stats_windows_late_records_kill_rebuild_compact_exact(app_factory) -> None:
    app = app_factory("page-stats", master=LOCAL, app="page_stats")
    out = _json(app.cli("produce", "page_stats", "--events", "6000", "--seed", "1", "--json"))
    assert (out["topic"], out["events"], out["partitions"]) == ("page-views", 6000, 4)
    # small batches: windows close, late views are screened and closed windows expire across batches
    app.run_to_end("--max-offsets-per-trigger", "1500", "--trigger-interval", "1 second")
    assert app.committed_batch() >= 3
    views = _exact(app, 6000)
    dlq = views["dlq"]
    assert dlq["expected"] == dlq["actual"] > 0
    assert views["output"]["expected"] > views["state"]["expected"]  # one record per page and minute
    reasons = _dlq_reasons(app)
    assert "late" in reasons and len(reasons) >= 4, reasons

    r = app.cli("verify", "page_stats", "--json", timeout=600)
    report = json.loads(r.stdout)
    assert r.returncode == 0 and report["ok"], r.stdout[-3000:]

    # kill -9 mid-batch, then go on: nothing lost, nothing counted twice (window state included)
    app.cli("produce", "page_stats", "--events", "4000", "--seed", "2")
    app.start("--max-offsets-per-trigger", "800", "--trigger-interval", "1 second")
    before = app.committed_batch()
    app.wait_for(lambda: app.committed_batch() >= before + 2, what="two more batches")
    app.kill()
    app.run_to_end()
    _exact(app, 10_000)

    # rebuild-state from the changelog (the serialized state) into 2 state partitions, then go on
    rebuilt = _json(app.cli("rebuild-state", "page_stats", "--from-changelog", "--state-partitions", "2", "--json",
                            timeout=600))
    assert rebuilt["state_partitions_after"] == 2 and rebuilt["query_sources"] == 1
    assert sorted(p for _o, p in cc.partitions(app.checkpoint)) == [0, 1]
    assert layout.last_committed_batch(app.checkpoint) == 0
    _exact(app, 10_000)
    app.cli("produce", "page_stats", "--events", "2000", "--seed", "3")
    app.run_to_end()
    _exact(app, 12_000)

    # compaction seeds a snapshot through the same serde and installs it
    comp = _json(app.cli("compact", "page_stats", "--json", timeout=600))
    assert comp["installed"], comp
    _exact(app, 12_000)


def _dlq_reasons(app) -> dict[str, int]:
    from streamops.kafka.read import read_topic
    from streamops.spark.job_query import dlq_entry

    out: dict[str, int] = {}
    for m in read_topic(app.settings.kafka_bootstrap, "page-views.dlq"):
        _where, reason = dlq_entry(m.headers())
        out[reason] = out.get(reason, 0) + 1
    return out
