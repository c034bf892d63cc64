"""Ledger tables. Changing them means a new migration under ``migrations/versions``."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Column, DateTime, Float, Integer, MetaData, String, Table, Text

metadata = MetaData()

#: what operators asked for (one row per app)
desired = Table(
    "desired_state", metadata,
    Column("app", String(100), primary_key=True),
    Column("status", String(20), nullable=False),  # running | stopped
    Column("parallelism", Integer, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("updated_by", String(200), nullable=False),
    Column("operation_id", Integer),
    # how a parallelism change is applied: restart (new driver) | live (executors of the running app)
    Column("strategy", String(20), nullable=False, server_default="restart"),
)

#: what the driver / supervisor last reported (one row per app)
observed = Table(
    "observed_state", metadata,
    Column("app", String(100), primary_key=True),
    Column("status", String(20), nullable=False),  # starting | running | restarting | stopped | failed
    Column("pid", Integer),
    Column("host", String(200)),
    Column("spark_app_id", String(200)),
    Column("parallelism", Integer),
    Column("executors", Integer),
    Column("last_batch", BigInteger),
    Column("input_rate", Float),
    Column("processing_rate", Float),
    Column("lag", JSON),  # {"topic": {"partition": lag}}
    Column("state_rows", BigInteger),
    Column("state_bytes", BigInteger),
    Column("error", Text),
    Column("heartbeat_at", DateTime(timezone=True), nullable=False),
)

#: every operation, requested, refused, running or finished
operations = Table(
    "operations", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("app", String(100), nullable=False, index=True),
    Column("kind", String(50), nullable=False),
    Column("params", JSON, nullable=False),
    Column("requested_by", String(200), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("ended_at", DateTime(timezone=True)),
    Column("outcome", String(20), nullable=False),  # running | succeeded | failed | refused
    Column("error", Text),
    Column("before", JSON),  # offsets, state version, parallelism before
    Column("after", JSON),
    # the steps done so far, in order: [{"step": name, "at": iso time, ...}] (``Ledger.step``)
    Column("journal", JSON),
)

#: at most one operation per app at a time
leases = Table(
    "leases", metadata,
    Column("app", String(100), primary_key=True),
    Column("operation_id", Integer, nullable=False),
    Column("kind", String(50), nullable=False),
    Column("holder", String(200), nullable=False),
    Column("acquired_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    # an in-process operation's holder: a successor on this host breaks the lease once it is gone
    Column("pid", Integer),
    Column("host", String(200)),
)

#: the one supervisor that acts on this ledger's apps (``ledger.supervisor_lease``): one row, its
#: holder renewing it every pass; a successor takes it once it lapsed or its holder died on its host
supervisor_lease = Table(
    "supervisor_lease", metadata,
    Column("name", String(50), primary_key=True),
    Column("term", Integer, nullable=False),  # +1 at every change of holder: a renewal checks it
    Column("holder", String(200), nullable=False),
    Column("host", String(200), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("ticks", BigInteger),  # the holder's start time on its host (``host.process.start_ticks``)
    Column("acquired_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

savepoints = Table(
    "savepoints", metadata,
    Column("id", String(100), primary_key=True),
    Column("app", String(100), nullable=False, index=True),
    Column("batch_id", BigInteger, nullable=False),
    Column("path", Text, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("offsets", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("operation_id", Integer),
)

#: which version of its output topic an app writes: None is the spec's topic, "v2" its ".v2" copy
app_outputs = Table(
    "app_outputs", metadata,
    Column("app", String(100), primary_key=True),
    Column("version", String(20)),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("updated_by", String(200), nullable=False),
    Column("operation_id", Integer),
)
