"""The request text says what it left out, and MORE texts the whole call: through the real app."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import httpx

from surfaces.sms.fit import BUDGET, sms_length
from tests.databases import DESK, TEXT_STATE, postgres_elsewhere
from tests.surfaces.sms.test_end_to_end import ALICE, BOT, MALLORY, decision, sms_app

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, TEXT_STATE)


async def status(h: Any, key: str, approval_id: str) -> str:
    """The approval's status now, without waiting."""
    response = await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))
    return str(response.json()["status"])


JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiJwYXlvdXRzIiwiYW1vdW50Ijo1MDAwMCwiaWF0IjoxNzAwMDAwMDAwfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


async def ask(h: Any, key: str, call: str, parameters: dict[str, Any]) -> dict[str, Any]:
    response = await h.client.post(
        "/v1/approvals",
        headers=h.auth(key),
        json={
            "executionId": "run_1",
            "toolCallId": call,
            "toolName": "issue_refund",
            "parameters": parameters,
            "surface": {"type": "sms", "phone": ALICE},
        },
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def messages(response: httpx.Response) -> list[str]:
    """The texts a TwiML answer sends back, in order."""
    return [m.text or "" for m in ET.fromstring(response.text).iter("Message")]


async def test_a_long_value_is_cut_said_and_more_texts_the_rest(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        note = ("Refund the order and tell the customer. " * 88)[:3500]
        start = await ask(h, key, "c1", {"note": note, "to": "payouts@attacker.example"})
        await h.delivered(start["approvalId"], every_message=True)
        text = emu.sent[0].body
        assert "to=payouts@attacker.example" in text, text
        assert "1 value cut: reply MORE for the whole call." in text
        assert sms_length(text) <= BUDGET

        parts = messages(await phone.text(ALICE, BOT, " more "))
        assert len(parts) > 1 and all(sms_length(p) <= BUDGET for p in parts)
        assert parts[0].startswith(f"{start['shortCode']} issue_refund (1/{len(parts)}): Params: note=")
        whole = "".join(p.split("): ", 1)[1] for p in parts)
        assert f'note="{note}"' in whole and "to=payouts@attacker.example" in whole
        assert await status(h, key, start["approvalId"]) == "pending", "MORE decides nothing"

        await phone.text(ALICE, BOT, "YES")
        assert (await decision(h, key, start["approvalId"]))["status"] == "approved"


async def test_masks_are_shown_in_place_and_said(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        start = await ask(
            h,
            key,
            "c1",
            {"to": f"payouts@attacker.example {JWT}", "body": "Wire $50,000 to acct 4111111111111111 today"},
        )
        await h.delivered(start["approvalId"], every_message=True)
        text = emu.sent[0].body
        assert f'to="payouts@attacker.example [hidden: JWT, {len(JWT)} chars]"' in text, text
        assert 'body="Wire $50,000 to acct [hidden: card number, 16 chars] today"' in text
        assert "2 values partly hidden: reply MORE for the whole call." in text
        whole = " ".join(messages(await phone.text(ALICE, BOT, "MORE")))
        assert JWT not in whole and "4111111111111111" not in whole
        assert "[hidden: JWT" in whole


async def test_more_goes_only_to_an_approver_and_follows_the_code_rule(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, _, phone):
        key = await h.create_tenant("acme")
        first = await ask(h, key, "c1", {"note": "a" * 400})
        await h.delivered(first["approvalId"], every_message=True)
        stranger = messages(await phone.text(MALLORY, BOT, "MORE"))
        assert len(stranger) == 1 and "aaaa" not in stranger[0] and "Reply YES or NO" in stranger[0]

        second = await ask(h, key, "c2", {"note": "b" * 400})
        await h.delivered(second["approvalId"], every_message=True)
        ambiguous = messages(await phone.text(ALICE, BOT, "MORE"))
        assert len(ambiguous) == 1 and "Several requests are pending" in ambiguous[0]
        coded = messages(await phone.text(ALICE, BOT, f"more {second['shortCode']}"))
        assert "b" * 200 in "".join(coded) and "aaaa" not in "".join(coded)
        wrong = messages(await phone.text(ALICE, BOT, "MORE 99999999"))
        assert "No pending request has code 99999999" in wrong[0]
        for approval in (first, second):
            assert await status(h, key, approval["approvalId"]) == "pending"
