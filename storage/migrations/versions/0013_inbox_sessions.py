"""Inbox sessions on the server: a row per signed-in session, so Sign out, the operator and a
policy that no longer names the person can end it (a copied cookie then names nothing).

`inbox_sessions` is keyed by the SHA-256 of the session's random id (the cookie carries the
id itself) and holds the person, the tenants the policy named them in at sign-in, and the
expiry; `inbox_session_ids` lists each id the person holds, case-folded, to end every
session of a person by any one of them.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "inbox_sessions",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("person", sa.Text, nullable=False),
        sa.Column("tenants", sa.Text, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
    )
    op.create_index("ix_inbox_sessions_expiry", "inbox_sessions", ["expires_at"])
    op.create_table(
        "inbox_session_ids",
        sa.Column("session", sa.String(64), primary_key=True),
        sa.Column("person_id", sa.String(320), primary_key=True),
    )
    op.create_index("ix_inbox_session_ids_person", "inbox_session_ids", ["person_id"])


def downgrade() -> None:
    op.drop_index("ix_inbox_session_ids_person", table_name="inbox_session_ids")
    op.drop_table("inbox_session_ids")
    op.drop_index("ix_inbox_sessions_expiry", table_name="inbox_sessions")
    op.drop_table("inbox_sessions")
