"""When each request was last texted to each number, so a bare YES is bound only when exact.

`sms_texts` has one row per (number, approval): the time a text about that request (the
request itself, a reminder, the whole call) last went to that number. A bare `YES` is
refused when another request was texted to the same number recently, or after the text
being answered (`storage.sms_state.texted_other`); the index finds those rows by number.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sms_texts",
        sa.Column("number", sa.String(40), primary_key=True),
        sa.Column("approval_id", sa.String(40), primary_key=True),
        sa.Column("texted_at", sa.Double, nullable=False),
    )
    op.create_index("ix_sms_texts_number_at", "sms_texts", ["number", "texted_at"])


def downgrade() -> None:
    op.drop_index("ix_sms_texts_number_at", table_name="sms_texts")
    op.drop_table("sms_texts")
