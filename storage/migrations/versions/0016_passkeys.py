"""Passkeys for step-up: each approver's WebAuthn credentials, the challenges they sign, and
which approvals need one.

`passkeys` has one row per registered credential: its id (base64url), COSE public key, the
signature counter last seen, the person it belongs to (issuer and subject of their inbox
sign-in), the name they gave it and when it was added and last used. `step_up_challenges`
holds each challenge handed to a browser until it is used once or expires: a registration's,
or an approval's, bound to the approval id and the digest of the call the page showed.
`approvals.step_up` marks a request whose Approve counts only with a passkey.

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


def upgrade() -> None:
    op.create_table(
        "passkeys",
        sa.Column("credential_id", sa.String(1400), primary_key=True),
        sa.Column("person", sa.String(700), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("public_key", sa.LargeBinary, nullable=False),
        sa.Column("sign_count", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("used_at", sa.Double),
    )
    op.create_index("ix_passkeys_person", "passkeys", ["person"])
    op.create_table(
        "step_up_challenges",
        sa.Column("challenge", sa.String(128), primary_key=True),
        sa.Column("person", sa.String(700), nullable=False),
        sa.Column("approval_id", sa.String(40)),
        sa.Column("digest", sa.String(80)),
        sa.Column("expires_at", sa.Double, nullable=False),
    )
    op.create_index("ix_step_up_challenges_expiry", "step_up_challenges", ["expires_at"])
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("step_up", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("step_up")
    op.drop_index("ix_step_up_challenges_expiry", table_name="step_up_challenges")
    op.drop_table("step_up_challenges")
    op.drop_index("ix_passkeys_person", table_name="passkeys")
    op.drop_table("passkeys")
