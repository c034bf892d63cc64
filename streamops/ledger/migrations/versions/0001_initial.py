"""initial ledger: desired/observed state, operations, leases, savepoints

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "desired_state",
        sa.Column("app", sa.String(100), primary_key=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("parallelism", sa.Integer, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("updated_by", sa.String(200), nullable=False),
        sa.Column("operation_id", sa.Integer),
    )
    op.create_table(
        "observed_state",
        sa.Column("app", sa.String(100), primary_key=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("pid", sa.Integer),
        sa.Column("host", sa.String(200)),
        sa.Column("spark_app_id", sa.String(200)),
        sa.Column("parallelism", sa.Integer),
        sa.Column("executors", sa.Integer),
        sa.Column("last_batch", sa.BigInteger),
        sa.Column("input_rate", sa.Float),
        sa.Column("processing_rate", sa.Float),
        sa.Column("lag", sa.JSON),
        sa.Column("state_rows", sa.BigInteger),
        sa.Column("state_bytes", sa.BigInteger),
        sa.Column("error", sa.Text),
        sa.Column("heartbeat_at", TZ, nullable=False),
    )
    op.create_table(
        "operations",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("app", sa.String(100), nullable=False),
        sa.Column("kind", sa.String(50), nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("requested_by", sa.String(200), nullable=False),
        sa.Column("started_at", TZ, nullable=False),
        sa.Column("ended_at", TZ),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("before", sa.JSON),
        sa.Column("after", sa.JSON),
    )
    op.create_index("ix_operations_app", "operations", ["app"])
    op.create_table(
        "leases",
        sa.Column("app", sa.String(100), primary_key=True),
        sa.Column("operation_id", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(50), nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("acquired_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
    )
    op.create_table(
        "savepoints",
        sa.Column("id", sa.String(100), primary_key=True),
        sa.Column("app", sa.String(100), nullable=False),
        sa.Column("batch_id", sa.BigInteger, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("offsets", sa.JSON, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("operation_id", sa.Integer),
    )
    op.create_index("ix_savepoints_app", "savepoints", ["app"])


def downgrade() -> None:
    for table in ("savepoints", "leases", "operations", "observed_state", "desired_state"):
        op.drop_table(table)
