"""A checkpoint replacement on a real ledger and lock (no driver runs: nothing to stop)."""

from __future__ import annotations

import json
import time

from streamops.app.context import AppContext
from streamops.kafka.config import KafkaConfig
from streamops.ledger import Ledger
from streamops.ledger.store import OperationRecord
from streamops.lifecycle.replace import Replacement
from streamops.settings import Settings
from streamops.spec import AppSpec

SPEC = AppSpec(name="app1", job="jobs.x", input_topics=("in",), output_topic="o", changelog_topic="c",
               dlq_topic="d", input_partitions=6, state_partitions=4)


#: the app's Kafka clients (none is made here)
KAFKA = KafkaConfig.plaintext("127.0.0.1:1")


def no_broker(_kafka: KafkaConfig, _app: str) -> None:
    """No broker here: there is no transaction to abort."""


def test_an_app_stopped_by_an_operation_that_died_runs_again_after_the_next_one(tmp_path) -> None:
    """A reset killed after it stopped the app leaves it desired stopped; the next replacement (say
    the repair its refusal names) must start it again, not leave it stopped for good."""
    settings = Settings(home=tmp_path)
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "supervisor.json").write_text(json.dumps({"heartbeat": time.time()}))
    ledger = Ledger.open(settings.ledger_db_url)
    try:
        ledger.set_desired("app1", status="running", parallelism=3)
        dead = ledger.begin("app1", "reset", who="t")
        ledger.step(dead, "stop", was_running=True, parallelism=3)
        ledger.set_desired("app1", status="stopped", parallelism=3, op=dead)
        ledger.finish(dead, "failed", error="abandoned")
        for previous_running, expected in ((False, True), (True, True)):
            op = ledger.begin("app1", "reset", who="t")
            with Replacement(AppContext(settings, SPEC, ledger, KAFKA), OperationRecord(op),
                             running=previous_running,
                             who="t", timeout=5, abort_open=no_broker) as swap:
                assert swap.stop() == 3 and swap.running is expected
            assert ledger.get_operation(op.id)["journal"][0]["was_running"] is True
            ledger.finish(op, "succeeded")
        # an app its operator stopped stays stopped
        ledger.set_desired("app1", status="stopped", parallelism=3)
        op = ledger.begin("app1", "reset", who="t")
        with Replacement(AppContext(settings, SPEC, ledger, KAFKA), OperationRecord(op), running=False, who="t",
                         timeout=5,
                         abort_open=no_broker) as swap:
            swap.stop()
            assert swap.running is False
        ledger.finish(op, "succeeded")
    finally:
        ledger.close()
