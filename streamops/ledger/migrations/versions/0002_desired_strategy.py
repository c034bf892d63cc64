"""desired_state.strategy: how the supervisor applies a parallelism change (restart | live)

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("desired_state") as batch:
        batch.add_column(sa.Column("strategy", sa.String(20), nullable=False, server_default="restart"))


def downgrade() -> None:
    with op.batch_alter_table("desired_state") as batch:
        batch.drop_column("strategy")
