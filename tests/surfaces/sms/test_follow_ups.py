"""Reminders and escalations by SMS, through the Twilio emulator and really signed texts.

The requester is reminded once by text; while still pending the request is texted to the
tenant admins' phones, and an admin's YES decides it then, and not before. Time moves by
the app's manual clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from surfaces.sms import SmsAdapter, SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator
from tests.databases import DESK, TEXT_STATE, postgres_elsewhere
from tests.harness import Harness, cosigner_app, until, until_async

# On PostgreSQL, the storage path of the tests marked runs in the tests these name.
POSTGRES_ELSEWHERE = postgres_elsewhere(DESK, TEXT_STATE)

ACCOUNT = "AC" + "f" * 32
TOKEN = "follow-ups-auth-token"
PUBLIC = "https://cosigner.example.com"
BOT = "+15550000001"
ALICE = "+15550000002"
ADMIN = "+15550000009"
MINUTE = 60.0

POLICY = f"""
[defaults]
timeout = "5m"
sms_timeout = "1h"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
timeout = "1h"  # the requester may be asked on any surface: each must leave time for the steps
remind_after = "15m"
escalate = [{{ after = "20m", to = "tenant_admins" }}]

[tenants.acme]
sms_from = "{BOT}"
admins = {{ sms = ["{ADMIN}"] }}
"""


@asynccontextmanager
async def sms_app(db_kind: str) -> AsyncIterator[tuple[Harness, TwilioEmulator, TwilioCaller]]:
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        config = SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC)
        surfaces = [lambda desk: SmsAdapter(config, desk, desk.sms_store)]
        async with cosigner_app(POLICY, surfaces=surfaces, database_kind=db_kind) as h:
            yield h, emu, TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)


async def request(h: Harness, key: str) -> dict[str, Any]:
    response = await h.client.post(
        "/v1/approvals",
        headers=h.auth(key),
        json={
            "executionId": "run_1",
            "toolCallId": "c1",
            "toolName": "issue_refund",
            "parameters": {"orderId": "ord_4421", "amountCents": 12900},
            "surface": {"type": "sms", "phone": ALICE},
        },
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def status(h: Harness, key: str, approval_id: str) -> str:
    body = (await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))).json()
    return str(body["status"])


async def test_reminded_by_text_then_texted_to_the_admins_whose_yes_decides(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        start = await request(h, key)
        code = start["shortCode"]
        await h.delivered(start["approvalId"], every_message=True)
        assert len(emu.texts_to(ALICE)) == 1

        early = await phone.text(ADMIN, BOT, "YES")  # not escalated yet: the admin was never asked
        assert "Reply YES or NO" in early.text or "no request" in early.text.lower()
        assert await status(h, key, start["approvalId"]) == "pending"

        h.advance(15 * MINUTE)
        reminder = await until(lambda: len(emu.texts_to(ALICE)) == 2 and emu.texts_to(ALICE)[1])
        assert reminder.from_ == BOT and reminder.body.startswith("Reminder:")
        assert f"YES {code}" in reminder.body and "issue_refund" in reminder.body
        assert emu.texts_to(ADMIN) == []

        h.advance(5 * MINUTE)
        (asked,) = await until(lambda: emu.texts_to(ADMIN))
        assert asked.from_ == BOT and f"request {code}: approve issue_refund?" in asked.body

        answered = await phone.text(ADMIN, BOT, "yes")
        assert answered.status_code == 200 and "<Message>" not in answered.text, answered.text
        decided = (
            await h.client.get(f"/v1/approvals/{start['approvalId']}?wait=5", headers=h.auth(key))
        ).json()
        assert decided["status"] == "approved"
        assert decided["decidedBy"] == {"kind": "person", "surface": "sms", "userId": ADMIN}
        # Everyone the request was texted to is told how it ended, once.
        await until(lambda: len(emu.texts_to(ALICE)) == 3 and len(emu.texts_to(ADMIN)) == 2)
        assert (
            emu.texts_to(ALICE)[2].body == emu.texts_to(ADMIN)[1].body == f"Approved issue_refund ({code})."
        )


@POSTGRES_ELSEWHERE
async def test_the_requester_may_still_answer_after_the_escalation(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        start = await request(h, key)
        await h.delivered(start["approvalId"], every_message=True)
        h.advance(20 * MINUTE)
        await until(lambda: emu.texts_to(ADMIN))
        await phone.text(ALICE, BOT, "NO")
        decided = (
            await h.client.get(f"/v1/approvals/{start['approvalId']}?wait=5", headers=h.auth(key))
        ).json()
        assert decided["status"] == "denied" and decided["decidedBy"]["userId"] == ALICE
        late = await phone.text(ADMIN, BOT, "YES")
        assert "denied" in late.text.lower()
        assert await status(h, key, start["approvalId"]) == "denied"


@POSTGRES_ELSEWHERE
async def test_an_escalation_twilio_refuses_leaves_the_request_with_its_approvers(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        start = await request(h, key)
        await h.delivered(start["approvalId"], every_message=True)
        emu.opt_out(ADMIN)  # Twilio knows a STOP: error 21610
        h.advance(20 * MINUTE)
        audit_url = f"/v1/approvals/{start['approvalId']}/audit"

        async def failed() -> list[dict[str, Any]]:
            events = (await h.client.get(audit_url, headers=h.auth(key))).json()["events"]
            return [e for e in events if e["event"] == "escalation_failed"]

        (event,) = await until_async(failed)
        assert "21610" in event["data"]["why"]
        assert await status(h, key, start["approvalId"]) == "pending"
        await phone.text(ALICE, BOT, "YES")
        decided = (
            await h.client.get(f"/v1/approvals/{start['approvalId']}?wait=5", headers=h.auth(key))
        ).json()
        assert decided["status"] == "approved"
