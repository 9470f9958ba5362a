"""The folded-names migration: standing denies stored before keep refusing, in any case."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command

from storage import raw
from storage.database import _alembic_config
from tests.harness import database

INSERT = sa.text(
    "INSERT INTO standing_denies (id, tenant, tool_name, surface, approver, requester, approval_id, "
    "created_at) VALUES (:id, 'acme', :tool, 'dashboard', 'u_1', 'dashboard:u_1', 'apv_1', :at)"
)


async def test_old_standing_denies_are_folded_and_a_case_twin_is_lifted(db_kind: str) -> None:
    async with database(db_kind) as db:
        async with raw.write(db) as conn:  # the schema before names were folded
            await conn.run_sync(lambda c: command.downgrade(_alembic_config(c), "0007"))
            await conn.execute(INSERT, {"id": "den_old", "tool": "Issue_Credit", "at": 1.0})
            await conn.execute(INSERT, {"id": "den_twin", "tool": "issue_credit", "at": 2.0})
        await db.migrate()
        async with raw.read(db) as conn:
            rows = (
                await conn.execute(
                    sa.text("SELECT id, tool_name, lifted_by FROM standing_denies ORDER BY id")
                )
            ).all()
    by_id = {r.id: r for r in rows}
    assert by_id["den_old"].tool_name == "issue_credit" and by_id["den_old"].lifted_by is None
    assert by_id["den_twin"].tool_name == "issue_credit"
    assert by_id["den_twin"].lifted_by is not None and "case-insensitively" in by_id["den_twin"].lifted_by
