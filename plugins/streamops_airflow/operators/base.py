"""What the operators share: one way to get an app's core objects in a task, and the readers of
rendered template values (a templated field arrives as a string, "None" included)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow.exceptions import AirflowException

if TYPE_CHECKING:
    from streamops.app.context import AppContext


@contextmanager
def app_session(app: Any, what: str | None) -> Iterator[AppContext]:
    """``app``'s context for the block (``StreamopsHook.app_context``); the ledger is closed after it.

    The Kafka clients an operator makes are made with ``ctx.kafka`` (the app's configuration: its
    spec's ``kafka`` overrides), a value handed down: nothing after the task, in the same process,
    can pick up the app's credentials.

    ``what`` names the action when the core refuses: its ``StreamopsError`` (bad parameters, a
    lease held, no supervisor: nothing changed) becomes a failed task saying ``{what} {app}: ...``.
    None lets the core's error through as it is (``AppOperationOperator.execute_complete``).
    """
    from streamops.exceptions import StreamopsError
    from streamops_airflow.hooks import StreamopsHook

    try:
        with StreamopsHook().app_context(str(app)) as ctx:
            yield ctx
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
