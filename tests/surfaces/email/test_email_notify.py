"""A tool's `notify = ["email"]` beside another surface, through a real SMTP server on loopback.

The request is asked where the route says (acme's admin channel in Slack) and a notice goes
to acme's `admins.email`: it says where the request waits and that an answer counts only
there, with the link to the request's inbox page. The notice is never an approval path:
Gus, told by email, cannot answer in the inbox a request asked in Slack, while Ada answers
on the Slack card. When the route is the dashboard's, the notice says the inbox is where an
approver answers, and still makes nobody an approver. A server that refuses the notice for
now is retried; one that refuses it for good is recorded and the request stays asked.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from surfaces.email import EmailAdapter, EmailConfig
from tests.harness import press, until, until_async
from tests.inbox.test_answers import post_answer
from tests.inbox.world import PUBLIC_URL, SLACK_SECRET, World, inbox_world
from tests.mailbox import Running, smtp_server

GUS = "gus@globex.example"
POLICY = f"""
[defaults]
timeout = "1h"

[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]
notify = ["email"]

[tools.close_account]
kind = "danger"
approvers = ["requester"]
notify = ["email"]

[tenants.acme]
slack_team = "T0ACME"
admin_channel = "C0ADMINS"
admins = {{ slack = ["U0ADMIN"], email = ["{GUS}"] }}
"""
FROM_SLACK = {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U0BOB"}


@asynccontextmanager
async def notified(server: Running) -> AsyncIterator[World]:
    config = EmailConfig("127.0.0.1", server.port, False, "cosigner@acme.example", PUBLIC_URL)
    mail = [lambda desk: EmailAdapter(config, desk, lambda: 1_700_000_000.0)]
    async with inbox_world(POLICY, slack=True, extra_surfaces=mail) as w:
        yield w


async def ask(w: World, key: str, tool: str, surface: dict[str, Any]) -> str:
    r = await w.h.client.post(
        "/v1/approvals",
        headers=w.h.auth(key),
        json={
            "executionId": "run_1",
            "toolCallId": f"c_{tool}",
            "toolName": tool,
            "parameters": {"amountCents": 12900, "cardToken": "tok_live_abcdefghijklmnop"},
            "surface": surface,
        },
    )
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


async def events(w: World, key: str, aid: str, name: str) -> list[dict[str, Any]]:
    body = (await w.h.client.get(f"/v1/approvals/{aid}/audit", headers=w.h.auth(key))).json()
    return [e for e in body["events"] if e["event"] == name]


async def test_asked_in_slack_and_noticed_by_email_where_only_slack_answers_count() -> None:
    with smtp_server() as server:
        async with notified(server) as w:
            key = await w.h.create_tenant("acme")
            aid = await ask(w, key, "issue_refund", FROM_SLACK)
            (card,) = await until(lambda: [m for m in w.emu.messages if m.method == "chat.postMessage"])
            assert card.channel == "C0ADMINS"
            (got,) = await until(lambda: server.box.received)
            assert got.recipients == [GUS]
            assert got.message["Subject"] == "Waiting for an answer in Slack: issue_refund (acme)"
            link = f"{PUBLIC_URL}/inbox/approvals/{aid}"
            for part in (got.part("plain"), html.unescape(got.part("html"))):
                assert "waits for an approver's answer in Slack." in part
                assert "an answer counts only there" in " ".join(part.split())
                assert re.findall(r"https?://[^\s\"<]+", part) == [link]
                assert "tok_live_abcdefghijklmnop" not in part
            (sent,) = await until_async(lambda: events(w, key, aid, "email_sent"))
            assert sent["data"]["kind"] == "notice" and sent["data"]["to"] == [GUS]
            # Told is not asked: Gus, signed in, cannot answer it in the inbox.
            await w.sign_in(w.h.client, "U0GUS")
            refused = await post_answer(w, w.h.client, aid, "approve")
            assert refused.status_code in (403, 404), refused.text
            pending = (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()
            assert pending["status"] == "pending"
            # The answer counts where the request was asked: Ada on the Slack card.
            clicked = await press(
                w.h.client, card, secret=SLACK_SECRET, app_id=w.emu.app_id, user="U0ADMIN", team="T0ACME"
            )
            assert clicked.status_code == 200
            done = (await w.h.client.get(f"/v1/approvals/{aid}?wait=5", headers=w.h.auth(key))).json()
            assert done["status"] == "approved" and done["decidedBy"]["surface"] == "slack"


async def test_asked_in_the_inbox_the_notice_says_so_and_makes_nobody_an_approver() -> None:
    with smtp_server() as server:
        async with notified(server) as w:
            key = await w.h.create_tenant("acme")
            aid = await ask(w, key, "close_account", {"type": "dashboard", "userId": "u_requester"})
            (got,) = await until(lambda: server.box.received)
            assert got.recipients == [GUS]
            assert got.message["Subject"] == "Waiting for an answer in the inbox: close_account (acme)"
            text = " ".join(got.part("plain").split())
            assert "Only an approver of this request can answer, signed in to the inbox" in text
            await w.sign_in(w.h.client, "U0GUS")
            refused = await post_answer(w, w.h.client, aid, "approve")
            assert refused.status_code in (403, 404), refused.text


async def test_a_notice_refused_for_now_is_retried_and_for_good_leaves_the_request_asked() -> None:
    with smtp_server() as server:
        server.box.script = ["451 4.3.0 try later", "554 5.7.1 relay denied"]
        async with notified(server) as w:
            key = await w.h.create_tenant("acme")
            aid = await ask(w, key, "issue_refund", FROM_SLACK)
            (first,) = await until_async(lambda: events(w, key, aid, "email_failed"))
            assert first["data"]["kind"] == "notice" and first["data"]["retrying"] is True
            w.h.advance(1.0)
            second = await until_async(lambda: _two(events(w, key, aid, "email_failed")))
            assert second[1]["data"]["retrying"] is False and "554 5.7.1" in second[1]["data"]["reason"]
            assert second[1]["data"]["then"].startswith("not sent: the request is still asked")
            body = (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()
            assert body["status"] == "pending"
            assert [m for m in w.emu.messages if m.method == "chat.postMessage"]


async def _two(found: Any) -> list[dict[str, Any]] | None:
    got: list[dict[str, Any]] = await found
    return got if len(got) >= 2 else None
