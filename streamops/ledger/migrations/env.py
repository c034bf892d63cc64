"""Alembic environment: the connection comes from ``Ledger.migrate`` (config.attributes)."""

from __future__ import annotations

from alembic import context

from streamops.ledger.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
