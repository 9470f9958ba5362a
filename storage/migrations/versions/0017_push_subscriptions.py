"""Web Push subscriptions: each signed-in person's browsers that asked to be notified.

`push_subscriptions` has one row per (id, endpoint): every id the person's sign-in vouched
for (Slack user id, verified email, verified phone) with the subscription of one browser
(its push service endpoint and the keys a message is encrypted to). A request's approvers
are matched by id; a subscription the push service says is gone (404, 410) is deleted by
endpoint. The VAPID key pair the messages are signed with is sealed in `flags` (namespace
`vapid`), as Slack tokens are.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "push_subscriptions",
        sa.Column("approver", sa.String(320), primary_key=True),
        sa.Column("endpoint", sa.String(1000), primary_key=True),
        sa.Column("p256dh", sa.String(200), nullable=False),
        sa.Column("auth", sa.String(100), nullable=False),
        sa.Column("issuer", sa.String(500), nullable=False),
        sa.Column("subject", sa.String(500), nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    )
    op.create_index("ix_push_subscriptions_endpoint", "push_subscriptions", ["endpoint"])


def downgrade() -> None:
    op.drop_index("ix_push_subscriptions_endpoint", table_name="push_subscriptions")
    op.drop_table("push_subscriptions")
