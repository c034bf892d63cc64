"""docs/writing-a-job.md's episode example ("one alert per episode of more than 5 transactions or
over 1000 in any 60 s"), run from the docs' own code block (``tests.fixtures.card_alerts``): on the
input the docs show it writes exactly the records they show, one per episode and no ``None``,
whatever the batch cut; it passes ``assert_job_sound``; and the docs' sentence on what
``emit_on = "close"`` would write is true. The batch-cut property on generated transactions is
``test_cut_independence`` (``card_alerts``); the run on real Spark is in
tests/unit/jobs/test_time_on_spark.py."""

from __future__ import annotations

import pytest

from streamops.state.lint import sample_records
from streamops.state.oracle import fold_input
from streamops.testing import assert_job_sound
from tests.fixtures.card_alerts import DOC_INPUT, DOC_OUTPUT, TOPIC, CardAlerts, generate
from tests.fixtures.stream_sim import run_batches
from tests.unit.time.test_cut_independence import cut

pytestmark = pytest.mark.unit

PARTITIONS = [(TOPIC, 0)]


def test_the_docs_input_gives_the_docs_output() -> None:
    out = fold_input(CardAlerts, DOC_INPUT, PARTITIONS)
    assert out.output == DOC_OUTPUT
    assert out.rejected == {}
    assert list(DOC_OUTPUT) == ["c2@40000", "c1@51000", "c1@210000", "c1@900000"]  # the docs' four records


@pytest.mark.parametrize("sizes", [1, 2, 7, "random"])
def test_the_docs_example_writes_one_record_per_episode_whatever_the_cut(sizes) -> None:
    expected = fold_input(CardAlerts, DOC_INPUT, PARTITIONS)
    got = run_batches(CardAlerts, cut(DOC_INPUT, sizes, seed=5), PARTITIONS)
    assert sorted(got.written) == sorted(DOC_OUTPUT.items())  # each once, no None, no repeat
    assert got.states == expected.states


def test_on_close_the_same_job_writes_every_closed_window() -> None:
    class EveryWindow(CardAlerts):
        emit_on = "close"

    out = fold_input(EveryWindow, DOC_INPUT, PARTITIONS)
    assert len(out.output) == 13  # "all thirteen closed windows"
    assert sorted(k for k, v in out.output.items() if v is None) == \
        ["c1@1000", "c1@11000", "c1@200000", "c1@21000", "c1@31000", "c1@41000", "c2@20000", "c2@30000"]
    assert out.output["c1@55000"] == out.output["c1@51000"] == DOC_OUTPUT["c1@51000"]  # "twice"


def test_the_docs_example_is_sound() -> None:
    assert_job_sound(CardAlerts, DOC_INPUT)
    assert_job_sound(CardAlerts, sample_records(CardAlerts, TOPIC, 3, generate(1_500, seed=7)))
