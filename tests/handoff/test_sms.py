"""Handoffs by SMS: the steps texted, DONE / NO as really signed Twilio webhooks, a real expect endpoint."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from surfaces.sms import SmsAdapter, SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator
from surfaces.sms.replies_text import HANDOFF_HELP
from surfaces.sms.reply import OPT_OUT_WORDS
from tests.databases import DESK, HANDOFFS, TEXT_STATE, postgres_elsewhere
from tests.handoff_world import (
    EXPECT_SECRET,
    LOOPBACK,
    SECRET_ENV,
    expect_server,
    handoff_policy,
    handoff_request,
)
from tests.harness import Harness, ManualClock, cosigner_app, until

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, HANDOFFS, TEXT_STATE)

ACCOUNT = "AC" + "d" * 32
TOKEN = "handoff-auth-token"
PUBLIC = "https://cosigner.example.com"
BOT = "+15550000001"
OTHER_BOT = "+15550000009"
ALICE = "+15550000002"
MALLORY = "+15550000666"
TENANTS = f'[tenants.acme]\nsms_from = "{BOT}"\n\n[tenants.globex]\nsms_from = "{OTHER_BOT}"'
SURFACE = {"type": "sms", "phone": ALICE}


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, EXPECT_SECRET)


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, TwilioEmulator, TwilioCaller, Any, str]]:
    clock = ManualClock()
    async with expect_server(clock) as (shop, url), TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        config = SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC)
        policy = handoff_policy(url, TENANTS)
        async with cosigner_app(
            policy,
            surfaces=[lambda desk: SmsAdapter(config, desk, desk.sms_store)],
            clock=clock,
            database_kind=db_kind,
            callback_allow=LOOPBACK,
        ) as h:
            phone = TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)
            yield h, emu, phone, shop, await h.create_tenant("acme")


async def texted(h: Harness, emu: TwilioEmulator, key: str, call: str = "call_1") -> dict[str, Any]:
    response = await h.client.post("/v1/approvals", json=handoff_request(SURFACE, call), headers=h.auth(key))
    assert response.status_code == 201 and response.json()["type"] == "handoff_start", response.text
    body: dict[str, Any] = response.json()
    for _ in range(250):
        placed = await h.desk.placed(body["approvalId"])
        if placed is not None and placed.delivered is not None and placed.delivered.message_refs:
            return body
        await asyncio.sleep(0.02)
    raise AssertionError("not texted")


async def decided(h: Harness, key: str, aid: str) -> dict[str, Any]:
    waited = h.client.get(f"/v1/approvals/{aid}?wait=10", headers=h.auth(key))
    body: dict[str, Any] = (await asyncio.wait_for(waited, 10)).json()
    return body


async def test_the_text_has_the_steps_and_offers_done_or_no_only(world: Any) -> None:
    h, emu, _, _, key = world
    start = await texted(h, emu, key)
    text = emu.sent[0].body
    assert text.startswith(f"Cosigner {start['shortCode']}: publish_changes needs you.")
    assert "Publishing needs the verification code" in text
    assert "1. Open Settings → Publishing\n2. Enter the verification code\n3. Press Publish" in text
    assert "ownerPin=[REDACTED]" in text and "482910" not in text
    assert "Reply DONE when finished, or NO to cancel." in text
    # Twilio's opt-out words would unsubscribe the person: never asked for.
    assert not set(re.findall(r"\b[A-Z]{3,}\b", text)) & OPT_OUT_WORDS


async def test_done_is_checked_then_fails_or_completes(world: Any) -> None:
    h, emu, phone, shop, key = world
    start = await texted(h, emu, key)
    answered = await phone.text(ALICE, BOT, " done ")
    assert answered.status_code == 200 and "<Message>" not in answered.text
    body = await decided(h, key, start["approvalId"])
    assert body["status"] == "failed" and body["detail"] == "change chg_1 is not published"
    assert body["decidedBy"] == {"kind": "person", "surface": "sms", "userId": ALICE}
    await until(lambda: len(emu.sent) == 2)
    assert emu.sent[1].body.startswith("Not confirmed: publish_changes")

    second = await texted(h, emu, key, "call_2")
    shop.publish("chg_1")
    await phone.text(ALICE, BOT, "DONE")
    body = await decided(h, key, second["approvalId"])
    assert body["status"] == "completed" and body["receipt"]["detail"] == "change chg_1 is live"
    await until(lambda: len(emu.sent) == 4)
    assert emu.sent[3].body.startswith("Done and confirmed by the app")


async def test_no_cancels_and_a_late_done_is_refused(world: Any) -> None:
    h, emu, phone, shop, key = world
    start = await texted(h, emu, key)
    await phone.text(ALICE, BOT, "NO")
    body = await decided(h, key, start["approvalId"])
    assert body["status"] == "cancelled" and body["code"] == "HANDOFF_CANCELLED"
    assert body["decidedBy"]["userId"] == ALICE

    h.clock.advance(1)  # the newest request is the one a late answer is matched to
    second = await texted(h, emu, key, "call_2")
    h.advance(301)
    body = await decided(h, key, second["approvalId"])
    assert body["status"] == "expired" and body["code"] == "HANDOFF_TIMEOUT"
    shop.publish("chg_1")
    late = await phone.text(ALICE, BOT, "DONE")
    assert f"Request {second['shortCode']} expired" in late.text
    assert shop.calls == []


async def test_wrong_number_tenant_or_keyword_decides_nothing(world: Any) -> None:
    h, emu, phone, shop, key = world
    shop.publish("chg_1")
    start = await texted(h, emu, key)
    stranger = await phone.text(MALLORY, BOT, "DONE")
    assert "Reply YES or NO" in stranger.text
    other_tenant = await phone.text(ALICE, OTHER_BOT, "DONE")
    assert "Reply YES or NO" in other_tenant.text
    forged = await phone.text(ALICE, BOT, "DONE", token="guessed")
    assert forged.status_code == 403
    yes = await phone.text(ALICE, BOT, "YES")
    assert "Not accepted" in yes.text and "handoff" in yes.text
    unclear = await phone.text(ALICE, BOT, "ok I did it")
    assert HANDOFF_HELP in unclear.text and "YES" not in unclear.text, "the help names DONE and NO"
    current = (await h.client.get(f"/v1/approvals/{start['approvalId']}", headers=h.auth(key))).json()
    assert current["status"] == "pending" and shop.calls == []


async def test_two_pending_need_the_code(world: Any) -> None:
    h, emu, phone, shop, key = world
    shop.publish("chg_1")
    first = await texted(h, emu, key)
    second = await texted(h, emu, key, "call_2")
    code = second["shortCode"]
    assert f"Reply DONE {code} when finished, or NO {code} to cancel" in emu.sent[1].body
    ambiguous = await phone.text(ALICE, BOT, "DONE")
    assert code in ambiguous.text and shop.calls == []
    await phone.text(ALICE, BOT, f"DONE {code}")
    assert (await decided(h, key, second["approvalId"]))["status"] == "completed"
    current = (await h.client.get(f"/v1/approvals/{first['approvalId']}", headers=h.auth(key))).json()
    assert current["status"] == "pending"


async def test_two_done_texts_at_once_make_one_check(world: Any) -> None:
    h, emu, phone, shop, key = world
    shop.publish("chg_1")
    start = await texted(h, emu, key)
    replies = await asyncio.gather(*(phone.text(ALICE, BOT, "DONE") for _ in range(3)))
    assert all(r.status_code == 200 for r in replies)
    assert (await decided(h, key, start["approvalId"]))["status"] == "completed"
    assert len(shop.calls) == 1
