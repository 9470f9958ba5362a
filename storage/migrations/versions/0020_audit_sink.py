"""The audit sink's place in each approval's chain (COSIGNER_AUDIT_SINK_URL).

`approvals.sink_seq` is how many of the approval's audit events the sink has accepted;
`sink_due_at` when the sink worker may next take the approval (a lease while it sends, a
backoff after a failure); `sink_attempts` the failures in a row. The events themselves are
the queue: nothing is copied, so nothing is lost across a restart and the backlog costs no
space of its own. The partial index holds only the approvals the sink is behind on, so the
worker finds them without reading the rest.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

BEHIND = sa.text("audit_seq > sink_seq")


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("sink_seq", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("sink_due_at", sa.Double, nullable=False, server_default="0"))
        batch.add_column(sa.Column("sink_attempts", sa.Integer, nullable=False, server_default="0"))
    op.create_index(
        "ix_approvals_sink_behind",
        "approvals",
        ["sink_due_at"],
        sqlite_where=BEHIND,
        postgresql_where=BEHIND,
    )


def downgrade() -> None:
    op.drop_index("ix_approvals_sink_behind", table_name="approvals")
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("sink_attempts")
        batch.drop_column("sink_due_at")
        batch.drop_column("sink_seq")
