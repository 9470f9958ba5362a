"""Standing allows: an approver's "Allow for …" on a tool, in force until it expires, its
uses run out, or someone revokes it.

`allowances` has one row per standing allow: what it covers (tenant, folded tool name,
requester key, the digest of the arguments that must match, the numbers calls may not
exceed), who granted it on which request, until when, and how often it was used. The
index finds the ones a new call could be covered by, at intake.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "allowances",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("tenant", sa.String(100), nullable=False),
        sa.Column("tool_name", sa.String(128), nullable=False),
        sa.Column("requester", sa.String(250), nullable=False),
        sa.Column("match_key", sa.String(80), nullable=False),
        sa.Column("match_shown", sa.Text, nullable=False),
        sa.Column("at_most", sa.Text, nullable=False),
        sa.Column("surface", sa.String(16), nullable=False),
        sa.Column("granted_by", sa.String(200), nullable=False),
        sa.Column("granted_team", sa.String(64)),
        sa.Column("approval_id", sa.String(40), nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
        sa.Column("uses", sa.Integer, nullable=False),
        sa.Column("max_uses", sa.Integer, nullable=False),
        sa.Column("revoked_at", sa.Double),
        sa.Column("revoked_by", sa.String(250)),
    )
    op.create_index("ix_allowances_scope", "allowances", ["tenant", "tool_name", "requester", "match_key"])


def downgrade() -> None:
    op.drop_index("ix_allowances_scope", table_name="allowances")
    op.drop_table("allowances")
