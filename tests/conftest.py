"""Test session setup: isolated Airflow/streamops homes, markers by folder, shared fixtures."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Before anything imports Airflow: never touch ~/airflow or the developer's .streamops.
_SESSION_TMP = Path(tempfile.mkdtemp(prefix="streamops-tests-"))
os.environ["STREAMOPS_REPO"] = str(REPO)
os.environ["STREAMOPS_HOME"] = str(_SESSION_TMP / "home")
os.environ["AIRFLOW_HOME"] = str(_SESSION_TMP / "home" / "airflow")
os.environ["AIRFLOW_CONFIG"] = str(REPO / "airflow.cfg")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Test-run speed only (what runs is unchanged): the suite starts dozens of short-lived Spark JVMs,
# which spend their lives warming up; the C1 compiler alone and the serial GC start them ~15%
# faster on this 2-core machine (measured: a driver's run to the end 50 -> 44 s, a check 21 -> 18 s).
# The shared cluster's daemons and executors get them too (test_resize.py: 136 -> 94 CPU-s).
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def pytest_configure(config: pytest.Config) -> None:
    """Spark's and the broker's JVMs map class-data-sharing archives (tests/fixtures/cds.py); a
    run of the unit tests alone does not build them."""
    if config.getoption("markexpr", "") != "unit" and not config.getoption("collectonly", False):
        from tests.fixtures import cds

        cds.use()


pytest_plugins = ["tests.fixtures.ports", "tests.fixtures.platform", "tests.fixtures.apps", "tests.fixtures.spark",
                  "tests.fixtures.postgres", "tests.fixtures.browser"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests by folder: tests/unit and tests/dags are `unit`, tests/integration `integration`.

    Order, for ``pytest -n 3 --dist loadgroup`` (``make test``; the work units are
    :func:`work_unit`'s): the tests that need Airflow first, run by one worker in one go (a quarter
    of the suite); then the slowest modules, so that no worker is left alone with a long test at
    the end; the unit tests fill the gaps last."""
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO / "tests").parts
        if parts[0] == "integration":
            item.add_marker(pytest.mark.integration)
        elif parts[0] in ("unit", "dags"):
            item.add_marker(pytest.mark.unit)
    items.sort(key=_run_order)  # stable: order kept otherwise


#: integration modules that start Airflow (the ``airflow_platform`` fixture)
AIRFLOW_MODULES = ("test_airflow_api.py", "test_airflow_backfill.py", "test_airflow_live_apps.py",
                   "test_airflow_operations.py", "test_streams_view.py", "test_alerts.py",
                   "test_airflow_triggers.py")
#: the slowest other modules, slowest first (their tests take 2-5 minutes each)
SLOW_MODULES = ("test_apps.py", "test_maintenance.py", "test_resize.py", "test_readme_walk.py",
                "test_supervisor.py", "test_reset.py", "test_kafka_security.py", "test_reprocess.py",
                "test_chaos.py", "test_crash_safety.py", "test_user_activity.py")
#: modules whose long tests share nothing but session fixtures: each test is a work unit of its own
SPLIT_MODULES = ("test_apps.py", "test_crash_safety.py", "test_user_activity.py")


def work_unit(nodeid: str) -> str:
    """The xdist work unit of a test: the Airflow tests are one (one worker, one Airflow), a module
    is one (its module-scoped fixtures are made once), except in SPLIT_MODULES."""
    module = nodeid.split("::", 1)[0]
    name = Path(module).name
    if name in AIRFLOW_MODULES:
        return "airflow"
    return nodeid if name in SPLIT_MODULES else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup`` with :func:`work_unit` as the groups. pytest 9.2 made node ids
    structured, and pytest-xdist 3.8's ``xdist_group`` marker, which appends to the old string id,
    no longer groups anything (every test ran alone, and both workers started an Airflow)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # the order is pytest_collection_modifyitems'
    return WorkUnitScheduling(config, log)


def _run_order(item: pytest.Item) -> tuple[int, int]:
    name = Path(str(item.fspath)).name
    if name in AIRFLOW_MODULES:
        return (0, 0)
    if name in SLOW_MODULES:
        return (1, SLOW_MODULES.index(name))
    return (2, 0) if item.get_closest_marker("integration") else (3, 0)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After this worker's last Airflow test, stop Airflow: its four components' idle loops would
    otherwise take CPU from every Spark test after them until the session ends."""
    if Path(str(item.fspath)).name in AIRFLOW_MODULES and (
            nextitem is None or Path(str(nextitem.fspath)).name not in AIRFLOW_MODULES):
        from tests.fixtures.platform import stop_shared_airflow

        stop_shared_airflow()


@pytest.fixture(autouse=True)
def _no_leaked_airflow_context():
    """``dag.test()`` exports AIRFLOW_CTX_* into this process; a later CLI subprocess would then
    record itself as that DAG run instead of ``cli:USER``. Put the environment back after each test."""
    before = {k: v for k, v in os.environ.items() if k.startswith("AIRFLOW_CTX_")}
    yield
    for k in [k for k in os.environ if k.startswith("AIRFLOW_CTX_")]:
        if k not in before:
            del os.environ[k]
    os.environ.update(before)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def session_tmp() -> Path:
    return _SESSION_TMP
