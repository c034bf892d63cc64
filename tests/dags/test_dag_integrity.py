"""Every DAG file imports cleanly, and every DAG follows the house policy."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAG_FILES = sorted((REPO / "dags").glob("*.py"))


def _bag(path: Path):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(path))


def test_there_are_dags() -> None:
    assert DAG_FILES, "dags/ holds no DAG files"


@pytest.mark.parametrize("path", DAG_FILES, ids=[p.name for p in DAG_FILES])
def test_dag_file_imports_without_errors(path: Path) -> None:
    bag = _bag(path)
    assert not bag.import_errors, f"{path.name} failed to import: {bag.import_errors}"
    assert bag.dags, f"{path.name} defines no DAG"


@pytest.mark.parametrize("path", DAG_FILES, ids=[p.name for p in DAG_FILES])
def test_dag_policy(path: Path) -> None:
    for dag_id, dag in _bag(path).dags.items():
        assert dag.tags and "streamops" in dag.tags, f"{dag_id}: tag it 'streamops'"
        assert dag.doc_md, f"{dag_id}: add doc_md saying what the DAG is for"
        assert dag_id.startswith("streamops_"), f"{dag_id}: DAG ids start with 'streamops_'"
        for task in dag.tasks:
            assert task.retries is not None and task.retries >= 0, f"{dag_id}.{task.task_id}: set retries"


@pytest.mark.parametrize("path", DAG_FILES, ids=[p.name for p in DAG_FILES])
def test_every_dag_is_active_from_its_first_parse(path: Path) -> None:
    """A paused DAG leaves runs triggered through the REST API queued for ever and its schedule idle."""
    for dag_id, dag in _bag(path).dags.items():
        if "example" in dag.tags:  # an example starts paused: unpausing it starts its asset watchers
            assert dag.is_paused_upon_creation is True, f"{dag_id}: an example starts paused"
            continue
        assert dag.is_paused_upon_creation is False, f"{dag_id}: set is_paused_upon_creation=False"


@pytest.mark.parametrize("path", DAG_FILES, ids=[p.name for p in DAG_FILES])
def test_every_templated_argument_is_a_template_field(path: Path) -> None:
    """A "{{ params.x }}" passed to an attribute Airflow does not render reaches execute() as text."""
    for dag_id, dag in _bag(path).dags.items():
        for task in dag.tasks:
            for name, value in vars(task).items():
                if isinstance(value, str) and "{{" in value and not name.startswith("_"):
                    assert name in task.template_fields, (
                        f"{dag_id}.{task.task_id}: {name}={value!r} is not in template_fields")
