"""The supervisor's lease: one supervisor acts on a ledger's apps, whichever host it runs on.

The state dir's ``supervisor.lock`` (an ``flock``) keeps a second supervisor off one host; it
cannot see a supervisor on another machine (a replacement pod while the old one still runs, two
hosts sharing a volume), and an ``flock`` on a network volume is not to be relied on. The lease
lives where every supervisor of these apps looks, the ledger: one row, its holder renewing it
every pass. A successor takes it once it expired, or at once when its holder is gone from the
successor's own host (a supervisor killed and started again). Every change of holder raises the
row's ``term``; a renewal that finds another term has lost the lease and must stop acting.
Each take is written to the operations log under ``PLATFORM`` (no app is named so).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from streamops.host.process import Tracked, start_ticks
from streamops.ledger import schema as t
from streamops.ledger.store import _aware, _db_time, utcnow
from streamops.results import Result

if TYPE_CHECKING:
    from streamops.ledger.store import Ledger

#: the operations log's app for what concerns the platform, not one app (app names start with a letter)
PLATFORM = "_platform"
NAME = "supervisor"
DEFAULT_TTL_S = 30.0

Reason = Literal["free", "expired", "holder gone", "own"]


@dataclass(frozen=True)
class SupervisorLease(Result):
    term: int
    holder: str
    host: str
    pid: int
    acquired_at: datetime
    expires_at: datetime
    ticks: int | None = None

    @property
    def expired(self) -> bool:
        return self.expires_at <= utcnow()

    def gone_from_this_host(self) -> bool:
        """Its holder ran on this host and is not running any more (pid and start time)."""
        return self.host == socket.gethostname() and not Tracked(self.pid, self.ticks).running()

    def describe(self) -> str:
        return f"{self.holder} (term {self.term}, since {self.acquired_at:%Y-%m-%d %H:%M:%S} UTC, " \
               f"until {self.expires_at:%H:%M:%S} UTC)"


@dataclass(frozen=True)
class Taken:
    lease: SupervisorLease
    reason: Reason
    previous: SupervisorLease | None


@dataclass(frozen=True)
class Held:
    """Another supervisor holds the lease (``lease``)."""

    lease: SupervisorLease


def holder_name(pid: int | None = None) -> str:
    return f"{socket.gethostname()}:{pid or os.getpid()}"


def current(ledger: Ledger) -> SupervisorLease | None:
    with ledger.engine.connect() as conn:
        row = conn.execute(select(t.supervisor_lease).where(t.supervisor_lease.c.name == NAME)).first()
    return None if row is None else _lease(row)


def take(ledger: Ledger, ttl_s: float = DEFAULT_TTL_S, *, pid: int | None = None) -> Taken | Held:
    """Take the lease if it is free, expired, this process's, or its holder is gone from this host."""
    pid = pid or os.getpid()
    now = utcnow()
    mine = {"holder": holder_name(pid), "host": socket.gethostname(), "pid": pid, "ticks": start_ticks(pid),
            "acquired_at": _db_time(now), "expires_at": _db_time(now + timedelta(seconds=ttl_s))}
    previous = current(ledger)
    term = 1 if previous is None else previous.term + 1
    if previous is None:
        try:
            with ledger.engine.begin() as conn:
                conn.execute(insert(t.supervisor_lease).values(name=NAME, term=term, **mine))
        except IntegrityError:  # another supervisor inserted it first
            return Held(current(ledger))  # type: ignore[arg-type]
        reason: Reason = "free"
    else:
        if previous.host == mine["host"] and previous.pid == pid:
            reason = "own"
        elif previous.expired:
            reason = "expired"
        elif previous.gone_from_this_host():
            reason = "holder gone"
        else:
            return Held(previous)
        with ledger.engine.begin() as conn:
            changed = conn.execute(update(t.supervisor_lease).where(
                t.supervisor_lease.c.name == NAME, t.supervisor_lease.c.term == previous.term,
            ).values(term=term, **mine)).rowcount
        if changed != 1:  # another successor changed it in between
            return Held(current(ledger))  # type: ignore[arg-type]
    lease = SupervisorLease(term=term, holder=mine["holder"], host=mine["host"], pid=pid, ticks=mine["ticks"],
                            acquired_at=now, expires_at=now + timedelta(seconds=ttl_s))
    ledger.record(PLATFORM, "supervisor-lease", {"term": lease.term, "reason": reason,
                                                 "previous": previous.holder if previous else None,
                                                 "previous_term": previous.term if previous else None},
                  who=lease.holder)
    return Taken(lease, reason, previous)


def renew(ledger: Ledger, lease: SupervisorLease, ttl_s: float = DEFAULT_TTL_S) -> SupervisorLease | None:
    """The lease for another ``ttl_s``, or None if it is no longer this holder's (its term moved on)."""
    expires = utcnow() + timedelta(seconds=ttl_s)
    with ledger.engine.begin() as conn:
        changed = conn.execute(update(t.supervisor_lease).where(*_still_held(lease))
                               .values(expires_at=_db_time(expires))).rowcount
    if changed != 1:
        return None
    return replace(lease, expires_at=expires)


def release(ledger: Ledger, lease: SupervisorLease) -> bool:
    """Let it lapse now (a clean exit), if it is still this holder's: a successor takes it at once."""
    with ledger.engine.begin() as conn:
        return conn.execute(update(t.supervisor_lease).where(*_still_held(lease))
                            .values(expires_at=_db_time(utcnow()))).rowcount == 1


def _still_held(lease: SupervisorLease) -> tuple:
    """The row is still ``lease``'s: its term and holder unchanged."""
    c = t.supervisor_lease.c
    return c.name == NAME, c.term == lease.term, c.holder == lease.holder


def _lease(row) -> SupervisorLease:
    d = dict(row._mapping)
    return SupervisorLease(term=int(d["term"]), holder=d["holder"], host=d["host"], pid=int(d["pid"]),
                           ticks=d["ticks"], acquired_at=_aware(d["acquired_at"]),  # type: ignore[arg-type]
                           expires_at=_aware(d["expires_at"]))  # type: ignore[arg-type]
