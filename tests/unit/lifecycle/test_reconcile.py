from __future__ import annotations

import pytest

from streamops.lifecycle.reconcile import Desired, History, Observed, RestartPolicy, backoff, decide

P = RestartPolicy(backoff_s=2, max_backoff_s=60, crash_loop_limit=3, window_s=300,
                  heartbeat_timeout_s=60, startup_grace_s=120)
RUN2 = Desired("running", 2)
LIVE2 = Desired("running", 2, "live")


@pytest.mark.parametrize("desired, observed, history, kind, par", [
    (None, Observed(False), History(), "none", None),
    (Desired("stopped", 2), Observed(False), History(), "none", None),
    (Desired("stopped", 2), Observed(True, 2, 1.0), History(), "stop", None),
    (RUN2, Observed(False), History(), "launch", 2),
    (RUN2, Observed(True, 2, 3.0), History(), "none", None),
    (RUN2, Observed(True, 1, 3.0), History(), "resize", 2),
    (LIVE2, Observed(True, 1, 3.0), History(), "resize_live", 2),                 # ask the driver
    (LIVE2, Observed(True, 1, 3.0, live_request_age=5.0), History(), "wait", None),  # being applied
    (LIVE2, Observed(True, 1, 3.0, live_request_age=91.0), History(), "resize", 2),  # fall back
    (LIVE2, Observed(True, 2, 3.0), History(), "none", None),
    (LIVE2, Observed(False), History(), "launch", 2),                            # no driver: launch
    (RUN2, Observed(True, 2, 61.0), History(), "restart", 2),                   # hung
    (RUN2, Observed(True, None, None), History(launched_ago=30), "none", None),  # still starting
    (RUN2, Observed(True, None, None), History(launched_ago=121), "restart", 2),
    (RUN2, Observed(False), History(crashes_ago=(1.0,)), "wait", None),          # backoff 2 s
    (RUN2, Observed(False), History(crashes_ago=(2.5,)), "launch", 2),
    (RUN2, Observed(False), History(crashes_ago=(3.0, 20.0)), "wait", None),     # backoff 4 s
    (RUN2, Observed(False), History(crashes_ago=(1.0, 5.0, 30.0)), "give_up", None),
    (RUN2, Observed(False), History(crashes_ago=(400.0, 500.0, 600.0)), "launch", 2),  # old crashes
])
def test_decisions(desired, observed, history, kind, par) -> None:
    action = decide(desired, observed, history, P)
    assert (action.kind, action.parallelism) == (kind, par), action.reason


def test_wait_says_how_long() -> None:
    assert decide(RUN2, Observed(False), History(crashes_ago=(1.0, 10.0)), P).after_s == pytest.approx(3.0)


def test_backoff_is_exponential_and_capped() -> None:
    assert [backoff(P, n) for n in (1, 2, 3, 4, 5, 6, 7)] == [2, 4, 8, 16, 32, 60, 60]
