"""``streamops verify``'s entry points without services: the CLI's usage errors, no committed batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamops.cli import main
from streamops.kafka.config import KafkaConfig
from streamops.settings import Settings
from streamops.spec import default_spec_path, get_app, load_specs
from streamops.state.check import NothingCommittedError
from streamops.state.verify.run import verify

REPO = Path(__file__).resolve().parents[4]


# -- entry points -----------------------------------------------------------------------------------
def test_cli_unknown_app_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "no_such_app"]) == 2
    assert "unknown app 'no_such_app'" in capsys.readouterr().err


def test_cli_missing_app_argument_exits_2() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["verify"])
    assert exc.value.code == 2


def test_verify_needs_a_committed_batch(tmp_path: Path) -> None:
    settings = Settings(repo=REPO, home=tmp_path)
    spec = get_app(load_specs(default_spec_path(REPO)), "user_activity")
    with pytest.raises(NothingCommittedError, match="no committed batch"):
        verify(spec, settings, KafkaConfig.plaintext("127.0.0.1:1"), record=False)
