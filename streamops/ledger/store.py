"""Ledger access: one ``Ledger`` per process, short transactions, no ORM session state.

Leases make "one operation per app at a time" hold across processes and hosts: the lease row's
primary key is the app, so of two concurrent requests exactly one INSERT succeeds; the other is
refused with who holds it and since when, and is itself recorded (outcome ``refused``). A lease
has a time to live, renewed by the holder while it works, so a crashed holder does not block the
app forever.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, delete, event, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from streamops.exceptions import StreamopsError
from streamops.ledger import schema as t

MIGRATIONS = Path(__file__).parent / "migrations"
#: one Alembic migration at a time per process (see ``Ledger.migrate``)
_MIGRATE_LOCK = threading.Lock()
DEFAULT_LEASE_S = 600.0
log = logging.getLogger(__name__)


class OperationInProgress(StreamopsError):
    """Another operation holds the app's lease.

    Operator action: wait for it to finish (``streamops status APP``) or, if its holder died,
    for the lease to expire; nothing was changed.
    """


class HandOver(Exception):
    """Raised inside ``Ledger.operation``: the operation waits (``pending``, what for and until
    when) and goes on elsewhere; its lease is handed over instead of its outcome recorded. Who
    waits, and how, is the caller's (``lifecycle.waits``): the ledger only keeps the lease."""

    def __init__(self, pending: Mapping[str, Any]) -> None:
        super().__init__(f"operation #{pending['operation_id']} waits for {pending['kind']}")
        self.pending = dict(pending)


def utcnow() -> datetime:
    return datetime.now(UTC)


def _db_time(dt: datetime) -> datetime:
    """Naive UTC for storage: SQLite keeps no zone, and comparisons must agree on every backend."""
    return dt.astimezone(UTC).replace(tzinfo=None)


def _aware(dt: datetime | None) -> datetime | None:
    return None if dt is None else (dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC))


def requested_by(explicit: str | None = None) -> str:
    """Who asked: an explicit caller (e.g. an Airflow run id), the Airflow task context, or the CLI user."""
    if explicit:
        return explicit
    run_id = os.environ.get("AIRFLOW_CTX_DAG_RUN_ID")
    if run_id:
        return f"airflow:{os.environ.get('AIRFLOW_CTX_DAG_ID', '?')}/{run_id}"
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"cli:{user}"


@dataclass(frozen=True)
class Operation:
    id: int
    app: str
    kind: str
    requested_by: str


def _row(r: Any) -> dict[str, Any]:
    d = dict(r._mapping)
    for k, v in d.items():
        if isinstance(v, datetime):
            d[k] = _aware(v)
    return d


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite ledger URL; None for another database or an in-memory one."""
    if not url.startswith("sqlite"):
        return None
    path = url.split("///", 1)[-1]
    return Path(path) if path and path != ":memory:" else None


class Ledger:
    def __init__(self, url: str) -> None:
        self.url = url
        kwargs: dict[str, Any] = {}
        path = sqlite_file(url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"timeout": 30}
        self.engine: Engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)

    @classmethod
    def open(cls, url: str) -> Ledger:
        """Connect and bring the schema up to date."""
        ledger = cls(url)
        ledger.migrate()
        return ledger

    def migrate(self) -> None:
        import logging

        from alembic import command
        from alembic.config import Config

        logging.getLogger("alembic").setLevel(logging.WARNING)
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        # Alembic's environment is a module-global proxy (``alembic.context``): two threads of one
        # process migrating at once remove each other's (KeyError: 'config', seen in a chaos run)
        with _MIGRATE_LOCK, self.engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")

    def close(self) -> None:
        self.engine.dispose()

    # -- operations and leases -----------------------------------------------------------------
    def begin(self, app: str, kind: str, params: Mapping[str, Any] | None = None, *, who: str | None = None,
              before: Mapping[str, Any] | None = None, ttl_s: float = DEFAULT_LEASE_S,
              pid: int | None = None) -> Operation:
        """Record a running operation and take the app's lease, or raise ``OperationInProgress``.
        ``pid``: the process doing the work holds the lease itself (not a trigger elsewhere), so
        once that process is gone from this host the lease is broken at once, not at expiry."""
        who = requested_by(who)
        now = utcnow()
        self.release_abandoned(app)
        try:
            with self.engine.begin() as conn:
                conn.execute(delete(t.leases).where(t.leases.c.app == app,
                                                    t.leases.c.expires_at < _db_time(now)))
                op_id = conn.execute(insert(t.operations).values(
                    app=app, kind=kind, params=dict(params or {}), requested_by=who,
                    started_at=_db_time(now), outcome="running", before=dict(before) if before else None,
                    journal=[],
                )).inserted_primary_key[0]
                conn.execute(insert(t.leases).values(
                    app=app, operation_id=op_id, kind=kind, holder=who, acquired_at=_db_time(now),
                    expires_at=_db_time(now + timedelta(seconds=ttl_s)),
                    pid=pid, host=socket.gethostname() if pid is not None else None,
                ))
        except IntegrityError:
            holder = self.lease(app)
            message = (f"{app}: operation {holder['kind']} #{holder['operation_id']} running since "
                       f"{holder['acquired_at']:%Y-%m-%d %H:%M:%S} UTC, asked by {holder['holder']}"
                       if holder else f"{app}: another operation just took the lease")
            with self.engine.begin() as conn:
                conn.execute(insert(t.operations).values(
                    app=app, kind=kind, params=dict(params or {}), requested_by=who,
                    started_at=_db_time(now), ended_at=_db_time(utcnow()), outcome="refused", error=message,
                ))
            raise OperationInProgress(message) from None
        return Operation(int(op_id), app, kind, who)

    def release_abandoned(self, app: str) -> None:
        """A lease whose holder process died on this host (kill -9, a killed Airflow task) is
        released and its operation recorded failed, naming the steps it did (its journal), so
        the operator can ``undo`` it; expired leases of dead holders elsewhere go at expiry."""
        from streamops.host.process import Tracked

        lease = self.lease(app)
        if not lease or lease.get("pid") is None or lease.get("host") != socket.gethostname():
            return
        if Tracked(int(lease["pid"]), None).running():
            return
        op = self.get_operation(lease["operation_id"]) or {}
        done = [s["step"] for s in op.get("journal") or []]
        error = (f"abandoned: its process {lease['pid']} exited without finishing it (killed?); steps done: "
                 f"{', '.join(done) or 'none'}")
        with self.engine.begin() as conn:
            gone = conn.execute(delete(t.leases).where(t.leases.c.app == app,
                                                       t.leases.c.operation_id == lease["operation_id"])).rowcount
            if gone:
                conn.execute(update(t.operations).where(t.operations.c.id == lease["operation_id"],
                                                        t.operations.c.outcome == "running")
                             .values(outcome="failed", ended_at=_db_time(utcnow()), error=error))
        if gone:
            log.warning("%s: operation #%s %s", app, lease["operation_id"], error)

    def step(self, op: Operation, name: str, **data: Any) -> None:
        """Journal one step of ``op`` as done (or, by the caller's convention, about to be done:
        see ``lifecycle.journal``). Written at once, so a holder killed right after leaves it."""
        entry = {"step": name, "at": utcnow().isoformat(timespec="milliseconds"), **data}
        with self.engine.begin() as conn:
            current = conn.execute(select(t.operations.c.journal).where(t.operations.c.id == op.id)).scalar()
            conn.execute(update(t.operations).where(t.operations.c.id == op.id)
                         .values(journal=[*(current or []), entry]))

    def renew(self, op: Operation, ttl_s: float = DEFAULT_LEASE_S) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(t.leases).where(t.leases.c.app == op.app, t.leases.c.operation_id == op.id)
                         .values(expires_at=_db_time(utcnow() + timedelta(seconds=ttl_s))))

    def finish(self, op: Operation, outcome: str, *, error: str | None = None,
               after: Mapping[str, Any] | None = None) -> None:
        """End the operation (succeeded / failed) and release its lease."""
        if outcome not in ("succeeded", "failed"):
            raise ValueError(f"outcome must be succeeded or failed, not {outcome!r}")
        with self.engine.begin() as conn:
            conn.execute(update(t.operations).where(t.operations.c.id == op.id).values(
                ended_at=_db_time(utcnow()), outcome=outcome, error=error, after=dict(after) if after else None))
            conn.execute(delete(t.leases).where(t.leases.c.app == op.app, t.leases.c.operation_id == op.id))

    @contextmanager
    def operation(self, app: str, kind: str, params: Mapping[str, Any] | None = None, *,
                  who: str | None = None, before: Mapping[str, Any] | None = None,
                  ttl_s: float = DEFAULT_LEASE_S, resume: int | None = None) -> Iterator[OperationRecord]:
        """``with ledger.operation(...) as rec: ...; rec.after = {...}`` — failed if the body raises.

        The body may instead end waiting: by raising ``HandOver`` (it stops where it is) or by
        setting ``rec.waiting`` (it ran to its end, and its outcome is known once the wait is
        over). The lease is then handed over (``hand_over``) and the operation stays running;
        ``resume``: take such an operation back (``take_back``) instead of beginning one."""
        if resume is not None:
            op = self.take_back(resume, app, kind)
        else:
            op = self.begin(app, kind, params, who=who, before=before, ttl_s=ttl_s, pid=os.getpid())
        rec = OperationRecord(op, resumed=resume is not None)
        keeper = _LeaseKeeper(self, op, ttl_s)  # held as long as the body runs, however long
        keeper.start()
        try:
            yield rec
        except HandOver as waiting:
            keeper.halt()
            self.hand_over(op, waiting.pending, after=rec.after)
            raise
        except BaseException as exc:
            keeper.halt()
            self.finish(op, "failed", error=f"{type(exc).__name__}: {exc}"[:4000], after=rec.after)
            raise
        keeper.halt()
        if rec.waiting is not None:
            self.hand_over(op, rec.waiting, after=rec.after)
            return
        self.finish(op, "succeeded", after=rec.after)

    def hand_over(self, op: Operation, pending: Mapping[str, Any], *, after: Mapping[str, Any] | None) -> None:
        """The operation goes on waiting (``HandOver``): the lease has no holder process any more
        (the waiter's polls renew it until ``pending``'s deadline; a waiter in a process of this
        host holds it with ``hold``), the wait is journaled, ``after`` is kept for
        ``finish_handed_off``."""
        ttl = max(600.0, float(pending.get("deadline", 0)) - utcnow().timestamp() + 120)
        self.step(op, "handed-off", wait=pending.get("kind"))
        with self.engine.begin() as conn:
            conn.execute(update(t.leases).where(t.leases.c.app == op.app, t.leases.c.operation_id == op.id)
                         .values(pid=None, host=None, expires_at=_db_time(utcnow() + timedelta(seconds=ttl))))
            if after:
                conn.execute(update(t.operations).where(t.operations.c.id == op.id).values(after=dict(after)))

    def take_back(self, op_id: int, app: str, kind: str | None = None) -> Operation:
        """Resume a handed-over operation in this process (its lease is this process's again,
        so a waiter killed on this host frees it at once, ``release_abandoned``)."""
        row = self.get_operation(op_id)
        lease = self.lease(app)
        if row is None or row["app"] != app or (kind is not None and row["kind"] != kind):
            raise OperationInProgress(f"{app}: no {kind} operation #{op_id} to resume")
        if row["outcome"] != "running" or not lease or lease["operation_id"] != op_id:
            raise OperationInProgress(f"{app}: {row['kind']} #{op_id} can no longer be resumed (outcome {row['outcome']}, "
                                      f"lease {'held by #' + str(lease['operation_id']) if lease else 'gone'}); "
                                      f"`streamops undo {app} {op_id}` reverses the steps it did")
        with self.engine.begin() as conn:
            conn.execute(update(t.leases).where(t.leases.c.app == app, t.leases.c.operation_id == op_id)
                         .values(pid=os.getpid(), host=socket.gethostname()))
        return Operation(op_id, app, row["kind"], row["requested_by"])

    def finish_handed_off(self, op_id: int, outcome: str, *, error: str | None = None) -> dict[str, Any]:
        """End a handed-over operation with the ``after`` it kept; returns its row."""
        row = self.get_operation(op_id)
        if row is None:
            raise ValueError(f"no operation #{op_id}")
        op = Operation(op_id, row["app"], row["kind"], row["requested_by"])
        self.finish(op, outcome, error=error, after=row.get("after"))
        return row

    def record(self, app: str, kind: str, params: Mapping[str, Any] | None = None, *, who: str,
               outcome: str = "succeeded", error: str | None = None, before: Mapping[str, Any] | None = None,
               after: Mapping[str, Any] | None = None) -> int:
        """Log an action taken without a lease (the supervisor restarting a crashed driver)."""
        now = _db_time(utcnow())
        with self.engine.begin() as conn:
            return int(conn.execute(insert(t.operations).values(
                app=app, kind=kind, params=dict(params or {}), requested_by=who, started_at=now, ended_at=now,
                outcome=outcome, error=error, before=dict(before) if before else None,
                after=dict(after) if after else None,
            )).inserted_primary_key[0])

    def lease(self, app: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            r = conn.execute(select(t.leases).where(t.leases.c.app == app)).first()
        return _row(r) if r else None

    def operations(self, app: str | None = None, limit: int = 20, *, kind: str | None = None,
                   since: datetime | None = None) -> list[dict[str, Any]]:
        """Newest first; only ``kind``'s, only those started at or after ``since``, if given."""
        q = select(t.operations).order_by(t.operations.c.id.desc()).limit(limit)
        if app is not None:
            q = q.where(t.operations.c.app == app)
        if kind is not None:
            q = q.where(t.operations.c.kind == kind)
        if since is not None:
            q = q.where(t.operations.c.started_at >= _db_time(since))
        with self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(q)]

    def operation_counts(self, app: str) -> dict[tuple[str, str], int]:
        """(kind, outcome) -> how many of the app's operations (the metrics' counter)."""
        from sqlalchemy import func

        q = (select(t.operations.c.kind, t.operations.c.outcome, func.count())
             .where(t.operations.c.app == app).group_by(t.operations.c.kind, t.operations.c.outcome))
        with self.engine.connect() as conn:
            return {(k, o): int(n) for k, o, n in conn.execute(q)}

    def get_operation(self, op_id: int) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            r = conn.execute(select(t.operations).where(t.operations.c.id == op_id)).first()
        return _row(r) if r else None

    # -- desired and observed state -------------------------------------------------------------
    def set_desired(self, app: str, *, status: str, parallelism: int, who: str | None = None,
                    op: Operation | None = None, strategy: str = "restart") -> None:
        if status not in ("running", "stopped"):
            raise ValueError(f"desired status must be running or stopped, not {status!r}")
        if strategy not in ("restart", "live"):
            raise ValueError(f"strategy must be restart or live, not {strategy!r}")
        values = {"status": status, "parallelism": parallelism, "updated_at": _db_time(utcnow()),
                  "updated_by": requested_by(who), "operation_id": op.id if op else None, "strategy": strategy}
        self._upsert(t.desired, app, values)

    def desired(self, app: str) -> dict[str, Any] | None:
        return self._get(t.desired, app)

    def report_observed(self, app: str, **fields: Any) -> None:
        """Upsert what the driver / supervisor sees; unknown fields are an error, missing ones kept."""
        unknown = set(fields) - {c.name for c in t.observed.columns}
        if unknown:
            raise ValueError(f"unknown observed fields: {sorted(unknown)}")
        fields.setdefault("heartbeat_at", utcnow())
        fields["heartbeat_at"] = _db_time(fields["heartbeat_at"])
        self._upsert(t.observed, app, fields)

    def observed(self, app: str) -> dict[str, Any] | None:
        return self._get(t.observed, app)

    # -- output versions -------------------------------------------------------------------------
    def set_output_version(self, app: str, version: str | None, *, who: str | None = None,
                           op: Operation | None = None) -> None:
        self._upsert(t.app_outputs, app, {"version": version, "updated_at": _db_time(utcnow()),
                                          "updated_by": requested_by(who), "operation_id": op.id if op else None})

    def output_version(self, app: str) -> str | None:
        row = self._get(t.app_outputs, app)
        return row["version"] if row else None

    # -- savepoints ------------------------------------------------------------------------------
    def add_savepoint(self, *, id: str, app: str, batch_id: int, path: str, sha256: str, bytes: int,
                      offsets: Mapping[str, Any], created_at: datetime | None = None,
                      op: Operation | None = None) -> None:
        with self.engine.begin() as conn:
            conn.execute(insert(t.savepoints).values(
                id=id, app=app, batch_id=batch_id, path=path, sha256=sha256, bytes=bytes,
                offsets=dict(offsets), created_at=_db_time(created_at or utcnow()),
                operation_id=op.id if op else None))

    def savepoints(self, app: str) -> list[dict[str, Any]]:
        """Newest first."""
        with self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(
                select(t.savepoints).where(t.savepoints.c.app == app)
                .order_by(t.savepoints.c.created_at.desc(), t.savepoints.c.batch_id.desc()))]

    def delete_savepoint(self, savepoint_id: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(delete(t.savepoints).where(t.savepoints.c.id == savepoint_id))

    # -- helpers -----------------------------------------------------------------------------------
    def _get(self, table, app: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            r = conn.execute(select(table).where(table.c.app == app)).first()
        return _row(r) if r else None

    def _upsert(self, table, app: str, values: dict[str, Any]) -> None:
        with self.engine.begin() as conn:
            done = conn.execute(update(table).where(table.c.app == app).values(**values)).rowcount
            if not done:
                try:
                    with conn.begin_nested():
                        conn.execute(insert(table).values(app=app, **values))
                except IntegrityError:  # inserted concurrently: update it instead
                    conn.execute(update(table).where(table.c.app == app).values(**values))


class _LeaseKeeper(threading.Thread):
    """Renews an operation's lease every third of its time to live until halted: a reprocess, a
    compaction or a savepoint copy may outlast any fixed lease, and a second request must be
    refused while it runs, not run beside it. If the holder dies, renewals stop with it."""

    def __init__(self, ledger: Ledger, op: Operation, ttl_s: float) -> None:
        super().__init__(name=f"lease-{op.app}-{op.id}", daemon=True)
        self.ledger, self.op, self.ttl_s = ledger, op, ttl_s
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.ttl_s / 3):
            try:
                self.ledger.renew(self.op, ttl_s=self.ttl_s)
            except Exception as exc:  # noqa: BLE001 - the next tick tries again; the lease is still valid
                log.warning("%s: could not renew the lease of operation #%d: %s", self.op.app, self.op.id, exc)

    def halt(self) -> None:
        self._halt.set()
        self.join()


@dataclass
class OperationRecord:
    op: Operation
    after: dict[str, Any] | None = None
    #: taken back to go on after a wait (``Ledger.operation(resume=...)``)
    resumed: bool = False
    #: set by the body: the operation ends waiting for this (``HandOver``'s ``pending``)
    waiting: dict[str, Any] | None = None

    @property
    def id(self) -> int:
        return self.op.id


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")  # readers (status) never block the writer
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()
