"""Standing denies hold the folded tool name: `Issue_credit` is refused by a deny on `issue_credit`.

Tool names match case-insensitively (`str.casefold()`; the tool-name pattern is ASCII, where
that is `lower()`). Rows stored before keep their meaning under the folded name; where two
standing denies in force differed only by the case of the tool, the older one stays in force
and the newer is marked lifted by this migration.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

import time

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

MERGED = "migration: the same tool as an older standing deny (names match case-insensitively)"


def upgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.text(
            "SELECT id, tenant, tool_name, surface, approver, requester FROM standing_denies "
            "WHERE lifted_at IS NULL ORDER BY created_at, id"
        )
    ).all()
    kept: set[tuple[str, ...]] = set()
    for row in rows:
        scope = (row.tenant, row.tool_name.lower(), row.surface, row.approver, row.requester)
        if scope in kept:
            conn.execute(
                sa.text("UPDATE standing_denies SET lifted_at = :t, lifted_by = :by WHERE id = :id"),
                {"t": time.time(), "by": MERGED, "id": row.id},
            )
        kept.add(scope)
    conn.execute(sa.text("UPDATE standing_denies SET tool_name = lower(tool_name)"))


def downgrade() -> None:
    # The folded names are valid names: nothing to undo.
    pass
