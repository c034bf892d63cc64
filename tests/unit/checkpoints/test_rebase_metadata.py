"""``layout.rebase_state_metadata``: transformWithState's operator metadata names its state schema
files by absolute path; a checkpoint moved into place must name its own (rebuild-state's seeded
checkpoint was read at the temporary path it was seeded in, which no longer existed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamops.checkpoints import layout

pytestmark = pytest.mark.unit

META = {"operatorInfo": {"operatorId": 0, "operatorName": "transformWithStateInPandasExec"},
        "stateStoreInfo": [{"storeName": "default", "numColsPrefixKey": 0, "numPartitions": 2,
                            "stateSchemaFilePaths": ["file:/tmp/seed-x/checkpoint/state/0/_stateSchema/default/0_ab-12"]}],
        "operatorPropertiesJson": "{\"timeMode\":\"EventTime\"}"}


def _write(ckpt: Path, batch: int, meta: dict) -> Path:
    path = ckpt / "state" / "0" / "_metadata" / "v2" / str(batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("v2\n" + json.dumps(meta, separators=(",", ":")))
    (path.parent / f".{batch}.crc").write_bytes(b"crc")
    return path


def test_a_moved_checkpoint_names_its_own_schema_files(tmp_path: Path) -> None:
    seeded, final = tmp_path / "seed-x" / "checkpoint", tmp_path / "apps" / "state" / "a" / "checkpoint"
    path = _write(seeded, 0, META)
    assert layout.rebase_state_metadata(seeded, to=final) == 1
    lines = path.read_text().splitlines()
    assert lines[0] == "v2"
    meta = json.loads(lines[1])
    assert meta["stateStoreInfo"][0]["stateSchemaFilePaths"] == [
        f"file:{final.resolve()}/state/0/_stateSchema/default/0_ab-12"]
    assert {k: v for k, v in meta.items() if k != "stateStoreInfo"} == {k: v for k, v in META.items()
                                                                          if k != "stateStoreInfo"}
    assert not (path.parent / ".0.crc").exists()  # Hadoop checks a sidecar against the bytes
    assert layout.rebase_state_metadata(seeded, to=final) == 0  # already its own: untouched


def test_a_checkpoint_without_named_state_is_untouched(tmp_path: Path) -> None:
    (tmp_path / "state" / "0" / "0").mkdir(parents=True)
    assert layout.rebase_state_metadata(tmp_path) == 0
