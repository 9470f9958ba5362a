"""One question, not two (a pending request's coalescing key); answer many at once (batch cards).

`approvals.coalesce_key` is set on a pending tool call a person is asked about: a digest of
its tenant, execution, tool, requester (and conversation), parameters digest, callback URL
and whether it accepts edits (`bot.approvals.coalescing.key`). A second identical request
while it is pending is answered with it instead of a second card. The unique index covers
pending rows only, so of two concurrent identical creates one inserts and the other conflicts,
reads again and is coalesced; a closed approval leaves the index.

`batch_cards` has one row per group of requests offered together (`bot.approvals.batches`):
where its card is (conversation and message) and the (approval id, digest) list its buttons
carry now (`listed`, JSON; empty once withdrawn). A press is found by its message.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
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
    op.create_table(
        "batch_cards",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("tenant", sa.String(100), nullable=False),
        sa.Column("surface", sa.String(16), nullable=False),
        sa.Column("conversation", sa.String(120), nullable=False),
        sa.Column("message_ref", sa.String(64), nullable=False),
        sa.Column("place", sa.String(120), nullable=False),
        sa.Column("listed", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
    )
    op.create_index("ix_batch_cards_message", "batch_cards", ["conversation", "message_ref"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_batch_cards_message", table_name="batch_cards")
    op.drop_table("batch_cards")
    op.drop_index("uq_approvals_coalesce_pending", table_name="approvals")
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("coalesce_key")
