"""NEVER by SMS: Always deny through really signed Twilio webhooks, inside a real Cosigner app."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from contracts.enums import Verdict
from storage.database import Database
from surfaces.sms import SmsAdapter, SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator
from surfaces.sms.reply import Reply, parse_reply
from tests.databases import DESK, TEXT_STATE, postgres_elsewhere
from tests.harness import Harness, cosigner_app, database

# On PostgreSQL, the storage path of the tests marked runs in the tests these name.
POSTGRES_ELSEWHERE = postgres_elsewhere(DESK, TEXT_STATE)

ACCOUNT = "AC" + "d" * 32
TOKEN = "denials-auth-token"
PUBLIC = "https://cosigner.example.com"
BOT = "+15550000001"
GLOBEX_BOT = "+15550000009"
ALICE = "+15550000002"
BOB = "+15550000003"
MALLORY = "+15550000666"

POLICY = f"""
[defaults]
timeout = "5m"
sms_timeout = "1h"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]

[tenants.acme]
sms_from = "{BOT}"

[tenants.globex]
sms_from = "{GLOBEX_BOT}"
"""


@asynccontextmanager
async def sms_app(db: Database, emu: TwilioEmulator) -> AsyncIterator[tuple[Harness, TwilioCaller]]:
    config = SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC)
    async with cosigner_app(
        POLICY, db=db, surfaces=[lambda desk: SmsAdapter(config, desk, desk.sms_store)]
    ) as h:
        yield h, TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, TwilioEmulator, TwilioCaller]]:
    async with database(db_kind) as db, TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        async with sms_app(db, emu) as (h, phone):
            yield h, emu, phone


async def ask(h: Harness, key: str, call: str, phone: str = ALICE) -> Any:
    return await h.client.post(
        "/v1/approvals",
        headers=h.auth(key),
        json={
            "executionId": f"run_{call}",  # one run each: identical pending calls of one run coalesce
            "toolCallId": call,
            "toolName": "issue_refund",
            "parameters": {"orderId": "ord_4421", "amountCents": 12900},
            "surface": {"type": "sms", "phone": phone},
        },
    )


async def texted(h: Harness, emu: TwilioEmulator, key: str, call: str, phone: str = ALICE) -> dict[str, Any]:
    """Ask, and wait until the request was texted to `phone` (its full receipt is stored)."""
    before = len(emu.texts_to(phone))
    r = await ask(h, key, call, phone)
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    for _ in range(250):
        placed = await h.desk.placed(body["approvalId"])
        if (
            len(emu.texts_to(phone)) > before
            and placed
            and placed.delivered
            and placed.delivered.message_refs
        ):
            return body
        await asyncio.sleep(0.02)
    raise AssertionError("not texted in time")


async def status(h: Harness, key: str, approval_id: str) -> str:
    r = await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))
    return str(r.json()["status"])


def test_never_is_an_exact_keyword() -> None:
    assert parse_reply(" never ") == Reply(Verdict.ALWAYS_DENY)
    assert parse_reply("NEVER 4821") == Reply(Verdict.ALWAYS_DENY, "4821")
    for loose in ("never again", "NEVER!", "nevermind", "N"):
        assert parse_reply(loose) is None


async def test_never_denies_and_refuses_later_requests_without_a_text(world: Any) -> None:
    h, emu, phone = world
    acme, globex = await h.create_tenant("acme"), await h.create_tenant("globex")
    first = await texted(h, emu, acme, "c1")
    reply = await phone.text(ALICE, BOT, "never")
    assert "Always deny set: issue_refund requests you approve are refused" in reply.text
    assert await status(h, acme, first["approvalId"]) == "denied"

    texts = len(emu.sent)
    refused = await ask(h, acme, "c2")
    assert refused.status_code == 403
    denial = refused.json()["error"]["denial"]
    assert denial["approver"] == {"surface": "sms", "userId": ALICE, "teamId": None}
    assert denial["requester"] == f"sms:{ALICE}"
    # Another requester of the same tenant, and the same number in another tenant, are asked.
    await texted(h, emu, acme, "c3", phone=BOB)
    await texted(h, emu, globex, "c4")
    assert [t.to for t in emu.sent[texts:] if "approve issue_refund?" in t.body] == [BOB, ALICE]

    lifted = await h.client.delete(
        f"/v1/denials/{denial['denialId']}", headers=h.auth(h.approver_key("acme"))
    )
    assert lifted.status_code == 200
    await texted(h, emu, acme, "c5")


async def test_never_needs_the_code_when_several_are_pending(world: Any) -> None:
    h, emu, phone = world
    acme = await h.create_tenant("acme")
    first, second = await texted(h, emu, acme, "c1"), await texted(h, emu, acme, "c2")
    ambiguous = await phone.text(ALICE, BOT, "NEVER")
    assert "reply YES, NO or NEVER (always deny) followed by the code" in ambiguous.text
    assert (await h.client.get("/v1/denials", headers=h.auth(h.approver_key("acme")))).json() == {
        "denials": []
    }
    await phone.text(ALICE, BOT, f"NEVER {second['shortCode']}")
    assert await status(h, acme, second["approvalId"]) == "denied"
    pending = await h.client.get(f"/v1/approvals/{first['approvalId']}", headers=h.auth(acme))
    assert pending.json()["status"] == "pending"  # already asked: a standing deny acts on later requests
    assert (
        len((await h.client.get("/v1/denials", headers=h.auth(h.approver_key("acme")))).json()["denials"])
        == 1
    )


async def test_outsiders_and_forgers_set_nothing(world: Any) -> None:
    h, emu, phone = world
    acme = await h.create_tenant("acme")
    first = await texted(h, emu, acme, "c1")
    stranger = await phone.text(MALLORY, BOT, "NEVER")
    assert "or NEVER to deny and always deny this tool for you" in stranger.text
    forged = await phone.text(ALICE, BOT, "NEVER", token="guessed")
    assert forged.status_code == 403
    assert (await h.client.get(f"/v1/approvals/{first['approvalId']}", headers=h.auth(acme))).json()[
        "status"
    ] == "pending"
    assert (await h.client.get("/v1/denials", headers=h.auth(h.approver_key("acme")))).json() == {
        "denials": []
    }


@POSTGRES_ELSEWHERE
async def test_it_survives_a_restart(db_kind: str) -> None:
    async with database(db_kind) as db, TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        async with sms_app(db, emu) as (h, phone):
            acme = await h.create_tenant("acme")
            await texted(h, emu, acme, "c1")
            await phone.text(ALICE, BOT, "NEVER")
        async with sms_app(db, emu) as (fresh, _):
            refused = await ask(fresh, acme, "c2")
            assert refused.status_code == 403
            assert refused.json()["error"]["denial"]["approver"]["userId"] == ALICE
            assert len([t for t in emu.sent if "approve issue_refund?" in t.body]) == 1
