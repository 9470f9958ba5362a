"""ALLOW 1H by SMS: Allow for … through really signed Twilio webhooks, inside a real Cosigner app,
with YES's code rule, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from contracts.allowances import choice_named
from contracts.enums import Verdict
from surfaces.sms import SmsAdapter, SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator
from surfaces.sms.reply import Reply, parse_reply
from tests.databases import ALLOWANCES, DESK, postgres_elsewhere
from tests.harness import Harness, cosigner_app, database

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, ALLOWANCES)

ACCOUNT = "AC" + "a" * 32
TOKEN = "allowances-auth-token"
PUBLIC = "https://cosigner.example.com"
BOT = "+15550000001"
ALICE = "+15550000002"
MALLORY = "+15550000666"
POLICY = f"""
[defaults]
timeout = "5m"
sms_timeout = "1h"

[tools.issue_credit]
kind = "write"
confirm = true
allow_for = "1h"
allow_for_match = ["customerId"]
allow_for_at_most = ["amountCents"]

[tenants.acme]
sms_from = "{BOT}"
"""


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, TwilioEmulator, TwilioCaller, str]]:
    async with database(db_kind) as db, TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        config = SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC)
        async with cosigner_app(
            POLICY, db=db, surfaces=[lambda desk: SmsAdapter(config, desk, desk.sms_store)]
        ) as h:
            phone = TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)
            yield h, emu, phone, await h.create_tenant("acme")


def body(n: int, amount: int = 1500, customer: str = "cus_1") -> dict[str, Any]:
    return {
        "executionId": "run_1",
        "toolCallId": f"call_{n}",
        "toolName": "issue_credit",
        "parameters": {"customerId": customer, "amountCents": amount},
        "surface": {"type": "sms", "phone": ALICE},
    }


async def texted(h: Harness, emu: TwilioEmulator, key: str, n: int, **kw: Any) -> dict[str, Any]:
    """Ask, and wait until the request was texted (its receipt stored)."""
    before = len(emu.texts_to(ALICE))
    r = await h.client.post("/v1/approvals", headers=h.auth(key), json=body(n, **kw))
    assert r.status_code == 201, r.text
    got: dict[str, Any] = r.json()
    for _ in range(500):
        placed = await h.desk.placed(got["approvalId"])
        if (
            len(emu.texts_to(ALICE)) > before
            and placed
            and placed.delivered
            and placed.delivered.message_refs
        ):
            return got
        await asyncio.sleep(0.02)
    raise AssertionError("not texted in time")


async def status(h: Harness, key: str, approval_id: str) -> str:
    # No long-poll: its wait runs on the app's clock, which only the test moves.
    r = await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))
    return str(r.json()["status"])


async def allowances(h: Harness) -> list[dict[str, Any]]:
    r = await h.client.get("/v1/allowances", headers=h.auth(h.approver_key("acme")))
    return list(r.json()["allowances"])


def test_allow_is_an_exact_keyword() -> None:
    assert parse_reply(" allow 1h ") == Reply(Verdict.ALLOW_FOR, None, choice_named("1h"))
    assert parse_reply("ALLOW 15M 4821") == Reply(Verdict.ALLOW_FOR, "4821", choice_named("15m"))
    for loose in ("ALLOW", "ALLOW 2H", "allow 1 h", "ALLOW 1H!", "allow for 1h", "ALLOW 1H please"):
        assert parse_reply(loose) is None


async def test_allow_1h_approves_and_lets_later_calls_through(world: Any) -> None:
    h, emu, phone, key = world
    first = await texted(h, emu, key, 1)
    assert "ALLOW 1H also allows calls like it for 1 hour" in emu.texts_to(ALICE)[-1].body
    reply = await phone.text(ALICE, BOT, "allow 1h")
    assert "Allowed for 1 hour" in reply.text
    assert await status(h, key, first["approvalId"]) == "approved"
    (held,) = await allowances(h)
    assert (held["grantedBy"]["surface"], held["grantedBy"]["userId"]) == ("sms", ALICE)
    r = await h.client.post("/v1/approvals", headers=h.auth(key), json=body(2, amount=100))
    assert r.status_code == 200, r.text
    assert r.json()["decidedBy"]["kind"] == "allowance"
    assert r.json()["decidedBy"]["allowanceId"] == held["allowanceId"]
    assert (
        await h.client.post("/v1/approvals", headers=h.auth(key), json=body(3, amount=2000))
    ).status_code == 201


async def test_a_bare_allow_follows_the_code_rule(world: Any) -> None:
    h, emu, phone, key = world
    first = await texted(h, emu, key, 1)
    second = await texted(h, emu, key, 2, customer="cus_2")
    bare = await phone.text(ALICE, BOT, "ALLOW 1H")  # two pending: which one?
    assert "Nothing was decided" in bare.text
    assert await allowances(h) == []
    code = second["shortCode"]
    await phone.text(ALICE, BOT, f"ALLOW 1H {code}")
    assert await status(h, key, second["approvalId"]) == "approved"
    assert await status(h, key, first["approvalId"]) == "pending"
    (held,) = await allowances(h)
    assert held["approvalId"] == second["approvalId"]


async def test_longer_than_the_cap_is_refused(world: Any) -> None:
    h, emu, phone, key = world
    first = await texted(h, emu, key, 1)
    reply = await phone.text(ALICE, BOT, "ALLOW 8H")
    assert "not offered" in reply.text and "1h" in reply.text
    assert await status(h, key, first["approvalId"]) == "pending"
    assert await allowances(h) == []


async def test_from_someone_not_an_approver_is_refused(world: Any) -> None:
    h, emu, phone, key = world
    first = await texted(h, emu, key, 1)
    await phone.text(MALLORY, BOT, f"ALLOW 1H {first['shortCode']}")
    assert await status(h, key, first["approvalId"]) == "pending"
    assert await allowances(h) == []


async def test_replayed_is_refused(world: Any) -> None:
    h, emu, phone, key = world
    first = await texted(h, emu, key, 1)
    await phone.text(ALICE, BOT, "ALLOW 1H", message_sid="SM" + "1" * 32)
    assert await status(h, key, first["approvalId"]) == "approved"
    again = await phone.text(ALICE, BOT, "ALLOW 1H", message_sid="SM" + "1" * 32)  # Twilio's retry
    assert "Allowed for" not in again.text
    later = await phone.text(ALICE, BOT, f"ALLOW 1H {first['shortCode']}")  # a new text, too late
    assert "already approved" in later.text
    assert len(await allowances(h)) == 1
