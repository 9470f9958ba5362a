"""Step-up on the server, with a software authenticator made here (an ECDSA P-256 key and
WebAuthn's byte layouts): what a browser cannot be made to send is checked too. An assertion
without the user-verification flag, a counter that did not move, a challenge used twice or
one handed out for another call are refused; the dashboard decision endpoint's Approve is
refused; the link from a chat lands on the step-up page after sign-in; texts and Teams
cards carry the link instead of Approve."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import struct
from datetime import UTC, datetime, timedelta
from typing import Any

import cbor2
import httpx
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from bot.http.app import ConfigurationError
from contracts.enums import ApprovalMode, ApprovalStatus, ToolKind
from contracts.ports import ApprovalCard
from storage import passkeys as stored
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.text import to_sms_text
from surfaces.teams.card import to_card
from tests.harness import cosigner_app
from tests.inbox.test_answers import csrf_of
from tests.inbox.world import PUBLIC_URL, SENDER, TWILIO_ACCOUNT, TWILIO_TOKEN, World, inbox_world

POLICY = """
[tools.wire_funds]
kind = "danger"
step_up = true

[tenants.acme]
slack_team = "T0ACME"
admins = { dashboard = ["ada@acme.example", "bob@acme.example"] }
"""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


class Authenticator:
    """One passkey: a P-256 key, its credential id and counter."""

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.id = b64url(hashlib.sha256(b"software passkey").digest())
        self.count = 0

    def cose(self) -> bytes:
        n = self.key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: n.x.to_bytes(32, "big"), -3: n.y.to_bytes(32, "big")})

    def assertion(self, challenge: str, *, uv: bool = True, rp_id: str = "127.0.0.1") -> dict[str, Any]:
        self.count += 1
        flags = 0x01 | (0x04 if uv else 0)  # user present, and verified when `uv`
        data = hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + struct.pack(">I", self.count)
        client = json.dumps({"type": "webauthn.get", "challenge": challenge, "origin": PUBLIC_URL}).encode()
        signature = self.key.sign(data + hashlib.sha256(client).digest(), ec.ECDSA(hashes.SHA256()))
        return {
            "id": self.id,
            "rawId": self.id,
            "type": "public-key",
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": b64url(client),
                "authenticatorData": b64url(data),
                "signature": b64url(signature),
                "userHandle": None,
            },
        }


async def ask(w: World, key: str, call: str) -> str:
    r = await w.h.client.post(
        "/v1/approvals",
        headers=w.h.auth(key),
        json={
            "executionId": f"run_{call}",
            "toolCallId": call,
            "toolName": "wire_funds",
            "parameters": {"amountCents": 4_500_000, "reference": call},
            "surface": {"type": "dashboard", "userId": "ada@acme.example"},
        },
    )
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


async def enrolled(w: World) -> Authenticator:
    """Ada signed in, with a passkey stored for her sign-in (issuer and subject)."""
    await w.sign_in(w.h.client, "U0ADMIN")
    person = f"{w.emu.openid.issuer} U0ADMIN"
    device = Authenticator()
    key = stored.Passkey(device.id, person, "Software", device.cose(), 0, w.h.clock())
    assert await w.h.parts.db.run_write(lambda tx: stored.add(tx, key))
    return device


async def challenge(client: httpx.AsyncClient, aid: str) -> str:
    page = (await client.get(f"/inbox/approvals/{aid}/step-up")).text
    digest = page.split('name="digest" value="')[1].split('"')[0]
    r = await client.post(
        f"/inbox/approvals/{aid}/step-up/options", data={"csrf": csrf_of(page), "digest": digest}
    )
    assert r.status_code == 200, r.text
    return str(r.json()["challenge"])


async def confirm(client: httpx.AsyncClient, aid: str, credential: dict[str, Any]) -> httpx.Response:
    page = (await client.get("/inbox/passkeys")).text
    return await client.post(
        f"/inbox/approvals/{aid}/step-up", json={"csrf": csrf_of(page), "credential": credential}
    )


async def test_the_server_refuses_what_a_browser_would_not_send(db_kind: str) -> None:
    async with inbox_world(POLICY, database_kind=db_kind) as w:
        acme = await w.h.create_tenant("acme")
        first, second = await ask(w, acme, "w1"), await ask(w, acme, "w2")
        device = await enrolled(w)
        client = w.h.client

        # No user-verification flag: refused, nothing decided.
        r = await confirm(client, first, device.assertion(await challenge(client, first), uv=False))
        assert r.status_code == 403 and "User verification" in r.json()["error"]["message"], r.text
        # A challenge handed out for one call, signed and posted for another.
        r = await confirm(client, second, device.assertion(await challenge(client, first)))
        assert r.status_code == 403 and f"made for approval {first}, not {second}" in r.text
        # Signed for another relying party: refused.
        r = await confirm(
            client, first, device.assertion(await challenge(client, first), rp_id="evil.example")
        )
        assert r.status_code == 403
        assert (await client.get(f"/v1/approvals/{first}", headers=w.h.auth(acme))).json()[
            "status"
        ] == "pending"

        # The second call approved: the stored counter moves on; an assertion that does not
        # move it past that (a cloned passkey's) is refused.
        assert (
            await confirm(client, second, device.assertion(await challenge(client, second)))
        ).status_code == 200
        said = await challenge(client, first)
        device.count -= 1
        r = await confirm(client, first, device.assertion(said))
        assert r.status_code == 403 and "sign count" in r.text.lower(), r.text
        assert (await client.get(f"/v1/approvals/{first}", headers=w.h.auth(acme))).json()[
            "status"
        ] == "pending"

        # The right one approves, with the grant's amr; the same assertion again is refused.
        good = device.assertion(await challenge(client, first))
        r = await confirm(client, first, good)
        assert r.status_code == 200, r.text
        body = (await client.get(f"/v1/approvals/{first}", headers=w.h.auth(acme))).json()
        assert body["status"] == "approved"
        payload = body["grant"].split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        assert claims["amr"] == ["webauthn"]
        again = await confirm(client, first, good)
        assert again.status_code == 403 and "used already" in again.text


async def test_the_dashboard_endpoint_cannot_approve_a_step_up_call_but_can_deny_it(db_kind: str) -> None:
    async with inbox_world(POLICY, database_kind=db_kind) as w:
        acme = await w.h.create_tenant("acme")
        aid = await ask(w, acme, "d1")
        approver = {"Authorization": f"Bearer {w.h.approver_of(acme)}"}
        r = await w.h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=approver,
            json={"decision": "approve", "userId": "ada@acme.example"},
        )
        assert r.status_code == 403 and r.json()["error"]["code"] == "STEP_UP_REQUIRED", r.text
        r = await w.h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=approver,
            json={"decision": "deny", "userId": "ada@acme.example"},
        )
        assert r.status_code == 200 and r.json()["status"] == "denied"
        assert "grant" not in r.json() or r.json()["grant"] is None


async def test_the_link_from_a_chat_asks_for_sign_in_and_lands_on_the_step_up_page() -> None:
    async with inbox_world(POLICY) as w:
        acme = await w.h.create_tenant("acme")
        aid = await ask(w, acme, "l1")
        r = await w.h.client.get(f"/inbox/approvals/{aid}/step-up")
        assert r.status_code == 303 and r.headers["location"] == "/inbox/"  # sign in first
        back = await w.sign_in(w.h.client, "U0ADMIN")
        assert back.status_code == 303 and back.headers["location"] == f"/inbox/approvals/{aid}/step-up"
        page = await w.h.client.get(back.headers["location"])
        assert "Add a passkey" in page.text  # none yet
        # Bob is no approver of Ada's request: nothing is said about it.
        async with w.browser() as bob:
            await w.sign_in(bob, "U0BOB")
            assert (await bob.get(f"/inbox/approvals/{aid}/step-up")).status_code == 404


def card(**fields: Any) -> ApprovalCard:
    now = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
    base: dict[str, Any] = dict(
        approval_id="apv_1",
        short_code="4821",
        tenant="acme",
        execution_id="run_1",
        tool_call_id="c1",
        tool_name="wire_funds",
        kind=ToolKind.DANGER,
        mode=ApprovalMode.ASK_ALWAYS,
        parameters={"amountCents": 4_500_000},
        reason=None,
        triggered_by="sms:+15550100200",
        policy_rule="tools.wire_funds: danger → ask_always",
        created_at=now,
        expires_at=now + timedelta(minutes=30),
        status=ApprovalStatus.PENDING,
        step_up=True,
    )
    return ApprovalCard(**{**base, **fields})


def test_a_text_offers_the_inbox_link_and_no_yes() -> None:
    text = to_sms_text(card(), code_required=False, inbox="https://cosigner.example/inbox/")
    assert "https://cosigner.example/inbox/approvals/apv_1/step-up" in text
    assert "YES" not in text and "Reply NO to deny" in text
    off = to_sms_text(card(), code_required=False, inbox=None)
    assert "YES cannot approve it" in off and "Reply NO to deny" in off
    plain = to_sms_text(card(step_up=False), code_required=False, inbox="https://cosigner.example/inbox/")
    assert "Reply YES or NO." in plain and "step-up" not in plain


def test_a_teams_card_links_to_the_inbox_instead_of_approve() -> None:
    made = to_card(card(inbox_url="https://cosigner.example/inbox/"), ("aad-1",))
    actions = made["actions"]
    assert actions[0] == {
        "type": "Action.OpenUrl",
        "title": "Approve in Cosigner",
        "url": "https://cosigner.example/inbox/approvals/apv_1/step-up",
        "style": "positive",
    }
    verbs = [a.get("verb") for a in actions if a["type"] == "Action.Execute"]
    assert "approve" not in verbs and "deny" in verbs
    off = to_card(card(), ("aad-1",))
    assert not [a for a in off["actions"] if a["type"] == "Action.OpenUrl" or a.get("verb") == "approve"]


TEXTED = f"""
[tools.wire_funds]
kind = "danger"
step_up = true

[tenants.acme]
sms_from = "{SENDER}"
admins = {{ dashboard = ["ada@acme.example"] }}
"""
PHONE = "+15550100200"


async def test_a_texted_step_up_request_offers_no_yes_and_refuses_one_but_takes_no() -> None:
    async with inbox_world(TEXTED, texts=True) as w:
        assert w.twilio is not None
        key = await w.h.create_tenant("acme")
        asked = []
        for n, call in enumerate(("t1", "t2")):
            r = await w.h.client.post(
                "/v1/approvals",
                headers=w.h.auth(key),
                json={
                    "executionId": "run_t",
                    "toolCallId": call,
                    "toolName": "wire_funds",
                    # Two different calls: identical ones would be one question (coalesced).
                    "parameters": {"amountCents": 4_500_000 + n},
                    "surface": {"type": "sms", "phone": PHONE},
                },
            )
            assert r.status_code == 201, r.text
            asked.append(str(r.json()["approvalId"]))
            await w.h.delivered(asked[-1])
        first = w.twilio.texts_to(PHONE)[0].body
        assert "Approve in Cosigner with a passkey" in first and "Reply YES" not in first, first
        texter = TwilioCaller(
            w.h.client, public_url=PUBLIC_URL, account_sid=TWILIO_ACCOUNT, auth_token=TWILIO_TOKEN
        )
        code = (await w.h.desk.placed(asked[0])).card.short_code  # type: ignore[union-attr]
        reply = html.unescape((await texter.text(PHONE, SENDER, f"YES {code}")).text)
        assert "needs step-up" in reply, reply
        body = (await w.h.client.get(f"/v1/approvals/{asked[0]}", headers=w.h.auth(key))).json()
        assert body["status"] == "pending"
        await texter.text(PHONE, SENDER, f"NO {code}")
        body = (await w.h.client.get(f"/v1/approvals/{asked[0]}?wait=5", headers=w.h.auth(key))).json()
        assert body["status"] == "denied"


async def test_a_step_up_policy_does_not_start_without_the_inbox() -> None:
    with pytest.raises(ConfigurationError) as refused:
        async with cosigner_app(POLICY):
            pass
    assert "tools.wire_funds.step_up asks for step-up" in str(refused.value)
    assert "COSIGNER_OIDC_ISSUER" in str(refused.value)
