"""An operation's card and text show the application's preview as the thing approved.

Real Slack and Twilio emulators, the real example application over HTTP; clicks and
replies really signed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from contracts.ports import ApprovalDesk
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.emulator import SlackEmulator
from surfaces.sms import SmsAdapter, SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator
from tests.databases import DESK, OPERATIONS, postgres_elsewhere
from tests.harness import Harness, cosigner_app, until
from tests.operations.application import (
    OPERATION,
    SECRET,
    SECRET_ENV,
    Application,
    contract_application,
    policy_for,
)

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, OPERATIONS)

SIGNING = "ops-signing-secret"
APP_ID = "A0COSIGNER"
ACCOUNT = "AC" + "o" * 32
TOKEN = "ops-auth-token"
PUBLIC = "https://cosigner.example.com"
BOT = "+15550000001"
ALICE = "+15550000002"
TENANT = f"""
[tenants.acme]
slack_team = "T0ACME"
sms_from = "{BOT}"
"""


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)


@asynccontextmanager
async def slack_world(
    db_kind: str = "sqlite",
) -> AsyncIterator[tuple[Harness, SlackEmulator, Application, str]]:
    with contract_application() as app:
        async with SlackEmulator.running(team_id="T0ACME", app_id=APP_ID) as emu:
            config = SlackConfig(
                signing_secret=SIGNING, bot_token="xoxb-acme", api_url=emu.api_url, app_id=APP_ID
            )

            def factory(desk: ApprovalDesk) -> SlackAdapter:
                return SlackAdapter(config, desk)

            policy = policy_for(app.url, extra=TENANT)
            async with cosigner_app(
                policy, surfaces=[factory], database_kind=db_kind, callback_allow="127.0.0.1"
            ) as h:
                yield h, emu, app, await h.create_tenant("acme")


def slack_proposal(call: str = "c1") -> dict[str, Any]:
    return {
        "executionId": "run_1",
        "toolCallId": call,
        "operation": OPERATION,
        "request": {"orderId": "ord_4421", "amountCents": 99999, "note": "refund everything"},
        "reason": "The customer was promised a full refund",
        "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
    }


async def propose(h: Harness, key: str, body: dict[str, Any]) -> str:
    r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


async def click(h: Harness, emu: SlackEmulator, posted: Any) -> Any:
    return await emu.click(
        h.client,
        channel=posted.channel,
        ts=posted.ts,
        action_id="cosigner.approve",
        secret=SIGNING,
        user="U1",
    )


async def test_the_card_shows_the_preview_as_approved_and_the_request_as_a_claim(db_kind: str) -> None:
    async with slack_world(db_kind) as (h, emu, _app, key):
        aid = await propose(h, key, slack_proposal())
        posted = (await until(lambda: [m for m in emu.messages if m.method == "chat.postMessage"]))[0]
        blocks = {b.get("block_id"): b for b in posted.blocks}
        assert posted.blocks[0]["text"]["text"] == "Refund the missing discount on ord_4421"
        preview = blocks["cosigner:preview"]["text"]["text"]
        assert "You approve exactly this" in preview and "*Amount:* $129.00" in preview
        assert "$129.00 to the card" in blocks["cosigner:effects"]["text"]["text"]
        claim = blocks["cosigner:claim"]["text"]["text"]
        # The agent's own figure appears only under its claim, never as what is approved.
        assert "its claim, unverified" in claim and "99999" in claim and "full refund" in claim
        assert "99999" not in preview
        assert (await click(h, emu, posted)).status_code == 200
        done = (await h.client.get(f"/v1/approvals/{aid}?wait=10", headers=h.auth(key))).json()
        assert done["outcome"]["message"] == "Refunded $129.00"
        updated = await until(
            lambda: (m := emu.latest(posted.channel, posted.ts)) and m.method == "chat.update" and m
        )
        flat = json.dumps(updated.blocks)
        assert "*Outcome:* Refunded $129.00" in flat and "actions" not in [b["type"] for b in updated.blocks]


async def test_64_concurrent_approve_clicks_execute_once(db_kind: str) -> None:
    async with slack_world(db_kind) as (h, emu, app, key):
        aid = await propose(h, key, slack_proposal())
        posted = (await until(lambda: [m for m in emu.messages if m.method == "chat.postMessage"]))[0]
        answers = await asyncio.gather(*(click(h, emu, posted) for _ in range(64)))
        assert {r.status_code for r in answers} == {200}
        done = (await h.client.get(f"/v1/approvals/{aid}?wait=10", headers=h.auth(key))).json()
        assert done["outcome"]["type"] == "succeeded"
        await until(lambda: (m := emu.latest(posted.channel, posted.ts)) and m.method == "chat.update")
        assert app.shop.calls["execute"] == 1 and app.shop.refunds == 1
        trail = (await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).json()["events"]
        kinds = [e["event"] for e in trail]
        assert kinds.count("approved") == 1 and kinds.count("claimed") == 1
        assert kinds.count("execute_sent") == 1 and kinds.count("decision_refused") == 63


async def test_revalidation_failure_is_shown_on_the_card_and_to_the_agent() -> None:
    async with slack_world() as (h, emu, app, key):
        aid = await propose(h, key, slack_proposal())
        posted = (await until(lambda: [m for m in emu.messages if m.method == "chat.postMessage"]))[0]
        app.shop.orders["ord_4421"].refunded_cents = 12900  # someone refunded it meanwhile
        await click(h, emu, posted)
        done = (await h.client.get(f"/v1/approvals/{aid}?wait=10", headers=h.auth(key))).json()
        assert done["status"] == "approved"
        assert done["outcome"] == {
            "type": "revision_required",
            "reason": "order ord_4421 changed since it was approved; nothing was refunded",
        }
        updated = await until(
            lambda: (m := emu.latest(posted.channel, posted.ts)) and m.method == "chat.update" and m
        )
        assert "Revision required: order ord_4421 changed" in json.dumps(updated.blocks)
        assert app.shop.refunds == 0


@asynccontextmanager
async def sms_world(app: Any) -> AsyncIterator[tuple[Harness, TwilioEmulator, TwilioCaller, str]]:
    """Cosigner texting through the emulated Twilio, the contract application at `app`."""
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        config = SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC)
        surfaces = [lambda desk: SmsAdapter(config, desk, desk.sms_store)]
        policy = policy_for(app.url, extra=TENANT)
        async with cosigner_app(policy, surfaces=surfaces, callback_allow="127.0.0.1") as h:
            phone = TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)
            yield h, emu, phone, await h.create_tenant("acme")


async def test_the_text_shows_the_preview_and_the_outcome() -> None:
    with contract_application() as app:
        async with sms_world(app) as (h, emu, phone, key):
            body = {**slack_proposal(), "surface": {"type": "sms", "phone": ALICE}}
            aid = await propose(h, key, body)
            text = (await until(lambda: emu.sent))[0].body
            assert "approve Refund the missing discount on ord_4421?" in text
            assert "Amount: $129.00" in text and "Agent says (unverified)" in text
            assert text.index("$129.00") < text.index("99999")
            assert (await phone.text(ALICE, BOT, "YES")).status_code == 200
            done = (await h.client.get(f"/v1/approvals/{aid}?wait=10", headers=h.auth(key))).json()
            assert done["outcome"]["type"] == "succeeded"
            told = await until(lambda: len(emu.sent) == 2 and emu.sent[1].body)
            assert told.endswith(": Refunded $129.00")


async def test_the_text_tells_the_final_outcome_after_reconciliation() -> None:
    with contract_application() as app:
        app.shop.reconcile = 1  # needs_reconciliation first, then in_progress once, then succeeded
        async with sms_world(app) as (h, emu, phone, key):
            body = {**slack_proposal(), "surface": {"type": "sms", "phone": ALICE}}
            aid = await propose(h, key, body)
            await until(lambda: emu.sent)
            assert (await phone.text(ALICE, BOT, "YES")).status_code == 200
            interim = await until(lambda: len(emu.sent) >= 2 and emu.sent[1].body)
            assert "pending at the bank" in interim
            await h.advance_until(lambda: len(emu.sent) >= 3, step=2.0)
            final = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
            assert final["outcome"]["type"] == "succeeded"
            assert emu.sent[2].body.endswith(": Refunded $129.00"), emu.sent[2].body
            assert len(emu.sent) == 3, "each outcome is texted once"
