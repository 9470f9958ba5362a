"""A Cosigner app with the Slack emulator and a policy whose `issue_credit` offers "Allow for …"."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from contracts.ports import ApprovalDesk
from storage.database import Database
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.emulated_methods import Recorded
from surfaces.slack.emulator import SlackEmulator
from surfaces.slack.interactions import block_actions_payload, send_signed
from tests.harness import Harness, cosigner_app, until, until_async

SECRET = "allowances-signing-secret"
APP_ID = "A0COSIGNER"
POLICY = """
[defaults]
timeout = "5m"
max_gated_calls_per_execution = 50

[tools.issue_credit]
kind = "write"
confirm = true
allow_for = "1h"
allow_for_match = ["customerId"]
allow_for_at_most = ["amountCents"]
allow_for_uses = 3

[tools.issue_refund]
kind = "danger"

[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ADMIN"], dashboard = ["u_admin"] }
"""


@asynccontextmanager
async def slack_world(db: Database, emu: SlackEmulator, policy: str = POLICY) -> AsyncIterator[Harness]:
    config = SlackConfig(signing_secret=SECRET, bot_token="xoxb-acme", api_url=emu.api_url, app_id=APP_ID)

    def factory(desk: ApprovalDesk) -> SlackAdapter:
        return SlackAdapter(config, desk)

    async with cosigner_app(policy, db=db, surfaces=[factory]) as h:
        yield h


def call(
    n: int, customer: str = "cus_1", amount: Any = 1500, tool: str = "issue_credit", user: str = "U1"
) -> dict[str, Any]:
    return {
        "executionId": "run_1",
        "toolCallId": f"call_{n}",
        "toolName": tool,
        "parameters": {"customerId": customer, "amountCents": amount},
        "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": user},
    }


async def ask(h: Harness, key: str, body: dict[str, Any]) -> httpx.Response:
    return await h.client.post("/v1/approvals", json=body, headers=h.auth(key))


def posted(emu: SlackEmulator) -> list[Recorded]:
    return [m for m in emu.messages if m.method == "chat.postMessage"]


async def card_for(h: Harness, emu: SlackEmulator, key: str, body: dict[str, Any]) -> tuple[str, Recorded]:
    before = len(posted(emu))
    r = await ask(h, key, body)
    assert r.status_code == 201, r.text
    card = (await until(lambda: posted(emu)[before:]))[0]
    approval_id = str(r.json()["approvalId"])
    await until_async(lambda: receipt_stored(h, approval_id))  # a click before it is refused
    return approval_id, card


async def receipt_stored(h: Harness, approval_id: str) -> bool:
    placed = await h.desk.placed(approval_id)
    return placed is not None and placed.delivered is not None


def buttons(card: Recorded) -> dict[str, dict[str, Any]]:
    return {e["action_id"]: e for b in card.blocks if b["type"] == "actions" for e in b["elements"]}


async def press(
    h: Harness, emu: SlackEmulator, card: Recorded, action_id: str, user: str = "U1"
) -> httpx.Response:
    return await emu.click(
        h.client, channel=card.channel, ts=card.ts, action_id=action_id, secret=SECRET, user=user
    )


async def press_forged(
    h: Harness, emu: SlackEmulator, card: Recorded, action_id: str, value: str, user: str = "U1"
) -> httpx.Response:
    """A really signed click of a button the card does not have (a length it does not offer)."""
    block = next(b for b in card.blocks if b["type"] == "actions")
    action = {"type": "button", "block_id": block["block_id"], "action_id": action_id, "value": value}
    payload = block_actions_payload(
        action=action,
        blocks=card.blocks,
        channel=card.channel,
        ts=card.ts,
        user=user,
        team="T0ACME",
        app_id=APP_ID,
        response_url=emu.response_url,
        trigger_id=f"{int(time.time())}.1.forged",
    )
    return await send_signed(h.client, "/slack/events", payload, secret=SECRET)


async def status_of(h: Harness, key: str, approval_id: str) -> str:
    r = await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))
    return str(r.json()["status"])


async def allowances(h: Harness) -> list[dict[str, Any]]:
    r = await h.client.get("/v1/allowances", headers=h.auth(h.approver_key("acme")))
    assert r.status_code == 200, r.text
    return list(r.json()["allowances"])
