"""The key-scopes migration: a key made before it keeps working, as an agent key."""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import command

from storage import raw
from storage.database import _alembic_config, head_revision
from tests.harness import cosigner_app, database

OLD_KEY = "csk_made-before-scopes"


async def test_a_key_from_before_scopes_keeps_working_as_an_agent_key(db_kind: str) -> None:
    async with database(db_kind) as db:
        async with raw.write(db) as conn:  # the schema as the release before scopes left it
            await conn.run_sync(lambda c: command.downgrade(_alembic_config(c), "0006"))
            await conn.execute(
                sa.text(
                    "INSERT INTO tenants (id, name, api_key_hash, created_at) VALUES ('ten_1', 'acme', :h, 1)"
                ),
                {"h": hashlib.sha256(OLD_KEY.encode()).hexdigest()},
            )
        await db.migrate()
        assert await db.revision() == head_revision()
        async with cosigner_app(db=db) as h:
            call = {
                "executionId": "run_1",
                "toolCallId": "c1",
                "toolName": "issue_refund",
                "parameters": {"orderId": "o1"},
                "surface": {"type": "dashboard", "userId": "u_1"},
            }
            asked = await h.client.post("/v1/approvals", json=call, headers=h.auth(OLD_KEY))
            assert asked.status_code == 201, asked.text
            decided = await h.client.post(
                f"/v1/approvals/{asked.json()['approvalId']}/decision",
                json={"decision": "approve", "userId": "u_1"},
                headers=h.auth(OLD_KEY),
            )
            assert decided.status_code == 403 and decided.json()["error"]["code"] == "KEY_SCOPE"
            assert decided.json()["error"]["needs"] == "approver"
