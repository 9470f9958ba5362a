"""Four eyes by SMS, through the Twilio emulator and really signed webhooks: each approver's
YES is answered with the progress, the same YES again changes nothing, the requester's own
YES never counts, and everyone is told the outcome once the quorum is met."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from surfaces.sms import SmsAdapter, SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator
from tests.databases import DESK, TEXT_STATE, postgres_elsewhere
from tests.harness import Harness, cosigner_app, until

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, TEXT_STATE)

ACCOUNT = "AC" + "f" * 32
TOKEN = "quorum-auth-token"
PUBLIC = "https://cosigner.example.com"
BOT = "+15550000001"
ANN, BOB, CAT = "+15550000011", "+15550000012", "+15550000013"

POLICY = f"""
[tools.delete_account]
kind = "danger"
approvers = ["requester", "tenant_admins"]
quorum = 2

[tenants.acme]
sms_from = "{BOT}"
admins = {{ sms = ["{ANN}", "{BOB}", "{CAT}"] }}
"""


@asynccontextmanager
async def sms_app(db_kind: str) -> AsyncIterator[tuple[Harness, TwilioEmulator, TwilioCaller]]:
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        config = SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC)
        async with cosigner_app(
            POLICY, surfaces=[lambda desk: SmsAdapter(config, desk, desk.sms_store)], database_kind=db_kind
        ) as h:
            yield h, emu, TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)


async def request(h: Harness, key: str, phone: str) -> dict[str, Any]:
    r = await h.client.post(
        "/v1/approvals",
        headers=h.auth(key),
        json={
            "executionId": "run_1",
            "toolCallId": "c1",
            "toolName": "delete_account",
            "parameters": {"accountId": "acct_9"},
            "surface": {"type": "sms", "phone": phone},
        },
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


def reply_of(response: Any) -> str:
    return html.unescape(response.text)


async def test_each_yes_is_answered_with_the_progress_until_the_quorum_is_met(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        # Ann, an admin, asks: her own YES never counts; Bob and Cat must approve.
        start = await request(h, key, ANN)
        aid, code = start["approvalId"], start["shortCode"]
        await h.delivered(aid, every_message=True)
        asked = {t.to: t.body for t in emu.sent}
        assert set(asked) == {ANN, BOB, CAT}
        assert asked[BOB].endswith("Reply YES or NO. 2 approvers must say YES; one NO denies.")

        own = reply_of(await phone.text(ANN, BOT, "YES"))
        assert "Not accepted: the requester's own Approve never counts (separate_duties)" in own, own
        first = reply_of(await phone.text(BOB, BOT, "yes"))
        assert f"You approved delete_account ({code}): 1 of 2 approvals." in first
        assert "1 more approver says YES" in first
        again = reply_of(await phone.text(BOB, BOT, "YES"))
        assert "1 of 2 approvals" in again, "the same YES again changes nothing"
        pending = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
        assert pending["status"] == "pending" and [a["by"] for a in pending["approvals"]] == [BOB]
        sent_before = len(emu.sent)

        last = await phone.text(CAT, BOT, "YES")
        assert "<Message>" not in last.text, "the outcome is texted to everyone instead"
        decided = (await h.client.get(f"/v1/approvals/{aid}?wait=5", headers=h.auth(key))).json()
        assert decided["status"] == "approved"
        assert [(a["by"], a["surface"]) for a in decided["approvals"]] == [(BOB, "sms"), (CAT, "sms")]
        told = await until(lambda: emu.sent[sent_before:] if len(emu.sent) - sent_before == 3 else None)
        assert {t.to for t in told} == {ANN, BOB, CAT}
        assert all(t.body == f"Approved delete_account ({code})." for t in told)


async def test_one_no_vetoes_after_a_yes(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, _, phone):
        key = await h.create_tenant("acme")
        start = await request(h, key, "+15550000099")
        await h.delivered(start["approvalId"], every_message=True)
        await phone.text(ANN, BOT, "YES")
        await phone.text(BOB, BOT, "NO")
        decided = (
            await h.client.get(f"/v1/approvals/{start['approvalId']}?wait=5", headers=h.auth(key))
        ).json()
        assert decided["status"] == "denied" and decided["decidedBy"]["userId"] == BOB
        assert [a["by"] for a in decided["approvals"]] == [ANN]
