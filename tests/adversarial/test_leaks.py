"""Secrets must not leave through key spellings, the reason, result errors or error messages."""

from __future__ import annotations

import functools
import html
import json
import logging
from typing import Any

import pytest
from starlette.types import Message

from bot.policy.redaction import REDACTED, redact
from tests.harness import cosigner_app

STRIPE = "sk_live_abcdefgh12345678"
PUBLIC_URL = "http://127.0.0.1:8000"  # the inbox world's
TEAMS_AAD = "72f988bf-86f1-41af-91ab-2d7cd011db47"
TEAMS_ALICE = "aaaaaaaa-0000-4000-8000-000000000001"
CARD = "4242 4242 4242 4242"
DASH = {"type": "dashboard", "userId": "u_1"}


def call(call_id: str = "c1", **extra: Any) -> dict[str, Any]:
    body = {
        "executionId": "run_1",
        "toolCallId": call_id,
        "toolName": "issue_refund",
        "parameters": {"orderId": "ord_1", "amountCents": 12900},
        "surface": DASH,
    }
    body.update(extra)
    return body


@pytest.mark.parametrize("key", ["ｐassword", "ＰＡＳＳＷＯＲＤ", "ａｐｉ＿ｋｅｙ", "Ｔｏｋｅｎ"])
def test_fullwidth_spellings_of_secret_keys_are_redacted(key: str) -> None:
    assert redact({key: "hunter2"}) == {key: REDACTED}


async def test_a_secret_in_the_reason_never_reaches_card_or_audit(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        r = await h.client.post(
            "/v1/approvals", headers=h.auth(key), json=call(reason=f"use key {STRIPE} on card {CARD}")
        )
        assert r.status_code == 201, r.text
        aid = r.json()["approvalId"]
        placed = await h.desk.placed(aid)
        assert placed is not None
        audit = await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))
        for text in (placed.card.reason or "", audit.text, r.text):
            assert STRIPE not in text and CARD not in text


async def test_a_secret_in_a_reported_error_never_reaches_the_audit(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        aid = (await h.client.post("/v1/approvals", headers=h.auth(key), json=call())).json()["approvalId"]
        await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "approve", "userId": "u_1"},
        )
        r = await h.client.post(
            f"/v1/approvals/{aid}/result",
            headers=h.auth(key),
            json={"outcome": "failed", "error": f"card {CARD} declined"},
        )
        assert r.status_code == 200, r.text
        audit = await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))
        assert CARD not in audit.text


@pytest.mark.parametrize(
    "body",
    [
        call(surface={"type": STRIPE}),
        call(surface={"type": "dashboard", "userId": "u_1", STRIPE: 1}),
        {**call(), STRIPE: 1},
    ],
)
async def test_validation_errors_do_not_echo_what_was_sent(body: dict[str, Any]) -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        r = await h.client.post("/v1/approvals", headers=h.auth(key), json=body)
        assert r.status_code == 400
        assert r.json()["error"]["field"]
        assert STRIPE not in r.text


@pytest.mark.parametrize("wait", ["²", "١"])
async def test_a_non_ascii_digit_wait_is_a_400(wait: str) -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        aid = (await h.client.post("/v1/approvals", headers=h.auth(key), json=call())).json()["approvalId"]
        r = await h.client.get(f"/v1/approvals/{aid}", params={"wait": wait}, headers=h.auth(key))
        assert r.status_code == 400, r.text
        assert r.json()["error"]["field"] == "wait"


async def test_a_nul_character_is_a_400_naming_the_field_not_a_500(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        raw = json.dumps(call(reason="x\u0000y")).encode()
        r = await h.client.post("/v1/approvals", headers=h.auth(key), content=raw)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["field"] == "reason"
        aid = (await h.client.post("/v1/approvals", headers=h.auth(key), json=call("c2"))).json()[
            "approvalId"
        ]
        raw = json.dumps({"decision": "approve", "userId": "u_1", "comment": "ok\u0000"}).encode()
        r = await h.client.post(
            f"/v1/approvals/{aid}/decision", headers=h.auth(h.approver_of(key)), content=raw
        )
        assert r.status_code == 400, r.text
        assert r.json()["error"]["field"] == "comment"
        got = await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))
        assert got.json()["status"] == "pending"


@pytest.mark.parametrize("path", ["/v1/approvals", "/slack/events"])
async def test_a_non_ascii_digit_content_length_is_not_a_500(path: str) -> None:
    from contracts.ports import ApprovalDesk
    from surfaces.slack import SlackAdapter, SlackConfig

    config = SlackConfig(signing_secret="s", bot_token="xoxb-x", api_url="http://127.0.0.1:9/api/")

    def factory(desk: ApprovalDesk) -> SlackAdapter:
        return SlackAdapter(config, desk)

    async with cosigner_app(surfaces=[factory]) as h:
        key = await h.create_tenant("acme")
        # httpx will not send this header, so speak ASGI directly: latin-1 "²" passes
        # str.isdigit() but not int().
        sent: list[Message] = []
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "server": ("cosigner.test", 80),
            "client": ("127.0.0.1", 1),
            "headers": [
                (b"authorization", f"Bearer {key}".encode()),
                (b"content-type", b"application/json"),
                (b"content-length", b"\xb2"),
            ],
        }

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message: Message) -> None:
            sent.append(message)

        await h.app(scope, receive, send)
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        assert 400 <= status < 500, sent


@pytest.mark.parametrize(
    "parameters",
    [
        {"Customer": {"email": "jo@example.com"}},
        {"customer": {"EMAIL": "jo@example.com"}},
        {"customer": {"ｅmail": "jo@example.com"}},
        {"customer_": {"e-mail": "jo@example.com"}},
    ],
)
def test_policy_paths_match_keys_whatever_their_case_or_width(parameters: dict[str, Any]) -> None:
    shown = json.dumps(redact(parameters, ["customer.email"]), ensure_ascii=False)
    assert "jo@example.com" not in shown


async def test_a_policy_redacted_key_in_other_case_is_not_shown(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:  # issue_refund redacts customer.email
        key = await h.create_tenant("acme")
        r = await h.client.post(
            "/v1/approvals",
            headers=h.auth(key),
            json=call(parameters={"amountCents": 12900, "Customer": {"Email": "jo@example.com"}}),
        )
        assert r.status_code == 201, r.text
        assert "jo@example.com" not in r.text


# --- A canary in every hidden field, through every surface ---------------------------------
#
# One call whose hidden values (by the policy's `redact`, a path, and by the key scan) and a
# hidden key hold a canary, asked on each surface at once: the canary must appear in nothing
# any of them shows or sends, nor in the API's answers (the errors of edits the schema
# refuses because of those very values among them), callbacks, log records or the audit export.

CANARY = "zq" + "7c1e0b93d5a2f468"
CANARY_POLICY = f"""
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
redact = ["cardToken", "customer.email", "vault"]
editable = ["amountCents", "note"]

[tenants.acme]
slack_team = "T0ACME"
teams_tenant = "{TEAMS_AAD}"
admins = {{ dashboard = ["ada@acme.example"] }}
"""
CANARY_CALL = {
    "orderId": "ord_1",
    "amountCents": 40000,
    "note": "late",
    "cardToken": f"tok_{CANARY}",  # the policy's redact
    "customer": {"email": f"{CANARY}@example.com", "name": "Jo"},  # a redacted path
    "password": CANARY,  # a secret-looking key
    "apiKey": f"k_{CANARY}",
    "vault": {CANARY: CANARY},  # hidden whole: its key is the canary too
}
# Every hidden value breaks a rule: an edit of amountCents is refused naming them.
CANARY_SCHEMA = {
    "type": "object",
    "properties": {
        "amountCents": {"type": "integer", "minimum": 1},
        "note": {"type": "string", "maxLength": 40},
        "cardToken": {"maxLength": 5},
        "password": {"pattern": "^x$"},
        "apiKey": {"enum": ["a"]},
        "customer": {"properties": {"email": {"maxLength": 3}}},
        "vault": {"additionalProperties": {"type": "integer"}},
    },
}
PHONE, BOT_PHONE = "+15550000002", "+15550000001"


async def test_a_canary_in_every_hidden_field_appears_on_no_surface(
    db_kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    from storage.audit import event_to_json, stream_since
    from surfaces.sms.caller import TwilioCaller
    from surfaces.teams import TeamsAdapter, TeamsConfig
    from surfaces.teams.emulator import TeamsEmulator
    from tests.harness import CallbackReceiver, until
    from tests.inbox.test_answers import post_answer
    from tests.inbox.test_edit import review
    from tests.inbox.world import SLACK_SECRET, TWILIO_ACCOUNT, TWILIO_TOKEN, inbox_world
    from tests.surfaces.teams.world import APP_ID, HOME, PASSWORD

    caplog.set_level(logging.DEBUG)
    seen: list[str] = []  # everything that left Cosigner, as text

    def keep(*texts: Any) -> None:
        seen.extend(t if isinstance(t, str) else json.dumps(t, default=str) for t in texts)

    with CallbackReceiver() as receiver:
        async with TeamsEmulator.running(app_id=APP_ID, app_password=PASSWORD, tenant_id=HOME) as teams:
            config = TeamsConfig(
                app_id=APP_ID, app_password=PASSWORD, app_tenant_id=HOME, api_url=teams.api_url
            )
            async with inbox_world(
                CANARY_POLICY,
                slack=True,
                texts=True,
                extra_surfaces=[lambda desk: TeamsAdapter(config, desk)],
                database_kind=db_kind,
                callback_allow="127.0.0.0/8",
            ) as w:
                h = w.h
                key = await h.create_tenant("acme")
                approver = h.approver_key()

                async def ask(call: str, surface: dict[str, Any]) -> str:
                    body = {
                        "executionId": "run_canary",
                        "toolCallId": call,
                        "toolName": "issue_refund",
                        "parameters": CANARY_CALL,
                        "surface": surface,
                        "acceptsEdits": True,
                        "parametersSchema": CANARY_SCHEMA,
                        "callbackUrl": receiver.url,
                    }
                    r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
                    assert r.status_code == 201, r.text
                    keep(r.text)
                    aid = str(r.json()["approvalId"])
                    if surface["type"] != "dashboard":
                        await h.delivered(aid, every_message=True)
                    return aid

                # Slack: the card, the full-call modal, the edit modal and its refusal, Approve.
                on_slack = await ask(
                    "slack", {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"}
                )
                card = [m for m in w.emu.messages if m.method == "chat.postMessage"][-1]
                for opened, action in enumerate(("cosigner.full_call", "cosigner.edit"), 1):
                    clicked = await w.emu.click(
                        h.client,
                        channel=card.channel,
                        ts=card.ts,
                        action_id=action,
                        secret=SLACK_SECRET,
                        user="U1",
                    )
                    keep(clicked.text)
                    await until(functools.partial(lambda n: len(w.emu.views) >= n, opened))
                state = {
                    "edit:amountCents": {"value": {"type": "number_input", "value": "400"}},
                    "edit:note": {"value": {"type": "plain_text_input", "value": "late"}},
                }
                refused = await w.emu.submit_view(h.client, secret=SLACK_SECRET, values=state, user="U1")
                assert "cardToken must be at most 5 characters long" in refused.text, refused.text
                keep(refused.text)
                await w.emu.click(
                    h.client,
                    channel=card.channel,
                    ts=card.ts,
                    action_id="cosigner.approve",
                    secret=SLACK_SECRET,
                    user="U1",
                )

                # SMS and WhatsApp: the texts, MORE (the whole call), YES.
                phone = TwilioCaller(
                    h.client, public_url=PUBLIC_URL, account_sid=TWILIO_ACCOUNT, auth_token=TWILIO_TOKEN
                )
                await ask("sms", {"type": "sms", "phone": PHONE})
                more = (await phone.text(PHONE, BOT_PHONE, "MORE")).text
                assert "cardToken" in more and "[REDACTED]" in more, more  # the whole call, as shown
                keep(more)
                await ask("whatsapp", {"type": "whatsapp", "phone": PHONE})

                # Teams: the card, and Approve.
                on_teams = await ask(
                    "teams",
                    {
                        "type": "teams",
                        "tenantId": TEAMS_AAD,
                        "conversationId": "19:c@thread.tacv2",
                        "userId": TEAMS_ALICE,
                    },
                )
                posted = (await until(lambda: teams.cards()))[0]
                keep((await teams.click(h.client, posted, "approve", TEAMS_ALICE)).text)

                # The inbox: the list, the request, the edit form and its refusal, Approve.
                on_inbox = await ask("inbox", {"type": "dashboard", "userId": "ada@acme.example"})
                await w.sign_in(h.client, "U0ADMIN")
                for page in ("/inbox/", f"/inbox/approvals/{on_inbox}", f"/inbox/approvals/{on_inbox}/edit"):
                    got = await h.client.get(page)
                    assert got.status_code == 200, got.text
                    keep(got.text)
                shown, _ = await review(h.client, on_inbox, **{"f.amountCents": "400"})
                assert shown.status_code == 400 and "customer.email must be at most 3" in html.unescape(
                    shown.text
                )
                keep(shown.text)
                keep((await post_answer(w, h.client, on_inbox, "approve")).text)

                # The API: an edit the schema refuses, the decision, reads, the audit trail.
                on_api = await ask("api", {"type": "dashboard", "userId": "u_api"})
                decide = f"/v1/approvals/{on_api}/decision"
                edit = {"decision": "approve", "userId": "u_api", "edit": {"amountCents": 400}}
                refused_edit = await h.client.post(decide, json=edit, headers=h.auth(approver))
                assert refused_edit.status_code == 400 and "vault must be a whole number" in refused_edit.text
                keep(refused_edit.text)
                done = await h.client.post(
                    decide, json={"decision": "approve", "userId": "u_api"}, headers=h.auth(approver)
                )
                assert done.json()["status"] == "approved", done.text
                keep(done.text)
                for aid in (on_slack, on_teams, on_inbox, on_api):
                    read = await h.client.get(f"/v1/approvals/{aid}?wait=5", headers=h.auth(key))
                    assert read.json()["status"] == "approved", read.text
                    keep(read.text)
                    keep((await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).text)

                # Callbacks, what each emulator was sent, the audit export.
                await until(lambda: len(receiver.snapshot()) >= 4)
                keep(*(r["body"].decode() for r in receiver.snapshot()))
                keep(*w.emu.calls)  # every Slack API call: cards, updates, modals, ephemerals
                assert w.twilio is not None
                keep(*(t.body for t in w.twilio.sent), *(t.content_variables for t in w.twilio.sent))
                keep(*(p.versions for p in teams.cards()))
                exported = await h.parts.db.run_read(
                    lambda tx: [event_to_json(r) for r in stream_since(tx, 0)], snapshot=True
                )
                keep(*exported)
    keep(caplog.text, *(json.dumps(r.__dict__, default=str) for r in caplog.records))
    assert len(seen) > 40
    leaked = [text[:300] for text in seen if CANARY in text]
    assert not leaked, leaked
