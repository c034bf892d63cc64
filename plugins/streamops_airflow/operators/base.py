"""What the operators share: one way to get an app's core objects in a task, and the readers of
rendered template values (a templated field arrives as a string, "None" included)."""

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
def app_session(app: Any, what: str | None) -> Iterator[tuple[Settings, AppSpec, Ledger]]:
    """(settings, spec, ledger) for ``app`` during the block; the ledger is closed after it.

    The Kafka clients made in the block are the app's (its spec's ``kafka`` overrides) through
    ``app_scope``, the scope ``streamops.kafka.security`` gives an Airflow task, not through the
    process-wide ``use_app`` of a driver or a CLI command: every client an operator makes is made
    in the block's own thread (a trigger's poll scopes its own, ``lifecycle.status.lag``), and
    nothing after the task, in the same process, inherits the app's credentials.

    ``what`` names the action when the core refuses: its ``StreamopsError`` (bad parameters, a
    lease held, no supervisor: nothing changed) becomes a failed task saying ``{what} {app}: ...``.
    None lets the core's error through as it is (``AppOperationOperator.execute_complete``).
    """
    from streamops.app.outputs import load_live_spec

    from streamops.exceptions import StreamopsError
    from streamops.kafka.security import app_scope
    from streamops.ledger import Ledger
    from streamops.settings import Settings

    try:
        settings = Settings.from_env()
        ledger = Ledger.open(settings.ledger_db_url)
        try:
            spec = load_live_spec(settings, str(app), ledger)
            with app_scope(spec, settings):
                yield settings, spec, ledger
        finally:
            ledger.close()
    except StreamopsError as exc:
        if what is None:
            raise
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
