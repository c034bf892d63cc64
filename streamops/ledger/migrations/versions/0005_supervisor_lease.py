"""supervisor_lease: the one supervisor that acts on the ledger's apps, across hosts

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "supervisor_lease",
        sa.Column("name", sa.String(50), primary_key=True),
        sa.Column("term", sa.Integer, nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("ticks", sa.BigInteger),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("supervisor_lease")
