"""``streamops savepoints APP``: after a reset, two ``b0`` savepoints from different runs differ in
the listing by their checkpoint lineage (and when each was taken and how long it took)."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from streamops.app.checkpoint import checkpoint_dir
from streamops.app.context import AppContext
from streamops.cli import main
from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger
from streamops.lifecycle import savepoints as sp_mod
from streamops.settings import Settings
from streamops.spec import default_spec_path, get_app, load_specs

OLD, NEW = "1111aaaa-0000-0000-0000-000000000001", "2222bbbb-0000-0000-0000-000000000002"


def _checkpoint(path: Path, query_id: str) -> None:
    """A checkpoint as Spark leaves it after committing batch 0."""
    shutil.rmtree(path, ignore_errors=True)
    (path / "offsets").mkdir(parents=True)
    (path / "commits").mkdir()
    (path / "metadata").write_text(json.dumps({"id": query_id}))
    (path / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0}\n{"shop-in":{"0":3}}\n')
    (path / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')


class _Clock(datetime):
    """Savepoint ids carry the second they were taken: two takes in one test need two seconds."""

    at = datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC)

    @classmethod
    def now(cls, tz: object = None) -> datetime:
        return cls.at


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Settings, object]:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "streams.yaml").write_text(
        "apps:\n  shop:\n    job: jobs.shop\n    input_topics: [shop-in]\n    output_topic: shop-out\n")
    monkeypatch.setenv("STREAMOPS_REPO", str(tmp_path))
    monkeypatch.setenv("STREAMOPS_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sp_mod, "datetime", _Clock)
    settings = Settings.from_env()
    return settings, get_app(load_specs(default_spec_path(tmp_path)), "shop")


def test_two_b0_savepoints_of_two_runs_differ_by_lineage(app, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    settings, spec = app
    ckpt = checkpoint_dir(settings, spec)
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        _checkpoint(ckpt, OLD)
        first = sp_mod.take(AppContext(settings, spec, ledger, KafkaConfig.plaintext(settings.kafka_bootstrap)))
        _checkpoint(ckpt, NEW)  # a reset: a new checkpoint, whose batches start again at 0
        monkeypatch.setattr(_Clock, "at", _Clock.at.replace(hour=11))
        second = sp_mod.take(AppContext(settings, spec, ledger, KafkaConfig.plaintext(settings.kafka_bootstrap)))
        rows = sp_mod.listing(settings, spec, ledger)
    finally:
        ledger.close()
    assert (first.batch_id, second.batch_id) == (0, 0) and (first.lineage, second.lineage) == (OLD, NEW)
    assert [(r.id, r.batch_id, r.lineage, r.current) for r in rows] == [
        (second.id, 0, NEW, True), (first.id, 0, OLD, False)]
    assert all(isinstance(r.seconds, float) for r in rows)

    assert main(["savepoints", "shop", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["lineage"], r["current"]) for r in listed] == [(NEW, True), (OLD, False)]
    # the document: the ledger's record (its columns in order), then what the listing adds
    assert [list(r) for r in listed] == [["id", "app", "batch_id", "path", "sha256", "bytes", "offsets", "created_at",
                                          "operation_id", "present", "lineage", "current", "seconds"]] * 2
    assert listed == [r.to_dict() for r in rows]

    assert main(["savepoints", "shop"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "LINEAGE" in lines[0] and "TAKEN (UTC)" in lines[0] and "TOOK" in lines[0]
    for line, row in zip(lines[1:3], rows, strict=True):
        assert datetime.fromisoformat(row.created_at).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") in line
    assert "2222bbbb*" in lines[1] and "1111aaaa " in lines[2]
    assert lines[1].split()[1] == lines[2].split()[1] == "0"  # same batch, told apart by lineage


def test_a_savepoint_whose_files_are_gone_keeps_the_lineage_its_take_recorded(app) -> None:
    settings, spec = app
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        _checkpoint(checkpoint_dir(settings, spec), OLD)
        taken = sp_mod.take(AppContext(settings, spec, ledger, KafkaConfig.plaintext(settings.kafka_bootstrap)))
        shutil.rmtree(taken.path)
        [row] = sp_mod.listing(settings, spec, ledger)
    finally:
        ledger.close()
    assert (row.present, row.lineage, row.current) == (False, OLD, True)
