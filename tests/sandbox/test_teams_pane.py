"""The sandbox's Teams pane: `cosigner dev` runs Teams on its emulator, end to end over HTTP."""

from __future__ import annotations

from typing import Any

import httpx

from bot.dev.sandbox import Sandbox
from bot.dev.teams import CONVERSATION, DEMO_TENANT, PEOPLE


async def test_a_teams_request_is_carded_and_pressed_in_the_pane(
    sb: Sandbox, http: httpx.AsyncClient, wait_until: Any
) -> None:
    body = {
        "executionId": "run_teams",
        "toolCallId": "c1",
        "toolName": "issue_refund",
        "parameters": {"orderId": "o1", "amountCents": 12900},
        "surface": {
            "type": "teams",
            "tenantId": DEMO_TENANT,
            "conversationId": CONVERSATION,
            "userId": PEOPLE["alice"],
        },
    }
    created = await http.post("/v1/approvals", json=body)
    assert created.status_code == 201, created.text
    approval = created.json()["approvalId"]

    async def cards() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = (await http.get("/sandbox/api/teams")).json()["cards"]
        return found

    card = (await wait_until_async(cards))[0]
    assert card["buttons"][0] == "approve"
    stranger = await http.post(
        "/sandbox/api/teams/click", json={"id": card["id"], "as": "mallory", "verb": "approve"}
    )
    assert stranger.json()["answer"]["value"]["code"] == "NOT_AN_APPROVER"
    pressed = await http.post(
        "/sandbox/api/teams/click", json={"id": card["id"], "as": "alice", "verb": "approve"}
    )
    assert pressed.json()["answer"]["statusCode"] == 200
    decision = (await http.get(f"/v1/approvals/{approval}?wait=10")).json()
    assert decision["status"] == "approved" and decision["decidedBy"]["surface"] == "teams"


async def wait_until_async(check: Any) -> Any:
    from tests.harness import until_async

    return await until_async(check, seconds=10)


async def test_the_page_carries_the_teams_pane(sb: Sandbox, http: httpx.AsyncClient) -> None:
    page = await http.get("/sandbox")
    assert 'id="teams-cards"' in page.text and "/sandbox/sandbox_teams.js" in page.text
    script = await http.get("/sandbox/sandbox_teams.js")
    assert script.status_code == 200 and "/sandbox/api/teams/click" in script.text
