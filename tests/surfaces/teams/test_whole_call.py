"""Show the full call on Teams shows the whole call, whatever its size, a page at a time.

A Teams message holds about 40 KB; a call may be far larger (the API takes up to 1 MB). The
full view is paged: every page fits a Teams message, and the pages together hold every
parameter uncut, names included, so nobody approves on Teams a call Teams could not show.
"""

from __future__ import annotations

import re
from typing import Any

from contracts.shown import render
from surfaces.teams.emulator import MESSAGE_LIMIT, message_size
from tests.databases import DESK, postgres_elsewhere
from tests.surfaces.teams.world import ALICE, posted, request, state, teams_app

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK)

LONG_NAME = "recipient_" + "x" * 110  # longer than the card's 80 characters of a name
CALL: dict[str, Any] = {f"p{i:03d}": f"{i:020d}" for i in range(100)}
CALL |= {"memo": "Pay the invoice * [now] " * 2500, LONG_NAME: "payouts@attacker.example"}


def unescape(text: str) -> str:
    """A TextBlock's text as the reader sees it: the card's markdown escapes undone."""
    return re.sub(r"\\(.)", r"\1", text)


def read_pages(responses: list[dict[str, Any]]) -> list[str]:
    """The call's lines as the pages show them: a continued piece joins the line before."""
    lines: list[str] = []
    for response in responses:
        for block in response["value"]["body"]:
            if block.get("fontType") != "Monospace":
                continue
            if block.get("spacing") == "None":
                lines[-1] += unescape(block["text"])
            else:
                lines.append(unescape(block["text"]))
    return lines


async def test_show_the_full_call_pages_through_the_whole_call_within_teams_limits(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        response = await h.client.post(
            "/v1/approvals",
            headers=h.auth(key),
            json={
                "executionId": "run_81",
                "toolCallId": "call_big",
                "toolName": "issue_refund",
                "parameters": CALL,
                "surface": {
                    "type": "teams",
                    "tenantId": "72f988bf-86f1-41af-91ab-2d7cd011db47",
                    "conversationId": "19:acme-ops@thread.tacv2",
                    "userId": ALICE,
                },
            },
        )
        assert response.status_code == 201, response.text
        approval_id = response.json()["approvalId"]
        card = await posted(h, emu, approval_id)
        assert card.buttons == ["approve", "deny", "full_call"]

        pages = [(await emu.click(h.client, card, "full_call", ALICE)).json()]
        while True:
            assert message_size(pages[-1]["value"]) <= MESSAGE_LIMIT
            following = [a for a in pages[-1]["value"]["actions"] if a["title"] == "Next page"]
            if not following:
                break
            pressed = await emu.click(h.client, card, "full_call", ALICE, data=following[0]["data"])
            pages.append(pressed.json())
        assert len(pages) > 1
        assert f"(page {len(pages)} of {len(pages)})" in str(pages[-1]["value"]["body"])
        # Every page keeps the answers; together they hold every field, uncut, in order.
        assert all([a["verb"] for a in p["value"]["actions"]][:2] == ["approve", "deny"] for p in pages)
        expected = [f"{render(name)}: {render(CALL[name])}" for name in sorted(CALL)]
        assert read_pages(pages) == expected
        assert (await state(h, key, approval_id))["status"] == "pending"


async def test_a_long_parameter_name_is_said_cut_on_the_card_and_shown_whole_in_full(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        assert "full_call" not in card.buttons  # the usual call fits the card whole
        response = await h.client.post(
            "/v1/approvals",
            headers=h.auth(key),
            json={
                "executionId": "run_81",
                "toolCallId": "call_8",
                "toolName": "issue_refund",
                "parameters": {"amountCents": 100, LONG_NAME: "payouts@attacker.example"},
                "surface": {
                    "type": "teams",
                    "tenantId": "72f988bf-86f1-41af-91ab-2d7cd011db47",
                    "conversationId": "19:acme-ops@thread.tacv2",
                    "userId": ALICE,
                },
            },
        )
        named = await posted(h, emu, response.json()["approvalId"])
        assert named.buttons == ["approve", "deny", "full_call"]
        assert "1 value cut: press Show the full call" in str(named.card["body"])
        full = (await emu.click(h.client, named, "full_call", ALICE)).json()
        assert read_pages([full]) == ['"amountCents": 100', f'"{LONG_NAME}": "payouts@attacker.example"']
