"""What the operators share: an app's core objects for a task, and the readers of rendered
template values (a templated field arrives as a string, "None" included)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow.exceptions import AirflowException

if TYPE_CHECKING:
    from streamops.ledger import Ledger
    from streamops.settings import Settings
    from streamops.spec import AppSpec


@contextmanager
def app_session(app: Any, what: str) -> Iterator[tuple[Settings, AppSpec, Ledger]]:
    """(settings, spec, ledger) for ``app``; a refusal from the core becomes a failed task."""
    from streamops.exceptions import StreamopsError
    from streamops.kafka.security import app_scope
    from streamops.ledger import Ledger
    from streamops.ledger.outputs import load_live_spec
    from streamops.settings import Settings

    try:
        settings = Settings.from_env()
        ledger = Ledger.open(settings.ledger_db_url)
        try:
            spec = load_live_spec(settings, str(app), ledger)
            with app_scope(spec, settings):  # the task's Kafka clients are the app's
                yield settings, spec, ledger
        finally:
            ledger.close()
    except StreamopsError as exc:
        raise AirflowException(f"{what} {app}: {exc}") from exc


def requested_by(context: Any) -> str:
    """The ledger's ``requested_by`` of this task try: which DAG run and task asked."""
    ti = context["ti"]
    return f"airflow:{ti.dag_id}/{ti.run_id}/{ti.task_id}"


def as_text(value: Any) -> str | None:
    """A rendered optional value: None when not given (a template renders None as "None")."""
    return None if value in (None, "", "None") else str(value)


def as_int(value: Any, name: str) -> int | None:
    """A rendered optional integer; anything else fails the task naming the field."""
    if value in (None, "", "None"):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AirflowException(f"{name} must be an integer, got {value!r}") from None


def as_bool(value: Any) -> bool:
    """A rendered flag: a bool as it is, else true for "true", "1", "yes" (any case)."""
    return value if isinstance(value, bool) else str(value).lower() in ("true", "1", "yes")
