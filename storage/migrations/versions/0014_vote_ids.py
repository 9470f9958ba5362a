"""One person, several ids: a counted Approve keeps every id its approver held.

`approval_votes` gains `tied`, a JSON array of the approver's other ids that an identity
provider vouched for with the answer (an inbox sign-in with Slack names the Slack user id
and the verified email), so a later answer is compared with each of them: nobody counts
twice, whichever id they answer with. Rows stored before hold none (NULL): their approver's
id alone, as they were counted.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approval_votes") as batch:
        batch.add_column(sa.Column("tied", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("approval_votes") as batch:
        batch.drop_column("tied")
