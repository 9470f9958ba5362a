"""A quorum of distinct approvers: how many an approval needs, and each Approve so far.

`approvals` gains `quorum` (1 for every approval stored before: one answer decided) and
`separate_duties` (whether the requester's own Approve is refused); `approval_votes` holds
one row per approver who approved a request whose quorum is above 1, keyed by approval and
approver, so the same person is never counted twice.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("quorum", sa.Integer, nullable=False, server_default="1"))
        batch.add_column(sa.Column("separate_duties", sa.Boolean, nullable=False, server_default=sa.false()))
    op.create_table(
        "approval_votes",
        sa.Column("approval_id", sa.String(40), primary_key=True),
        sa.Column("approver", sa.String(320), primary_key=True),
        sa.Column("surface", sa.String(16), nullable=False),
        sa.Column("at", sa.Double, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("approval_votes")
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("separate_duties")
        batch.drop_column("quorum")
