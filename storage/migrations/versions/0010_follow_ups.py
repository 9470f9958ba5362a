"""Reminders and escalations: a JSON column on approvals, and a table of escalated deliveries.

`approvals.follow_ups` holds when the reminder was sent and each escalation step taken (its
route and receipt). `escalations` has one row per step taken: its primary key makes a step
happen once, and its `delivery_key` finds a request by where it was escalated to (an SMS
answer from an admin's phone).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("follow_ups", sa.Text(), nullable=True))
    op.create_table(
        "escalations",
        sa.Column("approval_id", sa.String(40), primary_key=True),
        sa.Column("step", sa.Integer, primary_key=True),
        sa.Column("delivery_key", sa.String(120), nullable=False),
        sa.Column("at", sa.Double, nullable=False),
    )
    op.create_index("ix_escalations_delivery", "escalations", ["delivery_key"])


def downgrade() -> None:
    op.drop_index("ix_escalations_delivery", table_name="escalations")
    op.drop_table("escalations")
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("follow_ups")
