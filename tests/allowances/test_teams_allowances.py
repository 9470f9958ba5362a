"""Allow for … on a Teams Adaptive Card: a signed `adaptiveCard/action` invoke through the
Bot Connector's JWT checks, then later calls decided at once."""

from __future__ import annotations

from typing import Any

from tests.databases import ALLOWANCES, DESK, postgres_elsewhere
from tests.surfaces.teams.world import (
    AAD,
    ALICE,
    CONVERSATION,
    MALLORY,
    POLICY,
    posted,
    request,
    state,
    teams_app,
)

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, ALLOWANCES)

ALLOWING = POLICY.replace(
    '[tools.issue_credit]\nkind = "write"\nconfirm = true\n',
    '[tools.issue_credit]\nkind = "write"\nconfirm = true\nallow_for = "1h"\nallow_for_match = ["orderId"]\n',
)


async def allowances(h: Any) -> list[dict[str, Any]]:
    r = await h.client.get("/v1/allowances", headers=h.auth(h.approver_key("acme")))
    return list(r.json()["allowances"])


async def test_allow_for_1h_on_a_teams_card(db_kind: str) -> None:
    assert ALLOWING != POLICY
    async with teams_app(db_kind, policy=ALLOWING) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key, tool="issue_credit")
        card = await posted(h, emu, approval_id)
        assert card.buttons == ["approve", "approve_for_run", "allow_for_15m", "allow_for_1h", "deny"]
        await emu.click(h.client, card, "allow_for_1h", MALLORY)  # not an approver: nothing created
        assert (await state(h, key, approval_id))["status"] == "pending"
        assert await allowances(h) == []
        await emu.click(h.client, card, "allow_for_1h", ALICE)
        assert (await state(h, key, approval_id))["status"] == "approved"
        (held,) = await until_held(h)
        assert held["grantedBy"]["surface"] == "teams" and held["grantedBy"]["userId"] == ALICE
        later = await request_again(h, key)
        assert later["decidedBy"]["kind"] == "allowance"


async def until_held(h: Any) -> list[dict[str, Any]]:
    found = await allowances(h)
    assert found
    return found


async def request_again(h: Any, key: str) -> dict[str, Any]:
    body = {
        "executionId": "run_82",
        "toolCallId": "call_8",
        "toolName": "issue_credit",
        "parameters": {"orderId": "ord_4421", "amountCents": 1},
        "surface": {"type": "teams", "tenantId": AAD, "conversationId": CONVERSATION, "userId": ALICE},
    }
    r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result
