"""One question, not two: a pending request's coalescing key.

`approvals.coalesce_key` is set on a pending tool call a person is asked about: a digest of
its tenant, execution, tool, requester (and conversation), parameters digest, callback URL
and whether it accepts edits (`bot.approvals.coalescing.key`). A second identical request
while it is pending is answered with it instead of a second card. The unique index covers
pending rows only, so of two concurrent identical creates one inserts and the other conflicts,
reads again and is coalesced; a closed approval leaves the index.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

PENDING = sa.text("status = 'pending' AND coalesce_key IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("coalesce_key", sa.String(64)))
    op.create_index(
        "uq_approvals_coalesce_pending",
        "approvals",
        ["coalesce_key"],
        unique=True,
        sqlite_where=PENDING,
        postgresql_where=PENDING,
    )


def downgrade() -> None:
    op.drop_index("uq_approvals_coalesce_pending", table_name="approvals")
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("coalesce_key")
