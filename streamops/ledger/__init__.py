"""The operations ledger: desired and observed state per app, the operations log, leases and
savepoints (SQLAlchemy; SQLite under the state dir by default, PostgreSQL by URL)."""

from streamops.ledger.store import Ledger, OperationInProgress

__all__ = ["Ledger", "OperationInProgress"]
