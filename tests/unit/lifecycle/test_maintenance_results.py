"""What ``compact`` and ``rebuild-state`` print with ``--json`` (and return as an Airflow task's
XCom): every variant's document, keys in order, pinned from the dicts these operations returned
before they returned typed results. Kafka and Spark are stubbed; the plans, the ledger and the
checkpoint files are real."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Self

import pytest

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.context import AppContext
from streamops.cli import main
from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger
from streamops.lifecycle import maintenance as m
from streamops.lifecycle import waits
from streamops.results import Result
from streamops.settings import Settings
from streamops.spec import AppSpec, default_spec_path, get_app, load_specs

COMPACT_PLAN = ["app", "batch_id", "running", "bytes_before", "checkpoint", "state_version", "live",
                "install_snapshots", "delete_files", "delete_bytes", "chains_before", "chains_after",
                "savepoints_beyond_retention"]
COMPACT_DRY_RUN = ["app", "batch_id", "running", "bytes_before", "checkpoint", "state_version", "live",
                   "install_snapshots", "delete_files", "delete_bytes", "chains_before", "chains_after",
                   "savepoints_beyond_retention", "dry_run"]
COMPACT_RUN = ["app", "batch_id", "running", "bytes_before", "checkpoint", "state_version", "live",
               "install_snapshots", "delete_files", "delete_bytes", "chains_before", "chains_after",
               "savepoints_beyond_retention", "dry_run", "operation_id", "installed", "freed_bytes", "bytes_after",
               "restore_seconds_before", "restore_seconds_after", "savepoints_removed", "seconds"]
#: what the compact operation journals as its ``after`` (the ledger's record of it)
COMPACT_AFTER = ["batch_id", "bytes_after", "freed_bytes", "restore_seconds_before", "restore_seconds_after",
                 "installed", "savepoints_removed", "live"]
REBUILD_PLAN = ["app", "running", "marker_batch", "query_sources", "stream_time", "checkpoint_batch",
                "state_partitions_before", "state_partitions_after", "changelog_topic", "changelog_keys", "offsets",
                "checkpoint", "set_aside_to", "actions", "spec_note"]
REBUILD_DRY_RUN = ["app", "running", "marker_batch", "query_sources", "stream_time", "checkpoint_batch",
                   "state_partitions_before", "state_partitions_after", "changelog_topic", "changelog_keys",
                   "offsets", "checkpoint", "set_aside_to", "actions", "spec_note", "dry_run"]
REBUILD_RUN = ["app", "running", "marker_batch", "query_sources", "stream_time", "checkpoint_batch",
               "state_partitions_before", "state_partitions_after", "changelog_topic", "changelog_keys", "offsets",
               "checkpoint", "set_aside_to", "actions", "spec_note", "dry_run", "operation_id", "aside", "seconds"]

MARKER = {"batch_id": 2, "input_end": {"shop-in": {"0": 7}},
          "stream_time": {"spark_watermark": 0, "watermark": 5, "clocks": [["shop-in", "0", 5]]}}
CHANGELOG = {"k1": b"{}", "k2": b"{}", "k3": b"{}"}


def doc(result: Result) -> dict[str, Any]:
    """The result's JSON document, as ``--json`` prints it."""
    assert isinstance(result, Result)
    return result.to_dict()


def _checkpoint(path: Path, batches: int) -> None:
    """A checkpoint as Spark leaves it after committing ``batches`` batches of one stateful
    operator with two state partitions (changelogs only, no snapshot yet)."""
    (path / "offsets").mkdir(parents=True)
    (path / "commits").mkdir()
    (path / "metadata").write_text(json.dumps({"id": "1111aaaa-0000-0000-0000-000000000001"}))
    for b in range(batches):
        (path / "offsets" / str(b)).write_text(
            f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":0}}\n{{"shop-in":{{"0":{3 + b}}}}}\n')
        (path / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    for part in (0, 1):
        d = path / "state" / "0" / str(part)
        (d / "SSTs").mkdir(parents=True)
        for v in range(1, batches + 1):
            (d / f"{v}.changelog").write_bytes(b"x" * 10)


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Settings, AppSpec]:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "streams.yaml").write_text(
        "apps:\n  shop:\n    job: jobs.shop\n    input_topics: [shop-in]\n    output_topic: shop-out\n    state_partitions: 2\n")
    monkeypatch.setenv("STREAMOPS_REPO", str(tmp_path))
    monkeypatch.setenv("STREAMOPS_HOME", str(tmp_path / "home"))
    settings = Settings.from_env()
    spec = get_app(load_specs(default_spec_path(tmp_path)), "shop")
    _checkpoint(checkpoint_dir(settings, spec), 3)
    return settings, spec


@pytest.fixture
def ledger(app: tuple[Settings, AppSpec]):
    opened = Ledger.open(app[0].ledger_db_url)
    yield opened
    opened.close()


def _ctx(app: tuple[Settings, AppSpec], ledger: Ledger) -> AppContext:
    settings, spec = app
    return AppContext(settings, spec, ledger, KafkaConfig.plaintext(settings.kafka_bootstrap))


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """What needs Spark or the job's code, stubbed: the job's query, the restore time, the seeding."""
    query = SimpleNamespace(job_cls=object, seed_table=lambda rows: SimpleNamespace(num_rows=len(rows)))
    monkeypatch.setattr(m, "JobQuery", SimpleNamespace(for_spec=lambda spec, repo: query))
    monkeypatch.setattr(m, "restore_seconds", lambda spark, job_cls, ckpt, batch: 0.25)
    monkeypatch.setattr(m, "_install_snapshots", lambda spark, query, plan, batch, tmp, app, progress:
                        [f"{o}/{p}" for o, p in plan.install])
    monkeypatch.setattr(m.seed, "seed_columns", lambda query: [])
    monkeypatch.setattr(m, "decode_changelog", lambda job_cls, changelog: list(changelog.items()))
    monkeypatch.setattr(m, "_seed", lambda spark, query, table, tmp, plan, progress: None)
    monkeypatch.setattr(m.seed, "seed_session", lambda settings: SimpleNamespace(stop=lambda: None))


@pytest.fixture
def no_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's batch marker, its input's partitions and its changelog, as Kafka would give them."""
    import streamops.app.marker
    import streamops.kafka.admin

    monkeypatch.setattr(streamops.app.marker, "last_marker", lambda kafka, topic, app: MARKER)
    monkeypatch.setattr(streamops.kafka.admin, "partitions", lambda kafka, topic: [0])
    monkeypatch.setattr(m, "read_changelog", lambda kafka, spec: CHANGELOG)


class _Swap:
    """``Replacement`` on a stopped app, without the files and the marker it would rewrite."""

    def __init__(self, ctx: AppContext, rec: Any, *, running: bool, **_kw: Any) -> None:
        self.running = running

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def stop(self) -> int:
        return 1

    def set_aside(self) -> Path:
        return Path("/aside/shop-op1")

    def install(self, path: Path) -> None:
        return None

    def rewind(self, batch_id: int) -> dict[str, Any]:
        return {"batch_id": batch_id, "rewind": True}

    def restart(self, parallelism: int, *, batch_before: int) -> None:
        return None


# -- compact ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("live", [False, True])
def test_the_compact_plan_of_a_live_or_a_stopped_app(app, ledger, live: bool) -> None:
    settings, spec = app
    planned = m.compact_plan(settings, spec, ledger, live=live)
    assert type(planned) is m.CompactPlan
    plan = doc(planned)
    assert list(plan) == COMPACT_PLAN  # the dict had the files' own plan too, under "_plan" (never printed)
    assert (plan["running"], plan["live"], plan["batch_id"], plan["state_version"]) == (live, live, 2, 3)
    assert plan["install_snapshots"] == ["0/0", "0/1"] and plan["savepoints_beyond_retention"] == []
    assert plan["chains_before"] == {"0/0": {"snapshot": 0, "changelogs": 3}, "0/1": {"snapshot": 0, "changelogs": 3}}


def test_compact_dry_run_prints_the_plan(app, ledger, capsys: pytest.CaptureFixture[str]) -> None:
    settings, spec = app
    out = doc(m.compact(_ctx(app, ledger), dry_run=True))
    assert list(out) == COMPACT_DRY_RUN
    ckpt = checkpoint_dir(settings, spec)
    assert out == {"app": "shop", "batch_id": 2, "running": False, "bytes_before": out["bytes_before"],
                   "checkpoint": str(ckpt), "state_version": 3, "live": False, "install_snapshots": ["0/0", "0/1"],
                   "delete_files": 8, "delete_bytes": 157,
                   "chains_before": {"0/0": {"snapshot": 0, "changelogs": 3}, "0/1": {"snapshot": 0, "changelogs": 3}},
                   "chains_after": {"0/0": {"snapshot": 3, "changelogs": 0}, "0/1": {"snapshot": 3, "changelogs": 0}},
                   "savepoints_beyond_retention": [], "dry_run": True}
    assert out["bytes_before"] > 157
    assert main(["compact", "shop", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == out
    assert main(["compact", "shop", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("shop: would compact at batch 2 (state version 3; app stopped)\n")
    assert "  state 0/1: snapshot 0 + 3 changelogs -> snapshot 3 + 0\n" in text
    assert "  snapshots to install: 0/0, 0/1; files to delete: 8 (157 B); longest chain before: 3 changelogs\n" in text
    assert text.endswith("  savepoints beyond retention: none\n")


@pytest.mark.parametrize("driver_holds_the_lock", [False, True])
def test_compact_run_of_a_stopped_app_or_one_a_driver_started_meanwhile(
        app, ledger, no_spark, monkeypatch: pytest.MonkeyPatch, driver_holds_the_lock: bool) -> None:
    if driver_holds_the_lock:
        def held(*_a: Any, **_kw: Any) -> Any:
            raise m.LockHeld("a driver holds it", {"pid": 1})

        monkeypatch.setattr(m, "lock_checkpoint", held)
    out = doc(m.compact(_ctx(app, ledger), spark=object()))
    assert list(out) == COMPACT_RUN
    assert m.CompactResult.from_dict(json.loads(json.dumps(out))).to_dict() == out
    live = driver_holds_the_lock
    assert (out["running"], out["live"], out["dry_run"], out["installed"]) == (live, live, False, ["0/0", "0/1"])
    assert (out["restore_seconds_before"], out["restore_seconds_after"], out["savepoints_removed"]) == (0.25, 0.25, [])
    assert out["freed_bytes"] == 157 and out["bytes_after"] == out["bytes_before"] - 157
    assert isinstance(out["seconds"], float)
    op = ledger.get_operation(out["operation_id"])
    assert op is not None and op["outcome"] == "succeeded"
    assert list(op["after"]) == COMPACT_AFTER and op["after"] == {k: out[k] for k in COMPACT_AFTER}


def test_compact_run_from_the_cli(app, no_spark, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compact", "shop", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == COMPACT_RUN and out["dry_run"] is False
    _checkpoint_again(app)
    assert main(["compact", "shop"]) == 0
    lines = _without_progress(capsys.readouterr().out)
    assert lines[0] == "shop: compacted at batch 2 (state version 3; app stopped)"
    assert lines[-1].startswith("  checkpoint ") and " -> " in lines[-1]
    assert "; state restore 0.25 s -> 0.25 s; took " in lines[-1]
    assert lines[-1].endswith(f" s (operation #{out['operation_id'] + 1})")


def _without_progress(text: str) -> list[str]:
    """The result's lines: without --json, the progress lines (``... ...``) go to stdout first."""
    return [line for line in text.splitlines() if not line.endswith(" ...")]


def _checkpoint_again(app: tuple[Settings, AppSpec]) -> None:
    import shutil

    ckpt = checkpoint_dir(*app)
    shutil.rmtree(ckpt)
    _checkpoint(ckpt, 3)


# -- rebuild-state ---------------------------------------------------------------------------------
def test_the_rebuild_plan(app, ledger, no_kafka) -> None:
    settings, spec = app
    plan = doc(m.rebuild_plan(settings, spec, ledger, kafka=KafkaConfig.plaintext(settings.kafka_bootstrap)))
    assert list(plan) == REBUILD_PLAN
    assert (plan["changelog_keys"], plan["stream_time"], plan["spec_note"]) == (None, MARKER["stream_time"], None)
    assert plan["offsets"] == [{"topic": "shop-in", "partition": 0, "checkpoint": 5, "start_at": 7}]


def test_rebuild_dry_run_prints_the_plan_with_the_changelogs_keys(app, ledger, no_kafka,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    settings, spec = app
    got = m.rebuild_state_step(_ctx(app, ledger), dry_run=True, state_partitions=4)
    assert isinstance(got, waits.Done)
    out = doc(got.result)
    assert list(out) == REBUILD_DRY_RUN
    ckpt = checkpoint_dir(settings, spec)
    assert out == {
        "app": "shop", "running": False, "marker_batch": 2, "query_sources": 1, "stream_time": MARKER["stream_time"],
        "checkpoint_batch": 2, "state_partitions_before": 2, "state_partitions_after": 4,
        "changelog_topic": spec.changelog_topic, "changelog_keys": 3,
        "offsets": [{"topic": "shop-in", "partition": 0, "checkpoint": 5, "start_at": 7}],
        "checkpoint": str(ckpt), "set_aside_to": out["set_aside_to"],
        "actions": [f"read {spec.changelog_topic} (latest value per key, read_committed)",
                    "seed a new checkpoint with 4 state partitions at batch 0, ending at the offsets above",
                    "set the current checkpoint aside (kept)", "rewind the batch marker to 0 (next batch: 1)"],
        "spec_note": f"include/streams.yaml says state_partitions: {spec.state_partitions}; set it to 4 to match",
        "dry_run": True}
    assert out["set_aside_to"].endswith("/<time>-op<id>")
    args = ["rebuild-state", "shop", "--from-changelog", "--state-partitions", "4", "--dry-run"]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == out
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"shop: would rebuild the state from {spec.changelog_topic} (3 keys, as of batch marker 2): "
                        f"2 -> 4 state partitions")
    assert lines[2].split() == ["shop-in", "0", "5", "7"]
    assert lines[-1].startswith("  note: include/streams.yaml says state_partitions:")
    assert not any("previous checkpoint kept" in line for line in lines)


def test_rebuild_run_of_a_stopped_app(app, ledger, no_kafka, no_spark, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(m, "Replacement", _Swap)
    got = m.rebuild_state_step(_ctx(app, ledger), spark=object())
    assert isinstance(got, waits.Done)
    out = doc(got.result)
    assert list(out) == REBUILD_RUN
    assert m.RebuildResult.from_dict(json.loads(json.dumps(out))) == got.result  # as a deferral carries it
    assert (out["running"], out["dry_run"], out["changelog_keys"], out["aside"]) == (False, False, 3, "/aside/shop-op1")
    assert (out["state_partitions_before"], out["state_partitions_after"], out["spec_note"]) == (2, 2, None)
    assert isinstance(out["seconds"], float)
    op = ledger.get_operation(out["operation_id"])
    assert op is not None and op["outcome"] == "succeeded"
    assert op["after"] == {"batch": 0, "state_partitions": 2, "keys": 3, "aside": "/aside/shop-op1",
                           "rewind_marker": {"batch_id": 0, "rewind": True}}


def test_rebuild_run_from_the_cli(app, no_kafka, no_spark, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(m, "Replacement", _Swap)
    assert main(["rebuild-state", "shop", "--from-changelog", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == REBUILD_RUN and (out["dry_run"], out["aside"]) == (False, "/aside/shop-op1")
    assert isinstance(out["seconds"], float)
    assert main(["rebuild-state", "shop", "--from-changelog"]) == 0
    lines = _without_progress(capsys.readouterr().out)
    assert lines[0] == (f"shop: rebuilt the state from {app[1].changelog_topic} (3 keys, as of batch marker 2): "
                        f"2 -> 2 state partitions")
    assert lines[-1].startswith(f"  previous checkpoint kept at /aside/shop-op1 (operation #{out['operation_id'] + 1}, ")
