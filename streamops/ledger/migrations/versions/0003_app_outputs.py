"""app_outputs: which version of its output topic each app writes (reset --output-version, promote)

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "app_outputs",
        sa.Column("app", sa.String(100), primary_key=True),
        sa.Column("version", sa.String(20)),  # None: the spec's output topic itself
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(200), nullable=False),
        sa.Column("operation_id", sa.Integer),
    )


def downgrade() -> None:
    op.drop_table("app_outputs")
