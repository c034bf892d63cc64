"""Operations refuse bad requests before anything changes (no services needed for these paths)."""

from __future__ import annotations

import json
import time

import pytest

from streamops.exceptions import UsageError
from streamops.ledger import Ledger
from streamops.lifecycle.operations import SupervisorNotRunning, deploy, require_supervisor, resize, stop
from streamops.settings import Settings
from streamops.spec import AppSpec

SPEC = AppSpec(name="app1", job="jobs.x", input_topics=("in",), output_topic="o", changelog_topic="c",
               dlq_topic="d", input_partitions=6, state_partitions=4)


@pytest.fixture
def env(tmp_path):
    settings = Settings(home=tmp_path)
    ledger = Ledger.open(settings.ledger_db_url)
    yield settings, ledger
    ledger.close()


def beat(settings: Settings, age: float = 0.0) -> None:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "supervisor.json").write_text(json.dumps({"heartbeat": time.time() - age}))


def test_without_a_live_supervisor_nothing_changes(env) -> None:
    settings, ledger = env
    with pytest.raises(SupervisorNotRunning, match="not running"):
        deploy(settings, SPEC, ledger)
    beat(settings, age=120)
    with pytest.raises(SupervisorNotRunning, match="120 s old|12[01] s old"):
        stop(settings, SPEC, ledger)
    assert ledger.operations("app1") == [] and ledger.desired("app1") is None
    beat(settings)
    require_supervisor(settings)


@pytest.mark.parametrize("n, message", [(0, "at least 1"), (7, "more than it can use: 6"),
                                        (5, r"outside the spec's range \[1, 4\]")])
def test_invalid_parallelism_is_refused_first(env, n, message) -> None:
    settings, ledger = env
    beat(settings)
    with pytest.raises(UsageError, match=message):
        deploy(settings, SPEC, ledger, parallelism=n)
    with pytest.raises(UsageError, match=message):
        resize(settings, SPEC, ledger, parallelism=n)
    assert ledger.operations("app1") == [] and ledger.desired("app1") is None


def test_resize_needs_a_deployed_app_and_a_known_strategy(env) -> None:
    settings, ledger = env
    beat(settings)
    with pytest.raises(UsageError, match="not deployed"):
        resize(settings, SPEC, ledger, parallelism=2)
    with pytest.raises(UsageError, match="unknown strategy 'sideways'"):
        resize(settings, SPEC, ledger, parallelism=2, strategy="sideways")
    assert ledger.operations("app1") == []
