"""Four eyes in Slack, through the emulator and really signed clicks: the card shows the
progress to the channel, the approver who approved is told so in a reply only they see
(the card keeps its buttons for the others), and the second approver closes it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from surfaces.slack.emulator import SlackEmulator
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere
from tests.harness import Harness, press, slack_app, until

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, SLACK_STATE)

SECRET = "quorum-signing-secret"
APP_ID = "A0COSIGNER"
POLICY = """
[tools.delete_account]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2

[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ANN", "U0BOB", "U0CAT"] }
admin_channel = "C0ADMINS"
"""


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, str]]:
    async with slack_app(POLICY, secret=SECRET, app_id=APP_ID, database_kind=db_kind) as (h, emu):
        yield h, emu, await h.create_tenant("acme")


async def request(h: Harness, key: str, user: str = "U1", channel: str = "C1") -> str:
    body = {
        "executionId": "run_1",
        "toolCallId": "call_1",
        "toolName": "delete_account",
        "parameters": {"accountId": "acct_9"},
        "surface": {"type": "slack", "teamId": "T0ACME", "channelId": channel, "userId": user},
    }
    r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


def approve(h: Harness, card: Any, user: str) -> Any:
    return press(h.client, card, secret=SECRET, app_id=APP_ID, user=user, team="T0ACME")


def buttons(blocks: list[dict[str, Any]]) -> list[str]:
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


async def test_two_admins_approve_and_each_sees_their_own_approval(world: Any) -> None:
    h, emu, key = world
    aid = await request(h, key)
    (card,) = await until(lambda: [m for m in emu.messages if m.method == "chat.postMessage"])
    assert card.channel == "C0ADMINS"
    flat = json.dumps(card.blocks)
    assert "2 distinct approvers must approve" in flat and "requester's own Approve does not count" in flat
    assert "cosigner.approve_for_run" not in buttons(card.blocks)

    assert (await approve(h, card, "U0ANN")).status_code == 200
    (mine,) = await until(lambda: emu.ephemerals)
    assert mine.user == "U0ANN" and mine.channel == "C0ADMINS"
    assert mine.text is not None and "You approved" in mine.text and "1 of 2 approvals" in mine.text
    progress = await until(
        lambda: (m := emu.latest(card.channel, card.ts)) and m.method == "chat.update" and m
    )
    shown = json.dumps(progress.blocks, ensure_ascii=False)
    assert "*Approved 1 of 2* — <@U0ANN>, <!date^" in shown and "1 more approval needed" in shown
    assert "cosigner.approve" in buttons(progress.blocks), "the others keep their buttons"
    body = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
    assert body["status"] == "pending" and [(a["by"], a["surface"]) for a in body["approvals"]] == [
        ("U0ANN", "slack")
    ]

    # Ann presses Approve again: nothing changes, and she is told she approved already.
    await approve(h, progress, "U0ANN")
    notes = await until(lambda: emu.ephemerals if len(emu.ephemerals) == 2 else None)
    assert notes[1].user == "U0ANN" and "1 of 2 approvals" in (notes[1].text or "")
    again = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
    assert again["status"] == "pending" and len(again["approvals"]) == 1

    await approve(h, progress, "U0BOB")
    decided = (await h.client.get(f"/v1/approvals/{aid}?wait=5", headers=h.auth(key))).json()
    assert decided["status"] == "approved"
    assert [a["by"] for a in decided["approvals"]] == ["U0ANN", "U0BOB"]
    closed = await until(lambda: (m := emu.latest(card.channel, card.ts)) and not buttons(m.blocks) and m)
    text = json.dumps(closed.blocks, ensure_ascii=False)
    assert (
        "*Approved* by <@U0BOB>" in text
        and "*Approved 2 of 2* — <@U0ANN>" in text
        and "<@U0BOB>, <!date^" in text
    )
    assert len(emu.ephemerals) == 2, "the approver who completed the quorum sees the closed card"


async def test_the_requester_cannot_count_even_as_an_admin(world: Any) -> None:
    h, emu, key = world
    aid = await request(h, key, user="U0ANN", channel="C0ADMINS")
    (card,) = await until(lambda: [m for m in emu.messages if m.method == "chat.postMessage"])
    await approve(h, card, "U0ANN")
    (note,) = await until(lambda: emu.ephemerals)
    assert (
        note.user == "U0ANN"
        and "NOT_AN_APPROVER" in (note.text or "")
        and "separate_duties" in (note.text or "")
    )
    body = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
    assert body["status"] == "pending" and body["quorum"] == 2 and "approvals" not in body, "none counted yet"
