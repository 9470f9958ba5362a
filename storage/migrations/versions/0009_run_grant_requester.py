"""An "Approve for this run" grant holds for one requester in one conversation, by folded tool name.

`run_grants` gains `requester` (the surface-derived key of who triggered the call and where:
Slack workspace, channel, thread and user; an SMS number; a dashboard user) in its primary
key, and its `tool_name` is the folded name. A grant stored before cannot say whom it was
for, so it is dropped: the next call in such a run is asked again (failing closed).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def _table(with_requester: bool) -> None:
    columns = [
        sa.Column("tenant", sa.String(100), primary_key=True),
        sa.Column("execution_id", sa.String(200), primary_key=True),
        sa.Column("tool_name", sa.String(128), primary_key=True),
    ]
    if with_requester:
        columns.append(sa.Column("requester", sa.String(320), primary_key=True))
    op.create_table(
        "run_grants",
        *columns,
        sa.Column("approval_id", sa.String(40), nullable=False),
        sa.Column("granted_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    )


def upgrade() -> None:
    op.drop_table("run_grants")
    _table(with_requester=True)


def downgrade() -> None:
    # The older table would let a grant cover every requester: drop the grants instead.
    op.drop_table("run_grants")
    _table(with_requester=False)
