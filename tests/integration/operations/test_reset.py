"""``streamops reset`` on a real broker + Spark: the dry run changes nothing, reset to earliest
reprocesses everything exactly once, undo puts checkpoint, offsets and topics back exactly, and a
reset to a datetime into a new output version folds exactly the events from that time on (one
app through all of it: each new app costs a broker, a first run and a check).

The job runs on an in-process Spark (real Spark and RocksDB state files): what is under test is
the checkpoint and the topics. A running app's reset is refused in test_maintenance.py, which has
one running already.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

from streamops.app.marker import last_marker
from streamops.checkpoints import layout
from streamops.kafka.admin import end_offsets
from streamops.kafka.read import latest_per_key
from streamops.ledger import Ledger

APP = "user_activity"
TOPICS = ("user-events", "user-profiles", "user_activity-profiles-changelog", "user-events.dlq",
          f"_streamops-{APP}-commits")


def _json(r) -> dict:
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return json.loads(r.stdout)


def _files(ckpt: Path) -> dict[str, tuple[int, float]]:
    return {str(f.relative_to(ckpt)): (f.stat().st_size, f.stat().st_mtime) for f in ckpt.rglob("*") if f.is_file()}


def _world(app) -> dict:
    """Everything a reset may change: checkpoint files, every topic's watermarks, the marker, the ledger."""
    b = app.settings.kafka_bootstrap
    ledger = Ledger.open(app.settings.ledger_db_url)
    try:
        ops, version = len(ledger.operations(APP, limit=1000)), ledger.output_version(APP)
    finally:
        ledger.close()
    return {"files": _files(app.checkpoint), "topics": {t: end_offsets(b, t) for t in TOPICS},
            "marker": last_marker(app.kafka, f"_streamops-{APP}-commits", APP), "ops": ops, "output_version": version}


def _exact(app) -> dict:
    report = app.check()
    assert report["ok"], json.dumps(report["views"], indent=1)[:3000]
    return report


def test_dry_run_reset_to_earliest_undo_then_reset_to_datetime_into_v2_exact(app_factory) -> None:
    app = app_factory("ua-reset", master="local[2]")
    app.produce(6_000, users=800, seed=71)
    app.run_to_end("--max-offsets-per-trigger", "2500")
    before = _exact(app)
    keys = {v["view"]: v for v in before["views"]}["state"]["expected"]
    batch = layout.last_committed_batch(app.checkpoint)
    profiles_before = latest_per_key(app.settings.kafka_bootstrap, "user-profiles")

    # the dry run: the whole plan, and not one file, offset, record or ledger row changed
    world = _world(app)
    plan = _json(app.cli("reset", APP, "--to-earliest", "--dry-run", "--json"))
    assert plan["dry_run"] and plan["state"] == "wipe" and plan["batch_id"] == batch and not plan["running"]
    assert {(o["topic"], o["partition"]): (o["current"], o["target"]) for o in plan["offsets"]} == {
        ("user-events", int(p)): (o, 0) for p, o in before["offsets"]["user-events"].items()}
    assert plan["records_to_reprocess"] == before["input_records"] == 6_000 and plan["records_to_skip"] == 0
    assert any("recreate user_activity-profiles-changelog" in a for a in plan["actions"])
    assert _world(app) == world

    # reset to earliest: state wiped, changelog emptied, everything reprocessed exactly once
    out = _json(app.cli("reset", APP, "--to-earliest", "--json"))
    aside = Path(out["aside"])
    assert layout.last_committed_batch(aside / "checkpoint") == batch
    assert out["saved"]["changelog"]["keys"] == out["saved"]["output"]["keys"] == keys
    assert layout.start_offsets(app.checkpoint) == {"user-events": {str(p): 0 for p in range(6)}}
    assert all(hi == 0 for _lo, hi in end_offsets(app.settings.kafka_bootstrap,
                                                  "user_activity-profiles-changelog").values())
    marker = last_marker(app.kafka, f"_streamops-{APP}-commits", APP)
    assert marker["rewind"] and marker["batch_id"] == -1
    time.sleep(1.5)
    since = datetime.now(UTC).isoformat()  # the time the reset to a datetime below goes back to
    time.sleep(1.5)
    app.produce(1_000, users=900, seed=72)  # and new events after the reset
    app.run_to_end("--max-offsets-per-trigger", "2500")
    after = _exact(app)  # state, changelog, output, DLQ (each invalid record once) == fold over all 7000
    assert after["input_records"] == 7_000
    ledger = Ledger.open(app.settings.ledger_db_url)
    try:
        op = ledger.get_operation(out["operation_id"])
        assert op["kind"] == "reset" and op["outcome"] == "succeeded" and op["params"]["to_earliest"] is True
        assert op["before"]["batch"] == batch and op["after"]["aside"] == str(aside)
    finally:
        ledger.close()

    gained = set(latest_per_key(app.settings.kafka_bootstrap, "user-profiles")) - set(profiles_before)
    assert gained  # users first seen after the reset

    # undo: the previous checkpoint, offsets, changelog and output come back exactly
    plan = _json(app.cli("reset", APP, "--undo", str(out["operation_id"]), "--dry-run", "--json"))
    assert plan["dry_run"] and plan["restore_batch"] == batch
    undone = _json(app.cli("reset", APP, "--undo", str(out["operation_id"]), "--json"))
    assert layout.last_committed_batch(app.checkpoint) == batch
    assert layout.committed_offsets(app.checkpoint) == layout.committed_offsets(aside / "checkpoint")
    assert undone["written"]["output"] == {"keys": keys, "tombstones": len(gained)}
    again = _exact(app)  # state at the old batch == the fold over the first 6000, and so are the topics
    assert again["offsets"] == before["offsets"] and again["input_records"] == 6_000
    assert latest_per_key(app.settings.kafka_bootstrap, "user-profiles") == profiles_before
    r = app.cli("reset", APP, "--undo", str(out["operation_id"]))
    assert r.returncode == 2 and "already undone" in r.stderr

    # and the app goes on from the restored checkpoint: the 1000 newer events once more, exactly
    app.run_to_end("--max-offsets-per-trigger", "2500")
    assert _exact(app)["input_records"] == 7_000

    # refusals: bad params are usage errors and change nothing
    world = _world(app)
    for args, message in [(("--to-earliest", "--to-latest"), "not allowed with"),
                          (("--by-duration", "P1M"), "years and months"),
                          (("--to-earliest", "--state", "keep"), "--force"),
                          (("--to-earliest", "--output-version", "two"), "output version must look like v2")]:
        r = app.cli("reset", APP, *args)
        assert r.returncode == 2 and message in r.stderr, r.stderr
    r = app.cli("reset", "nope", "--to-earliest")
    assert r.returncode == 2 and "unknown app" in r.stderr
    assert _world(app) == world

    # reset to a datetime into a new output version: state, changelog and v2 == the fold over the
    # events with a timestamp >= T (the 1000 newer ones); the old output stays as it was
    base = latest_per_key(app.settings.kafka_bootstrap, "user-profiles")
    plan = _json(app.cli("reset", APP, "--to-datetime", since, "--output-version", "v2", "--dry-run", "--json"))
    assert plan["output_topic_after"] == "user-profiles.v2" and plan["output_topic_before"] == "user-profiles"
    end = layout.committed_offsets(app.checkpoint)["user-events"]
    first_new = {o["partition"]: o["target"] for o in plan["offsets"]}
    assert sum(end.values()) - sum(first_new.values()) == 1_000 == plan["records_to_reprocess"]
    out = _json(app.cli("reset", APP, "--to-datetime", since, "--output-version", "v2", "--json"))
    assert "output" not in out["saved"]  # the old output is not touched, so nothing to save for it
    app.run_to_end()
    r = app.cli("check", APP, "--json", "--since", since, timeout=600)  # the CLI path of check, once
    report = json.loads(r.stdout)
    assert r.returncode == 0 and report["ok"], json.dumps(report["views"], indent=1)[:3000]
    assert report["input_records"] == 1_000
    v2 = latest_per_key(app.settings.kafka_bootstrap, "user-profiles.v2")
    assert len(v2) == {v["view"]: v for v in report["views"]}["state"]["expected"]
    assert latest_per_key(app.settings.kafka_bootstrap, "user-profiles") == base  # blue stays as it was
    ledger = Ledger.open(app.settings.ledger_db_url)
    try:
        assert ledger.output_version(APP) == "v2"
    finally:
        ledger.close()
