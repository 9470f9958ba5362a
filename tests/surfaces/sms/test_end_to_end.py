"""The SMS surface inside a real Cosigner app: engine, database, job worker, emulator."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from storage import ledger
from surfaces.sms import SmsAdapter, SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator
from tests.databases import DESK, TEXT_STATE, postgres_elsewhere
from tests.harness import BASE_URL, Harness, cosigner_app, until

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, TEXT_STATE)

ACCOUNT = "AC" + "e" * 32
TOKEN = "e2e-auth-token"
PUBLIC = "https://cosigner.example.com"  # what Twilio calls; the app is served elsewhere
BOT = "+15550000001"
ALICE = "+15550000002"
MALLORY = "+15550000666"

POLICY = f"""
[defaults]
timeout = "5m"
sms_timeout = "1h"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
redact = ["cardToken"]

[tenants.acme]
sms_from = "{BOT}"
"""


@asynccontextmanager
async def sms_app(db_kind: str) -> AsyncIterator[tuple[Harness, TwilioEmulator, TwilioCaller]]:
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        config = SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC)
        surfaces = [lambda desk: SmsAdapter(config, desk, desk.sms_store)]
        async with cosigner_app(POLICY, surfaces=surfaces, database_kind=db_kind) as h:
            phone = TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)
            yield h, emu, phone


async def request(h: Harness, key: str, call: str, amount: int = 12900) -> dict[str, Any]:
    response = await h.client.post(
        "/v1/approvals",
        headers=h.auth(key),
        json={
            "executionId": f"run_{call}",  # one run each: identical pending calls of one run coalesce
            "toolCallId": call,
            "toolName": "issue_refund",
            "parameters": {"orderId": "ord_4421", "amountCents": amount, "cardToken": "tok_x"},
            "reason": "Customer says the discount was not applied",
            "surface": {"type": "sms", "phone": ALICE},
        },
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def decision(h: Harness, key: str, approval_id: str) -> dict[str, Any]:
    response = await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))
    body: dict[str, Any] = response.json()
    return body


async def test_yes_approves_and_everyone_is_told(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        start = await request(h, key, "c1")
        await h.delivered(start["approvalId"], every_message=True)
        text = emu.sent[0]
        assert (text.to, text.from_) == (ALICE, BOT)
        assert "tok_x" not in text.body and "cardToken=[REDACTED]" in text.body
        assert f"request {start['shortCode']}: approve issue_refund?" in text.body
        assert text.body.endswith("Reply YES or NO.")

        response = await phone.text(ALICE, BOT, " yes ")
        assert response.status_code == 200 and "<Message>" not in response.text
        decided = await decision(h, key, start["approvalId"])
        assert decided["status"] == "approved"
        assert decided["decidedBy"]["kind"] == "person"
        assert decided["decidedBy"]["surface"] == "sms"
        assert decided["decidedBy"]["userId"] == ALICE
        await until(lambda: len(emu.sent) == 2)
        assert emu.sent[1].body == f"Approved issue_refund ({start['shortCode']})."


async def test_stranger_and_forger_decide_nothing(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, _, phone):
        key = await h.create_tenant("acme")
        start = await request(h, key, "c1")
        await h.delivered(start["approvalId"], every_message=True)
        stranger = await phone.text(MALLORY, BOT, "YES")
        assert "Reply YES or NO" in stranger.text
        forged = await phone.text(ALICE, BOT, "YES", token="guessed")
        assert forged.status_code == 403
        proxied = await phone.text(ALICE, BOT, "YES", signed_url="http://cosigner.test/sms/inbound")
        assert proxied.status_code == 403
        current = await h.client.get(f"/v1/approvals/{start['approvalId']}", headers=h.auth(key))
        assert current.json()["status"] == "pending"


async def test_two_pending_need_the_code(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        first = await request(h, key, "c1")
        await h.delivered(first["approvalId"], every_message=True)
        second = await request(h, key, "c2")
        await h.delivered(second["approvalId"], every_message=True)
        code = second["shortCode"]
        assert f"Reply YES {code} or NO {code}" in emu.sent[1].body

        ambiguous = await phone.text(ALICE, BOT, "NO")
        assert first["shortCode"] in ambiguous.text and code in ambiguous.text
        answered = await phone.text(ALICE, BOT, f"NO {code}")
        assert answered.status_code == 200 and "<Message>" not in answered.text, answered.text
        assert (await decision(h, key, second["approvalId"]))["status"] == "denied"
        current = await h.client.get(f"/v1/approvals/{first['approvalId']}", headers=h.auth(key))
        assert current.json()["status"] == "pending"


async def test_stop_fails_the_request_closed(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        start = await request(h, key, "c1")
        await h.delivered(start["approvalId"], every_message=True)
        stop = await phone.text(ALICE, BOT, "STOP")
        assert stop.text.endswith("<Response />")
        decided = await decision(h, key, start["approvalId"])
        assert decided["status"] == "denied"
        assert decided["decidedBy"] == {"kind": "system", "code": "SURFACE_UNAVAILABLE"}
        late = await phone.text(ALICE, BOT, "YES")  # also Twilio's opt-in word
        assert f"Request {start['shortCode']} is already denied" in late.text
        # The next request is texted again: YES re-subscribed the number.
        await request(h, key, "c2")
        await until(lambda: len(emu.texts_to(ALICE)) == 2)


async def test_undelivered_status_fails_closed_and_is_audited(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        start = await request(h, key, "c1")
        await h.delivered(start["approvalId"], every_message=True)
        sid = emu.sent[0].sid
        assert (await phone.status(sid, "sent", to=ALICE)).status_code == 204
        response = await phone.status(sid, "undelivered", to=ALICE, error_code="30006")
        assert response.status_code == 204
        decided = await decision(h, key, start["approvalId"])
        assert decided["status"] == "denied"
        audit = await h.client.get(f"/v1/approvals/{start['approvalId']}/audit", headers=h.auth(key))
        assert audit.status_code == 200
        assert "sms_status" in audit.text and "30006" in audit.text


async def test_opted_out_number_fails_closed_on_delivery(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, _):
        key = await h.create_tenant("acme")
        emu.opt_out(ALICE)
        start = await request(h, key, "c1")
        decided = await decision(h, key, start["approvalId"])
        assert decided["status"] == "denied"
        assert decided["decidedBy"] == {"kind": "system", "code": "SURFACE_UNAVAILABLE"}
        assert isinstance(h.client, httpx.AsyncClient)


async def test_a_retry_after_a_failed_answer_still_decides(
    db_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with sms_app(db_kind) as (h, _, phone):
        key = await h.create_tenant("acme")
        start = await request(h, key, "c1")
        await h.delivered(start["approvalId"], every_message=True)
        real_append = ledger.append
        failures: list[str] = []

        def append_failing_once(conn: Any, rec: Any, *args: Any, **kwargs: Any) -> Any:
            # The database fails after the message id was written in the same transaction.
            if kwargs.get("only_pending") and not failures:
                failures.append(rec.id)
                raise sa.exc.OperationalError("UPDATE approvals", {}, Exception("connection lost"))
            return real_append(conn, rec, *args, **kwargs)

        monkeypatch.setattr(ledger, "append", append_failing_once)
        sid = "SM" + "7" * 32
        # What Twilio sees: the 500 the app answers, not the exception a test client raises.
        served = httpx.ASGITransport(app=h.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=served, base_url=BASE_URL) as twilio:
            caller = TwilioCaller(twilio, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)
            failed = await caller.text(ALICE, BOT, "YES", message_sid=sid)
        assert failed.status_code == 500 and failures == [start["approvalId"]]
        current = await h.client.get(f"/v1/approvals/{start['approvalId']}", headers=h.auth(key))
        assert current.json()["status"] == "pending"

        retried = await phone.text(ALICE, BOT, "YES", message_sid=sid)  # Twilio's retry
        assert retried.status_code == 200 and "<Message>" not in retried.text
        decided = await decision(h, key, start["approvalId"])
        assert decided["status"] == "approved" and decided["decidedBy"]["userId"] == ALICE
        again = await phone.text(ALICE, BOT, "YES", message_sid=sid)  # a copy of a handled one
        assert again.status_code == 200 and "<Message>" not in again.text
        audit = await h.client.get(f"/v1/approvals/{start['approvalId']}/audit", headers=h.auth(key))
        assert "decision_refused" not in audit.text


async def test_a_reply_before_the_receipt_is_stored_is_matched(
    db_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        first = await request(h, key, "c1")
        await h.delivered(first["approvalId"], every_message=True)
        # Hold the second receipt back: the text is out, the engine has not stored it yet.
        release, store_receipt = asyncio.Event(), h.engine.delivered

        async def delivered_later(approval_id: str, receipt: Any) -> None:
            await release.wait()
            await store_receipt(approval_id, receipt)

        monkeypatch.setattr(h.engine, "delivered", delivered_later)
        second = await request(h, key, "c2")
        code = second["shortCode"]
        await until(lambda: len(emu.sent) == 2)
        assert f"Reply YES {code} or NO {code}" in emu.sent[1].body

        answered = await phone.text(ALICE, BOT, f"YES {code}")
        assert answered.status_code == 200 and "<Message>" not in answered.text, answered.text
        assert (await decision(h, key, second["approvalId"]))["status"] == "approved"
        current = await h.client.get(f"/v1/approvals/{first['approvalId']}", headers=h.auth(key))
        assert current.json()["status"] == "pending"
        release.set()
        await until(lambda: len(emu.texts_to(ALICE)) == 3)
        assert emu.sent[2].body == f"Approved issue_refund ({code})."


async def test_sms_cannot_edit_the_approver_answers_the_call_as_sent(db_kind: str) -> None:
    policy = POLICY.replace('redact = ["cardToken"]', 'redact = ["cardToken"]\neditable = ["amountCents"]')
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        config = SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC)
        surfaces = [lambda desk: SmsAdapter(config, desk, desk.sms_store)]
        async with cosigner_app(policy, surfaces=surfaces, database_kind=db_kind) as h:
            phone = TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)
            key = await h.create_tenant("acme")
            response = await h.client.post(
                "/v1/approvals",
                headers=h.auth(key),
                json={
                    "executionId": "run_1",
                    "toolCallId": "c1",
                    "toolName": "issue_refund",
                    "parameters": {"orderId": "ord_4421", "amountCents": 12900, "cardToken": "tok_x"},
                    "surface": {"type": "sms", "phone": ALICE},
                    "acceptsEdits": True,
                },
            )
            start = response.json()
            assert response.status_code == 201 and "editable" not in start  # exact keywords only
            await h.delivered(start["approvalId"], every_message=True)
            await phone.text(ALICE, BOT, "YES")
            decided = await decision(h, key, start["approvalId"])
    assert decided["status"] == "approved" and "edited" not in decided
    assert decided["parametersDigest"] == start["parametersDigest"]
