"""Secrets must not leave through key spellings, the reason, result errors or error messages."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.types import Message

from bot.policy.redaction import REDACTED, redact
from tests.harness import cosigner_app

STRIPE = "sk_live_abcdefgh12345678"
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
