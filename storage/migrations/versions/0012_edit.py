"""Edit before approve: what an approver may change of a call, and the call they approved.

`edit` holds JSON (`contracts.edits.EditState`): the editable parameters offered, the
agent's `parametersSchema`, the unredacted parameters sealed under COSIGNER_SECRET when
redaction changed them, and after an edit the edited call (as shown), the changed fields
and its digest.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("edit", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("edit")
