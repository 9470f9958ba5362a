"""Operation contracts: an approval may carry an operation (its contract and execution).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("approvals", sa.Column("operation", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("approvals", "operation")
