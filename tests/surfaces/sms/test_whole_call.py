"""A YES approves only a call the texts showed whole, and only the request it was meant for.

Through the real app: engine, database, job worker, the Twilio emulator, and really signed
inbound texts. A call too long for the request text and every MORE part together cannot be
approved by text (the text says so, YES is refused with the reason, NO still denies). A bare
YES is refused when another request was texted to the same number lately, or since the text
it could be answering: the agent could have cancelled one request and asked another.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import httpx

from surfaces.sms import SmsAdapter, SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator
from surfaces.sms.fit import BUDGET, sms_length
from tests.databases import DESK, TEXT_STATE, postgres_elsewhere
from tests.harness import Harness, cosigner_app, until
from tests.surfaces.sms.test_end_to_end import ACCOUNT, ALICE, BOT, POLICY, PUBLIC, TOKEN

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, TEXT_STATE)

INBOX = f"{PUBLIC}/inbox/"
# 300 parameters of 20 characters, and where the money goes: far more than 15 texts hold.
LONG_CALL: dict[str, Any] = {f"p{i:03d}": f"{i:020d}" for i in range(300)}
LONG_CALL["to"] = "payouts@attacker.example"


@asynccontextmanager
async def sms_app(db_kind: str) -> AsyncIterator[tuple[Harness, TwilioEmulator, TwilioCaller]]:
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        config = SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC, inbox_url=INBOX)
        surfaces = [lambda desk: SmsAdapter(config, desk, desk.sms_store)]
        async with cosigner_app(POLICY, surfaces=surfaces, database_kind=db_kind) as h:
            phone = TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)
            yield h, emu, phone


async def ask(h: Harness, key: str, call: str, parameters: dict[str, Any]) -> dict[str, Any]:
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
    await h.delivered(body["approvalId"], every_message=True)
    return body


async def current(h: Harness, key: str, approval_id: str) -> dict[str, Any]:
    body: dict[str, Any] = (await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))).json()
    return body


async def decided(h: Harness, key: str, approval_id: str) -> dict[str, Any]:
    response = await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))
    body: dict[str, Any] = response.json()
    return body


async def refusals(h: Harness, key: str, approval_id: str) -> list[tuple[str, str]]:
    trail = (await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))).json()["events"]
    return [(e["actor"]["userId"], e["data"]["code"]) for e in trail if e["event"] == "decision_refused"]


def messages(response: httpx.Response) -> list[str]:
    """The texts a TwiML answer sends back, in order."""
    return [m.text or "" for m in ET.fromstring(response.text).iter("Message")]


# --- a call the texts cannot show whole ---------------------------------------------------


async def test_a_call_too_long_to_text_whole_is_not_approved_by_yes_and_no_still_denies(
    db_kind: str,
) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        start = await ask(h, key, "c1", LONG_CALL)
        aid, code = start["approvalId"], start["shortCode"]
        text = emu.sent[0].body
        # The text says it cannot be approved here, where to read it, and offers NO only.
        assert f"Too long to text whole, so YES cannot approve it. Read it whole at {INBOX}" in text, text
        assert text.endswith("Reply NO to deny.") and "YES or NO" not in text, text
        assert sms_length(text) <= BUDGET

        # MORE still texts what fits, and says that the rest is not texted.
        parts = messages(await phone.text(ALICE, BOT, "MORE"))
        assert len(parts) == 15 and "chars not texted: too long for SMS" in parts[-1]
        assert "payouts@attacker.example" not in "".join(parts)

        reply = messages(await phone.text(ALICE, BOT, "YES"))
        assert reply == [
            f"Not accepted: request {code} is too long to show whole by text, so YES cannot approve "
            f"it. Read it whole at {INBOX} . Reply NO {code} to deny it. Nothing was decided."
        ]
        assert (await current(h, key, aid))["status"] == "pending"
        assert await refusals(h, key, aid) == [(ALICE, "APPROVAL_MODE_UNSUPPORTED")]

        assert messages(await phone.text(ALICE, BOT, "NO")) == []
        closed = await decided(h, key, aid)
        assert closed["status"] == "denied" and closed["decidedBy"]["userId"] == ALICE
        assert closed["grant"] is None
        told = await until(lambda: emu.texts_to(ALICE)[1:])
        assert told[-1].body.startswith(f"Denied issue_refund ({code}).")


async def test_a_long_call_that_the_texts_show_whole_is_still_approved_by_yes(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        # About 3,600 characters: cut in the request text, whole across the MORE parts.
        call = {f"p{i:03d}": f"{i:020d}" for i in range(120)}
        call["to"] = "payouts@example.com"
        start = await ask(h, key, "c1", call)
        text = emu.sent[0].body
        assert "reply MORE for the whole call." in text and text.endswith("Reply YES or NO."), text
        whole = "".join(p.split("): ", 1)[1] for p in messages(await phone.text(ALICE, BOT, "MORE")))
        assert "not texted" not in whole and "to=payouts@example.com" in whole

        assert messages(await phone.text(ALICE, BOT, "YES")) == []
        closed = await decided(h, key, start["approvalId"])
        assert closed["status"] == "approved" and closed["grant"]


# --- a bare YES and the request it was meant for -------------------------------------------


async def cancel(h: Harness, key: str, approval_id: str) -> None:
    response = await h.client.post(f"/v1/approvals/{approval_id}/cancel", headers=h.auth(key))
    assert response.status_code == 200, response.text


async def test_a_bare_yes_after_the_agent_cancels_one_request_and_asks_another_is_refused(
    db_kind: str,
) -> None:
    async with sms_app(db_kind) as (h, _, phone):
        key = await h.create_tenant("acme")
        first = await ask(h, key, "c1", {"orderId": "ord_1", "amountCents": 500})
        await cancel(h, key, first["approvalId"])
        second = await ask(h, key, "c2", {"orderId": "ord_2", "amountCents": 90000})
        code = second["shortCode"]

        # Meant for the first text, it would approve the second: the code is asked for.
        reply = messages(await phone.text(ALICE, BOT, "YES"))
        assert reply == [
            "Not accepted: another request was texted to you lately, so a bare YES could be meant "
            f"for it. To answer issue_refund ({code}), reply YES {code} (or NO {code}). Nothing was decided."
        ]
        assert (await current(h, key, second["approvalId"]))["status"] == "pending"

        assert messages(await phone.text(ALICE, BOT, f"YES {code}")) == []
        closed = await decided(h, key, second["approvalId"])
        assert closed["status"] == "approved" and closed["grant"]
        assert closed["decidedBy"]["userId"] == ALICE


async def test_a_bare_yes_counts_two_minutes_after_another_text_and_a_bare_no_always(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, _, phone):
        key = await h.create_tenant("acme")
        first = await ask(h, key, "c1", {"orderId": "ord_1"})
        await cancel(h, key, first["approvalId"])
        second = await ask(h, key, "c2", {"orderId": "ord_2"})
        # NO cannot run anything: it still denies at once.
        assert messages(await phone.text(ALICE, BOT, "NO")) == []
        assert (await decided(h, key, second["approvalId"]))["status"] == "denied"

        h.advance(5)
        third = await ask(h, key, "c3", {"orderId": "ord_3"})
        h.advance(116)  # the other requests' texts are now more than two minutes old
        assert messages(await phone.text(ALICE, BOT, "YES")) == []
        assert (await decided(h, key, third["approvalId"]))["status"] == "approved"


async def test_a_bare_yes_is_refused_when_another_request_was_texted_after_this_one(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, _, phone):
        key = await h.create_tenant("acme")
        kept = await ask(h, key, "c1", {"orderId": "ord_1"})
        later = await ask(h, key, "c2", {"orderId": "ord_2"})
        await cancel(h, key, later["approvalId"])
        h.advance(600)  # long after, the newest text this number got is still the other one's
        reply = messages(await phone.text(ALICE, BOT, "YES"))
        assert len(reply) == 1 and f"reply YES {kept['shortCode']}" in reply[0], reply
        assert (await current(h, key, kept["approvalId"]))["status"] == "pending"

        # MORE texts this request again: a YES after it answers it.
        await phone.text(ALICE, BOT, "MORE")
        assert messages(await phone.text(ALICE, BOT, "YES")) == []
        assert (await decided(h, key, kept["approvalId"]))["status"] == "approved"


def test_the_texts_name_the_inbox_only_when_it_is_on() -> None:
    from bot.http.app import default_surfaces
    from tests.harness import make_settings

    twilio = {"twilio_account_sid": ACCOUNT, "twilio_auth_token": TOKEN, "public_url": PUBLIC + "/"}
    oidc = {"oidc_issuer": "https://id.example.com", "oidc_client_id": "c", "oidc_client_secret": "s"}
    for settings, inbox in ((twilio, None), ({**twilio, **oidc}, INBOX)):
        (factory,) = default_surfaces(make_settings(**settings), None)
        # Neither the desk nor the SMS store it carries is used here.
        adapter = factory(SimpleNamespace(sms_store=None))  # type: ignore[arg-type]
        assert isinstance(adapter, SmsAdapter) and adapter.config.inbox_url == inbox
