"""Slack against the real engine: every way a click can be wrong, and every way a card closes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from surfaces.slack.emulated_methods import Recorded
from surfaces.slack.emulator import SlackEmulator
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere, sqlite_all_postgres_some
from tests.harness import Harness, press, slack_app, until

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, SLACK_STATE)

SECRET = "scenario-signing-secret"
APP_ID = "A0COSIGNER"
POLICY = """
[tools.issue_credit]
kind = "write"
confirm = true

[tools.issue_refund]
kind = "danger"

[tools.close_account]
kind = "danger"
approvers = ["tenant_admins"]

[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ADMIN", "U0ADMIN2"] }
admin_channel = "C0ADMINS"
"""


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, str]]:
    async with slack_app(POLICY, secret=SECRET, app_id=APP_ID, database_kind=db_kind) as (h, emu):
        yield h, emu, await h.create_tenant("acme")


async def ask(h: Harness, key: str, tool: str = "issue_refund", call_id: str = "call_1", **extra: Any) -> str:
    surface = {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"}
    surface.update(extra.pop("surface", {}))
    body = {
        "executionId": extra.pop("executionId", "run_1"),
        "toolCallId": call_id,
        "toolName": tool,
        "parameters": {"amountCents": 12900},
        "surface": surface,
        **extra,
    }
    r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert r.status_code in (200, 201), r.text
    return str(r.json()["approvalId"])


async def card_of(emu: SlackEmulator, index: int = 0) -> Recorded:
    posts = await until(
        lambda: [m for m in emu.messages if m.method == "chat.postMessage"][index : index + 1]
    )
    return posts[0]


async def forged_click(
    h: Harness, emu: SlackEmulator, card: Recorded, *, action: str = "cosigner.approve", **fields: Any
) -> None:
    fields.setdefault("team", "T0ACME")
    fields.setdefault("app_id", APP_ID)
    r = await press(h.client, card, action, secret=SECRET, **fields)
    assert r.status_code == 200, "every signed click is acked"


async def status(h: Harness, key: str, approval_id: str) -> str:
    r = await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))
    return str(r.json()["status"])


async def refusal_codes(h: Harness, key: str, approval_id: str) -> list[str]:
    audit = (await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))).json()["events"]
    return [e["data"]["code"] for e in audit if e["event"] == "decision_refused"]


WRONG_CLICKS = [
    ({"channel": "C2"}, "WRONG_CONVERSATION"),
    ({"ts": "1700000000.999999"}, "WRONG_CONVERSATION"),
    ({"app_id": "A0IMPOSTOR"}, "WRONG_CONVERSATION"),
    ({"user_team": "T0OUTSIDER"}, "NOT_AN_APPROVER"),  # Slack Connect: U1's id, other org
    ({"user": "U2"}, "NOT_AN_APPROVER"),
    ({"team": "T0GLOBEX"}, "WRONG_TENANT"),
]


# The clicks of one code differ in what they say, not in what storage does (the same read,
# the same refusal audited): PostgreSQL runs one click per code (tests/databases.py).
@sqlite_all_postgres_some("fields, code", WRONG_CLICKS, postgres=[WRONG_CLICKS[i] for i in (0, 3, 5)])
async def test_a_wrong_click_changes_nothing_is_explained_and_audited(
    world: Any, fields: dict[str, str], code: str
) -> None:
    h, emu, key = world
    approval_id = await ask(h, key)
    card = await card_of(emu)
    await h.delivered(approval_id)
    forged = dict(fields)  # parametrize shares the dict between database runs
    await forged_click(h, emu, card, user=forged.pop("user", "U1"), **forged)
    (note,) = await until(lambda: emu.ephemerals)
    assert note.text is not None and code in note.text
    assert await status(h, key, approval_id) == "pending"
    assert await refusal_codes(h, key, approval_id) == [code]


async def test_a_click_on_another_cards_message_does_not_decide_this_one(world: Any) -> None:
    h, emu, key = world
    first = await ask(h, key, call_id="a")
    second = await ask(h, key, call_id="b", executionId="run_2")  # not the same question as the first
    card_a, card_b = await card_of(emu, 0), await card_of(emu, 1)
    await h.delivered(first)
    await h.delivered(second)
    # The button of card A, replayed as though it sat on card B's message.
    await forged_click(h, emu, card_a, channel=card_b.channel, ts=card_b.ts, user="U1")
    await until(lambda: emu.ephemerals)
    assert {await status(h, key, first), await status(h, key, second)} == {"pending"}


async def test_admin_requests_go_to_the_admin_channel_and_two_admins_race(world: Any) -> None:
    h, emu, key = world
    approval_id = await ask(h, key, tool="close_account")
    card = await card_of(emu)
    assert card.channel == "C0ADMINS"
    await h.delivered(approval_id)
    await asyncio.gather(
        forged_click(h, emu, card, user="U0ADMIN"), forged_click(h, emu, card, user="U0ADMIN2")
    )
    assert await status(h, key, approval_id) == "approved"
    (note,) = await until(lambda: emu.ephemerals)
    assert note.text is not None and "ALREADY_DECIDED" in note.text
    decided = (await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))).json()
    assert decided["decidedBy"]["userId"] in ("U0ADMIN", "U0ADMIN2")
    assert note.user != decided["decidedBy"]["userId"]


async def test_requests_in_a_thread_are_posted_in_that_thread(world: Any) -> None:
    h, emu, key = world
    await ask(h, key, surface={"threadTs": "1700000000.000100"})
    card = await card_of(emu)
    assert (card.channel, card.thread_ts) == ("C1", "1700000000.000100")


async def test_a_click_after_expiry_is_refused_and_the_card_shows_expiry(world: Any) -> None:
    h, emu, key = world
    approval_id = await ask(h, key, timeoutSeconds=1)
    card = await card_of(emu)
    await h.delivered(approval_id)
    h.advance(1.1)
    await forged_click(h, emu, card, user="U1")
    (note,) = await until(lambda: emu.ephemerals)
    assert note.text is not None and "APPROVAL_EXPIRED" in note.text
    assert await status(h, key, approval_id) == "expired"
    closed = await until(lambda: (m := emu.latest(card.channel, card.ts)) and m.method == "chat.update" and m)
    assert not [b for b in closed.blocks if b["type"] == "actions"]
    assert "xpired" in json.dumps(closed.blocks)


async def test_a_decision_made_elsewhere_updates_the_card(world: Any) -> None:
    h, emu, key = world
    approval_id = await ask(h, key)
    card = await card_of(emu)
    await h.delivered(approval_id)
    r = await h.client.post(f"/v1/approvals/{approval_id}/cancel", headers=h.auth(key))
    assert r.json()["status"] == "cancelled"
    closed = await until(lambda: (m := emu.latest(card.channel, card.ts)) and m.method == "chat.update" and m)
    assert not [b for b in closed.blocks if b["type"] == "actions"]
    assert "ancelled" in json.dumps(closed.blocks)


async def test_approve_for_this_run_covers_later_calls_of_that_tool_only(world: Any) -> None:
    h, emu, key = world
    first = await ask(h, key, tool="issue_credit", call_id="c1")
    card = await card_of(emu)
    actions = [e["action_id"] for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
    assert "cosigner.approve_for_run" in actions
    await h.delivered(first)
    await forged_click(h, emu, card, action="cosigner.approve_for_run", user="U1")
    assert await status(h, key, first) == "approved"
    again = await h.client.post(
        "/v1/approvals",
        headers=h.auth(key),
        json={
            "executionId": "run_1",
            "toolCallId": "c2",
            "toolName": "issue_credit",
            "parameters": {"amountCents": 1},
            "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
        },
    )
    assert again.status_code == 200
    assert "approved for this run by slack:U1" in again.json()["decidedBy"]["rule"]
    other_run = await ask(h, key, tool="issue_credit", call_id="c3", executionId="run_2")
    assert await status(h, key, other_run) == "pending"
    refund = await ask(h, key, tool="issue_refund", call_id="r1")
    assert await status(h, key, refund) == "pending"
    await card_of(emu, 2)
    posts = [m for m in emu.messages if m.method == "chat.postMessage"]
    (danger,) = [m for m in posts if "issue_refund" in json.dumps(m.blocks[:1])]
    danger_actions = [e["action_id"] for b in danger.blocks if b["type"] == "actions" for e in b["elements"]]
    assert "cosigner.approve_for_run" not in danger_actions


ESCAPES = {
    "another person in the channel": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U2"},
    "the same person in another channel": {
        "type": "slack",
        "teamId": "T0ACME",
        "channelId": "C2",
        "userId": "U1",
    },
    "the same person in a thread": {
        "type": "slack",
        "teamId": "T0ACME",
        "channelId": "C1",
        "threadTs": "1700.1",
        "userId": "U1",
    },
    "a dashboard user": {"type": "dashboard", "userId": "mallory"},
    "a phone number": {"type": "sms", "phone": "+15550009999"},
}


@pytest.mark.parametrize("escape", list(ESCAPES))
async def test_approve_for_this_run_covers_only_the_same_requester_in_the_same_conversation(
    world: Any, escape: str
) -> None:
    h, emu, key = world
    first = await ask(h, key, tool="issue_credit", call_id="c1")
    card = await card_of(emu)
    await h.delivered(first)
    await forged_click(h, emu, card, action="cosigner.approve_for_run", user="U1")
    assert await status(h, key, first) == "approved"

    def later(call_id: str, surface: dict[str, Any], tool: str = "issue_credit") -> dict[str, Any]:
        return {
            "executionId": "run_1",
            "toolCallId": call_id,
            "toolName": tool,
            "parameters": {"amountCents": 1},
            "surface": surface,
        }

    other = await h.client.post("/v1/approvals", headers=h.auth(key), json=later("c2", ESCAPES[escape]))
    assert other.status_code != 200, f"{escape}: approved by a grant nobody gave them: {other.text}"
    if other.status_code == 201:
        assert other.json()["status"] == "pending"
    # The requester who was approved, in the conversation where they were, still is: in any case.
    same = {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"}
    again = await h.client.post("/v1/approvals", headers=h.auth(key), json=later("c3", same, "Issue_Credit"))
    assert again.status_code == 200, again.text
    assert "approved for this run by slack:U1" in again.json()["decidedBy"]["rule"]
    assert again.json()["toolName"] == "Issue_Credit"


async def test_the_approve_for_this_run_confirmation_names_who_it_covers(world: Any) -> None:
    h, emu, key = world
    await ask(h, key, tool="issue_credit", call_id="c1")
    card = await card_of(emu)
    (button,) = [
        e
        for b in card.blocks
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == "cosigner.approve_for_run"
    ]
    text = button["confirm"]["text"]["text"]
    assert "issue_credit" in text and "<@U1>" in text and "in this conversation" in text
    assert "without asking" in text
