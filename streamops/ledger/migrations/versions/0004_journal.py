"""operations.journal: the steps an operation has done, in order; leases.pid/host: the process
that holds an in-process operation's lease, so a successor can tell that it died

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("operations") as batch:
        batch.add_column(sa.Column("journal", sa.JSON))
    with op.batch_alter_table("leases") as batch:
        batch.add_column(sa.Column("pid", sa.Integer))
        batch.add_column(sa.Column("host", sa.String(200)))


def downgrade() -> None:
    with op.batch_alter_table("leases") as batch:
        batch.drop_column("host")
        batch.drop_column("pid")
    with op.batch_alter_table("operations") as batch:
        batch.drop_column("journal")
