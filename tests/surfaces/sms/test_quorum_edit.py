"""A quorum whose request reaches people by text too (escalated to staff by SMS) and whose
call an approver edited: a YES to a text that showed the call before the edit is refused
with a reply saying why, and a text sent after the edit shows the edited call and its YES
counts. Through the Twilio emulator and really signed texts; time moves by the app's clock."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from cosigner.digest import parameters_digest
from surfaces.sms import SmsAdapter, SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator
from tests.databases import DESK, TEXT_STATE, postgres_elsewhere
from tests.harness import Harness, cosigner_app, until

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, TEXT_STATE)

ACCOUNT = "AC" + "e" * 32
TOKEN = "quorum-edit-auth-token"
PUBLIC = "https://cosigner.example.com"
BOT = "+15550000001"
STAFF = "+15550000007"
MINUTE = 60.0
POLICY = f"""
[defaults]
timeout = "5m"
sms_timeout = "1h"

[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
editable = ["amountCents"]
timeout = "1h"
escalate = [{{ after = "20m", to = "staff" }}]

[staff]
sms = ["{STAFF}"]

[tenants.acme]
sms_from = "{BOT}"
admins = {{ dashboard = ["u_ann", "u_bob"] }}
"""
CALL = {"orderId": "ord_1", "amountCents": 40000}
EDITED = {**CALL, "amountCents": 4000}


@asynccontextmanager
async def sms_app(db_kind: str) -> AsyncIterator[tuple[Harness, TwilioEmulator, TwilioCaller]]:
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        config = SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC)
        surfaces = [lambda desk: SmsAdapter(config, desk, desk.sms_store)]
        async with cosigner_app(POLICY, surfaces=surfaces, database_kind=db_kind) as h:
            yield h, emu, TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)


async def ask(h: Harness, key: str) -> str:
    body = {
        "executionId": "run_1",
        "toolCallId": "c1",
        "toolName": "issue_refund",
        "parameters": CALL,
        "surface": {"type": "dashboard", "userId": "u_req"},
        "acceptsEdits": True,
    }
    r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


async def edit_on_dashboard(h: Harness, key: str, aid: str) -> None:
    r = await h.client.post(
        f"/v1/approvals/{aid}/decision",
        headers=h.auth(h.approver_of(key)),
        json={
            "decision": "approve",
            "userId": "u_ann",
            "edit": {"amountCents": 4000},
            "parametersDigest": parameters_digest(CALL),
        },
    )
    assert r.status_code == 200, r.text


async def body_of(h: Harness, key: str, aid: str) -> dict[str, Any]:
    found: dict[str, Any] = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
    return found


async def test_a_yes_to_a_text_sent_before_the_edit_is_refused_and_said_why(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        aid = await ask(h, key)
        h.advance(20 * MINUTE)
        (texted,) = await until(lambda: emu.texts_to(STAFF))
        assert "amountCents=40000" in texted.body and "2 approvers must say YES" in texted.body

        # The edit queues a retext of the edited call, and a YES after that text is a YES to
        # the edited call. Its first send fails (retried only once the stepped clock moves),
        # so the YES below answers the text sent before the edit, whatever the worker's pace.
        emu.fail_next(500)
        await edit_on_dashboard(h, key, aid)
        reply = await phone.text(STAFF, BOT, "YES")
        assert reply.status_code == 200
        assert "was edited by an approver after it was texted to you" in reply.text, reply.text
        assert emu.texts_to(STAFF) == [texted], "the edited call was not texted yet"
        body = await body_of(h, key, aid)
        assert body["status"] == "pending" and [a["by"] for a in body["approvals"]] == ["u_ann"]
        trail = (await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).json()["events"]
        refused = [e for e in trail if e["event"] == "decision_refused"]
        who = [(e["actor"]["userId"], e["data"]["code"]) for e in refused]
        assert who == [(STAFF, "PARAMETERS_MISMATCH")]


async def test_a_text_sent_after_the_edit_shows_the_edited_call_and_its_yes_counts(db_kind: str) -> None:
    async with sms_app(db_kind) as (h, emu, phone):
        key = await h.create_tenant("acme")
        aid = await ask(h, key)
        await edit_on_dashboard(h, key, aid)
        h.advance(20 * MINUTE)
        (texted,) = await until(lambda: emu.texts_to(STAFF))
        assert "edited by an approver" in texted.body and "amountCents=4000," in texted.body, texted.body
        # The agent's value appears only as what the edit changed, never as the call asked.
        assert "Params: amountCents=4000," in texted.body, texted.body
        assert "\nChanged: amountCents 40000->4000.\n" in texted.body, texted.body

        answered = await phone.text(STAFF, BOT, "YES")
        assert answered.status_code == 200 and "Not accepted" not in answered.text, answered.text
        body = (await h.client.get(f"/v1/approvals/{aid}?wait=5", headers=h.auth(key))).json()
        assert body["status"] == "approved" and body["parameters"] == EDITED
        approvers = [(a["by"], a["surface"]) for a in body["approvals"]]
        assert approvers == [("u_ann", "dashboard"), (STAFF, "sms")]
        assert body["digest"] == parameters_digest(EDITED)
        assert json.dumps(body).count("40000") == 0
