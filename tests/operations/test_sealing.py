"""An operation's prepared arguments are sealed at rest, and still reach `execute` intact;
a row written before sealing (arguments in clear) is still executed with its arguments."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from storage import raw
from storage.tables import approvals
from tests.harness import Harness, cosigner_app, until
from tests.operations.application import SECRET, SECRET_ENV, contract_application, policy_for
from tests.operations.test_lifecycle import ALLOW, decide, proposal, propose


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)


async def _column(h: Harness, aid: str) -> str:
    async with raw.read(h.parts.db) as conn:
        found = (
            await conn.execute(sa.select(approvals.c.operation).where(approvals.c.id == aid))
        ).scalar_one()
    return str(found)


async def test_prepared_arguments_are_sealed_at_rest_and_executed_as_prepared(db_kind: str) -> None:
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), callback_allow=ALLOW, database_kind=db_kind) as h:
            key = await h.create_tenant("acme")
            aid = (await propose(h, key, proposal())).json()["approvalId"]
            stored = json.loads(await _column(h, aid))
            assert "arguments" not in stored and stored["sealed_arguments"].startswith("cosigner-seal:v1:")
            assert "amountCents" not in await _column(h, aid)
            await decide(h, key, aid)
            await until(lambda: app.shop.refunds == 1)
            assert app.shop.last_execute["arguments"] == {
                "orderId": "ord_4421",
                "amountCents": 12900,
                "currency": "usd",
            }


async def test_a_row_with_clear_arguments_from_before_sealing_still_executes() -> None:
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            aid = (await propose(h, key, proposal())).json()["approvalId"]
            old = json.loads(await _column(h, aid))
            del old["sealed_arguments"]
            old["arguments"] = {"orderId": "ord_4421", "amountCents": 12900, "currency": "usd"}
            async with raw.write(h.parts.db) as conn:
                await conn.execute(
                    sa.update(approvals).where(approvals.c.id == aid).values(operation=json.dumps(old))
                )
            await decide(h, key, aid)
            await until(lambda: app.shop.refunds == 1)
            assert app.shop.last_execute["arguments"]["amountCents"] == 12900
