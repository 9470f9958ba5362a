"""The trace an approval belongs to: its W3C trace id, and its span's stored ids.

`trace_id` is the 32-hex id of the agent's trace (from `traceparent`) or of the one Cosigner
started; `trace_context` holds the approval span's id, the sampling decision and its
parent, so the span can be exported when the approval closes, on any replica.

Revision ID: 0006
Revises: 0002
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("trace_id", sa.String(32)))
        batch.add_column(sa.Column("trace_context", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("trace_context")
        batch.drop_column("trace_id")
