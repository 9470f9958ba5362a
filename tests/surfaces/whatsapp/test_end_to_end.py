"""The WhatsApp surface inside a real Cosigner app: engine, database, job worker, the Twilio
emulator sending Content API templates, and really signed taps and typed answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from surfaces.sms import SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import SentText, TwilioEmulator
from surfaces.whatsapp import WhatsAppAdapter, WhatsAppConfig, WhatsAppConfigError
from surfaces.whatsapp.template import TEMPLATE_ACTIONS, TEMPLATE_BODY, parse_tap
from tests.databases import DESK, TEXT_STATE, postgres_elsewhere
from tests.harness import Harness, cosigner_app, until

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, TEXT_STATE)

ACCOUNT = "AC" + "f" * 32
TOKEN = "whatsapp-auth-token"
PUBLIC = "https://cosigner.example.com"
BOT = "+15550000001"
ALICE = "+15550000002"
MALLORY = "+15550000666"
WA_BOT, WA_ALICE, WA_MALLORY = (f"whatsapp:{n}" for n in (BOT, ALICE, MALLORY))

POLICY = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
redact = ["cardToken"]

[tenants.acme]
"""

World = tuple[Harness, TwilioEmulator, TwilioCaller, str]


@asynccontextmanager
async def whatsapp_app(db_kind: str, policy: str = POLICY) -> AsyncIterator[World]:
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        content_sid = emu.add_template(TEMPLATE_BODY, TEMPLATE_ACTIONS)
        config = WhatsAppConfig(SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC), BOT, content_sid)
        surfaces = [lambda desk: WhatsAppAdapter(config, desk, desk.sms_store)]
        async with cosigner_app(
            policy, surfaces=surfaces, database_kind=db_kind, twilio_whatsapp_from=BOT
        ) as h:
            phone = TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)
            yield h, emu, phone, await h.create_tenant("acme")


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[World]:
    async with whatsapp_app(db_kind) as w:
        yield w


async def request(h: Harness, key: str, call: str = "c1", **body: Any) -> str:
    response = await h.client.post(
        "/v1/approvals",
        headers=h.auth(key),
        json={
            "executionId": f"run_{call}",  # one run each: identical pending calls of one run coalesce
            "toolCallId": call,
            "toolName": "issue_refund",
            "parameters": {"orderId": "ord_4421", "amountCents": 12900, "cardToken": "tok_x"},
            "surface": {"type": "whatsapp", "phone": ALICE},
            **body,
        },
    )
    assert response.status_code == 201, response.text
    approval_id = str(response.json()["approvalId"])
    await h.delivered(approval_id, every_message=True)
    return approval_id


async def status(h: Harness, key: str, approval_id: str) -> dict[str, Any]:
    body: dict[str, Any] = (await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))).json()
    return body


def button(text: SentText, title: str) -> str:
    return next(payload for t, payload in text.buttons if t == title)


async def test_a_verified_tap_approves_and_the_approver_is_told(world: World) -> None:
    h, emu, phone, key = world
    approval_id = await request(h, key)
    (sent,) = emu.sent
    assert (sent.to, sent.from_, sent.content_sid is not None) == (WA_ALICE, WA_BOT, True)
    # The template carries the SMS text: the tool, the redacted parameters, the answers.
    assert "approve issue_refund?" in sent.body and "cardToken=[REDACTED]" in sent.body
    # How to answer is said once: the SMS text says YES or NO, the template only the buttons.
    assert sent.body.count("YES") == 1 and sent.body.endswith("Or tap a button below.")
    assert "tok_x" not in json.dumps(sent.content_variables)
    assert [t for t, _ in sent.buttons] == ["Approve", "Deny"]
    response = await phone.tap(
        WA_ALICE, WA_BOT, title="Approve", payload=button(sent, "Approve"), replied_to=sent.sid
    )
    assert response.status_code == 200 and "<Message>" not in response.text
    decided = await status(h, key, approval_id)
    assert decided["status"] == "approved"
    assert decided["decidedBy"] == {"kind": "person", "surface": "whatsapp", "userId": WA_ALICE}
    told = await until(lambda: emu.sent[1:])
    assert told[0].to == WA_ALICE and told[0].body.startswith("Approved issue_refund")


async def test_a_deny_tap_denies(world: World) -> None:
    h, emu, phone, key = world
    approval_id = await request(h, key)
    sent = emu.sent[0]
    await phone.tap(WA_ALICE, WA_BOT, title="Deny", payload=button(sent, "Deny"), replied_to=sent.sid)
    assert (await status(h, key, approval_id))["status"] == "denied"


async def test_a_forged_signature_decides_nothing(world: World) -> None:
    h, emu, phone, key = world
    approval_id = await request(h, key)
    sent = emu.sent[0]
    forged = await phone.tap(
        WA_ALICE,
        WA_BOT,
        title="Approve",
        payload=button(sent, "Approve"),
        replied_to=sent.sid,
        signature="AAAA",
    )
    assert forged.status_code == 403
    assert (await status(h, key, approval_id))["status"] == "pending"


async def refusals(h: Harness, key: str, approval_id: str) -> list[tuple[str, str, str]]:
    """The refused answers on the approval's audit record: (code, who, surface)."""
    trail = await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))
    assert trail.status_code == 200, trail.text
    return [
        (e["data"]["code"], e["actor"].get("userId", ""), e["actor"].get("surface", ""))
        for e in trail.json()["events"]
        if e["event"] == "decision_refused"
    ]


async def test_a_forwarded_tap_from_another_number_decides_nothing(world: World) -> None:
    h, emu, phone, key = world
    approval_id = await request(h, key)
    sent = emu.sent[0]
    response = await phone.tap(
        WA_MALLORY, WA_BOT, title="Approve", payload=button(sent, "Approve"), replied_to=sent.sid
    )
    assert "decides nothing" in response.text
    assert (await status(h, key, approval_id))["status"] == "pending"
    assert await refusals(h, key, approval_id) == [("NOT_AN_APPROVER", WA_MALLORY, "whatsapp")]


async def test_a_tap_sent_to_another_sender_number_decides_nothing(world: World) -> None:
    h, emu, phone, key = world
    approval_id = await request(h, key)
    sent = emu.sent[0]
    response = await phone.tap(
        WA_ALICE,
        "whatsapp:+15550000999",
        title="Approve",
        payload=button(sent, "Approve"),
        replied_to=sent.sid,
    )
    assert "decides nothing" in response.text
    assert (await status(h, key, approval_id))["status"] == "pending"
    assert await refusals(h, key, approval_id) == [("WRONG_TENANT", WA_ALICE, "whatsapp")]


async def test_a_made_up_nonce_or_another_requests_button_decides_nothing(world: World) -> None:
    h, emu, phone, key = world
    first = await request(h, key, "c1")
    second = await request(h, key, "c2")
    one, two = emu.sent
    tap = parse_tap(button(one, "Approve"))
    assert tap is not None
    guessed = f"cosigner:approve:{first}:{'A' * 22}"
    r1 = await phone.tap(WA_ALICE, WA_BOT, title="Approve", payload=guessed, replied_to=one.sid)
    # The first request's nonce on the second request's id: bound to the approval, it fails.
    swapped = f"cosigner:approve:{second}:{tap.nonce}"
    r2 = await phone.tap(WA_ALICE, WA_BOT, title="Approve", payload=swapped, replied_to=two.sid)
    assert "decides nothing" in r1.text and "decides nothing" in r2.text
    assert (await status(h, key, first))["status"] == "pending"
    assert (await status(h, key, second))["status"] == "pending"
    assert await refusals(h, key, first) == [("WRONG_CONVERSATION", WA_ALICE, "whatsapp")]
    assert await refusals(h, key, second) == [("WRONG_CONVERSATION", WA_ALICE, "whatsapp")]


async def test_a_tap_on_another_message_decides_nothing(world: World) -> None:
    h, emu, phone, key = world
    approval_id = await request(h, key)
    sent = emu.sent[0]
    response = await phone.tap(
        WA_ALICE, WA_BOT, title="Approve", payload=button(sent, "Approve"), replied_to="SM" + "0" * 32
    )
    assert "decides nothing" in response.text
    assert (await status(h, key, approval_id))["status"] == "pending"
    [(code, who, _)] = await refusals(h, key, approval_id)
    assert (code, who) == ("WRONG_CONVERSATION", WA_ALICE)
    trail = (await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))).json()
    assert "answers another message" in json.dumps(trail)


async def test_a_replayed_tap_does_not_decide_twice(world: World) -> None:
    h, emu, phone, key = world
    approval_id = await request(h, key)
    sent = emu.sent[0]
    approve = button(sent, "Approve")
    first = await phone.tap(
        WA_ALICE, WA_BOT, title="Approve", payload=approve, replied_to=sent.sid, message_sid="SM" + "1" * 32
    )
    decided = await status(h, key, approval_id)
    # Twilio's retry of the same message, then a second tap on the same button.
    again = await phone.tap(
        WA_ALICE, WA_BOT, title="Approve", payload=approve, replied_to=sent.sid, message_sid="SM" + "1" * 32
    )
    deny_late = await phone.tap(
        WA_ALICE, WA_BOT, title="Deny", payload=button(sent, "Deny"), replied_to=sent.sid
    )
    assert first.status_code == again.status_code == 200
    assert "already approved" in deny_late.text
    assert await status(h, key, approval_id) == decided
    assert await refusals(h, key, approval_id) == [("ALREADY_DECIDED", WA_ALICE, "whatsapp")]


async def test_a_late_tap_is_refused_and_the_approver_is_told_it_expired(world: World) -> None:
    h, emu, phone, key = world
    approval_id = await request(h, key, timeoutSeconds=1)
    sent = emu.sent[0]
    h.advance(1.1)
    await until(lambda: emu.sent[1:])  # the outcome text after expiry
    assert "xpired" in emu.sent[1].body
    late = await phone.tap(
        WA_ALICE, WA_BOT, title="Approve", payload=button(sent, "Approve"), replied_to=sent.sid
    )
    assert "<Message>" in late.text
    assert (await status(h, key, approval_id))["status"] == "expired"


async def test_a_cancel_is_told_to_the_approver(world: World) -> None:
    h, emu, _, key = world
    approval_id = await request(h, key)
    r = await h.client.post(f"/v1/approvals/{approval_id}/cancel", headers=h.auth(key))
    assert r.json()["status"] == "cancelled"
    told = await until(lambda: emu.sent[1:])
    assert told[0].to == WA_ALICE and "ancel" in told[0].body


async def test_typed_yes_approves_as_for_sms(world: World) -> None:
    h, _, phone, key = world
    approval_id = await request(h, key)
    response = await phone.text(WA_ALICE, WA_BOT, " yes ", path="/whatsapp/inbound")
    assert response.status_code == 200
    decided = await status(h, key, approval_id)
    assert decided["status"] == "approved" and decided["decidedBy"]["surface"] == "whatsapp"


async def test_a_refused_template_fails_the_request_closed(world: World) -> None:
    h, emu, _, key = world
    emu.fail_next(400, 63016, "Failed to send freeform message because you are outside the allowed window.")
    response = await h.client.post(
        "/v1/approvals",
        headers=h.auth(key),
        json={
            "executionId": "run_1",
            "toolCallId": "c1",
            "toolName": "issue_refund",
            "parameters": {"orderId": "ord_4421"},
            "surface": {"type": "whatsapp", "phone": ALICE},
        },
    )
    approval_id = response.json()["approvalId"]

    async def closed() -> bool:
        state: str = (await status(h, key, approval_id))["status"]
        return state != "pending"

    from tests.harness import until_async

    await until_async(closed, seconds=10)
    decided = await status(h, key, approval_id)
    assert decided["decidedBy"] == {"kind": "system", "code": "SURFACE_UNAVAILABLE"}


async def test_an_undelivered_status_fails_closed(world: World) -> None:
    h, emu, phone, key = world
    approval_id = await request(h, key)
    sid = emu.sent[0].sid
    response = await phone.status(
        sid, "undelivered", to=WA_ALICE, error_code="63016", path="/whatsapp/status"
    )
    assert response.status_code == 204
    decided = await status(h, key, approval_id)
    assert decided["status"] == "denied"


def test_a_bad_content_sid_is_refused_with_the_variable_named() -> None:
    twilio = SmsConfig(ACCOUNT, TOKEN, None, None, None, PUBLIC)
    with pytest.raises(WhatsAppConfigError, match="TWILIO_WHATSAPP_CONTENT_SID"):
        WhatsAppConfig(twilio, BOT, "MG123")
    with pytest.raises(WhatsAppConfigError, match="TWILIO_WHATSAPP_FROM"):
        WhatsAppConfig(twilio, "whatsapp:" + BOT, "HX" + "0" * 32)


def test_a_whatsapp_requester_is_not_the_same_number_texting_by_sms() -> None:
    from bot.approvals.run_grants import requester_key

    whatsapp = requester_key({"type": "whatsapp", "phone": ALICE})
    assert whatsapp == f"whatsapp:{ALICE}" and whatsapp != requester_key({"type": "sms", "phone": ALICE})


def test_the_sdk_builds_the_whatsapp_surface_and_checks_the_number() -> None:
    from pydantic import ValidationError

    from cosigner import WhatsAppSurface

    assert WhatsAppSurface(phone=ALICE).to_json() == {"type": "whatsapp", "phone": ALICE}
    with pytest.raises(ValidationError):
        WhatsAppSurface(phone=WA_ALICE)  # the number alone; Cosigner adds `whatsapp:`


OWN = "+15550000010"
OWN_SENDER_POLICY = f"""
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]

[tenants.acme]
whatsapp_from = "{OWN}"
admins = {{ whatsapp = ["{ALICE}"] }}

[tenants.acme.headless]
route = "tenant_admins"
"""


async def test_a_tenants_own_sender_messages_its_whatsapp_admins(db_kind: str) -> None:
    async with whatsapp_app(db_kind, OWN_SENDER_POLICY) as (h, emu, phone, key):
        response = await h.client.post(
            "/v1/approvals",
            headers=h.auth(key),
            json={
                "executionId": "run_1",
                "toolCallId": "c1",
                "toolName": "issue_refund",
                "parameters": {"orderId": "ord_4421"},
                "surface": {"type": "api"},
            },
        )
        assert response.status_code == 201, response.text
        approval_id = response.json()["approvalId"]
        await h.delivered(approval_id, every_message=True)
        sent = emu.sent[0]
        assert (sent.from_, sent.to) == (f"whatsapp:{OWN}", WA_ALICE)
        # A tap that reached the operator's sender is not an answer to this message.
        wrong = await phone.tap(
            WA_ALICE, WA_BOT, title="Approve", payload=button(sent, "Approve"), replied_to=sent.sid
        )
        assert "decides nothing" in wrong.text
        assert (await status(h, key, approval_id))["status"] == "pending"
        right = await phone.tap(
            WA_ALICE, f"whatsapp:{OWN}", title="Approve", payload=button(sent, "Approve"), replied_to=sent.sid
        )
        assert right.status_code == 200
        decided = await status(h, key, approval_id)
        assert decided["status"] == "approved" and decided["decidedBy"]["userId"] == WA_ALICE
