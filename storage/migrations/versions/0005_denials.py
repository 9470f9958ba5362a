"""Standing denies: an approver's "always deny" for a tool, per tenant, approver and requester.

At most one standing deny in force per scope (a partial unique index over the rows not
lifted); lifted rows stay, so a refusal and its audit record can still name them.

Revision ID: 0005
Revises: 0002
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SCOPE = ("tenant", "tool_name", "surface", "approver", "requester")


def upgrade() -> None:
    op.create_table(
        "standing_denies",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("tenant", sa.String(100), nullable=False),
        sa.Column("tool_name", sa.String(128), nullable=False),
        sa.Column("surface", sa.String(16), nullable=False),
        sa.Column("approver", sa.String(200), nullable=False),
        sa.Column("approver_team", sa.String(64)),
        sa.Column("requester", sa.String(250), nullable=False),
        sa.Column("approval_id", sa.String(40), nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("lifted_at", sa.Double),
        sa.Column("lifted_by", sa.String(250)),
    )
    op.create_index(
        "uq_standing_denies_live",
        "standing_denies",
        list(SCOPE),
        unique=True,
        sqlite_where=sa.text("lifted_at IS NULL"),
        postgresql_where=sa.text("lifted_at IS NULL"),
    )
    op.create_index("ix_standing_denies_tenant", "standing_denies", ["tenant", "created_at"])


def downgrade() -> None:
    op.drop_table("standing_denies")
