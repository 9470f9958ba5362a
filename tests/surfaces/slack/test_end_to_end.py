"""The Slack surface inside a real Cosigner app: agent request → card → click → decision."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from surfaces.slack.emulator import SlackEmulator
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere
from tests.harness import DEFAULT_POLICY, Harness, slack_app, until, until_async

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, SLACK_STATE)

SECRET = "e2e-signing-secret"
APP_ID = "A0COSIGNER"


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, str]]:
    async with slack_app(DEFAULT_POLICY, secret=SECRET, app_id=APP_ID, database_kind=db_kind) as (h, emu):
        yield h, emu, await h.create_tenant("acme")


async def request_refund(h: Harness, key: str, **surface: Any) -> str:
    body = {
        "executionId": "run_81",
        "toolCallId": "call_7",
        "toolName": "issue_refund",
        "parameters": {"orderId": "ord_4421", "amountCents": 12900, "note": "<!channel> ```"},
        "reason": "Customer says <@U0BOSS> approved it",
        "surface": {
            "type": "slack",
            "teamId": "T0ACME",
            "channelId": "C1",
            "userId": "U1",
            **surface,
        },
        "timeoutSeconds": 300,
    }
    response = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["approvalId"])


async def test_requester_approves_in_slack(world: Any) -> None:
    h, emu, key = world
    approval_id = await request_refund(h, key)
    card = await until(lambda: [m for m in emu.messages if m.method == "chat.postMessage"])
    posted = card[0]
    flat = json.dumps(posted.blocks)
    assert "&lt;!channel&gt;" in flat and "unverified claim" in flat and "<@U1>" in flat
    response = await emu.click(
        h.client,
        channel=posted.channel,
        ts=posted.ts,
        action_id="cosigner.approve",
        secret=SECRET,
        user="U1",
    )
    assert response.status_code == 200
    decided = await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))
    body = decided.json()
    assert body["status"] == "approved", body
    assert body["decidedBy"]["userId"] == "U1" and body["decidedBy"]["surface"] == "slack"
    updated = await until(
        lambda: (m := emu.latest(posted.channel, posted.ts)) and m.method == "chat.update" and m
    )
    assert not [b for b in updated.blocks if b["type"] == "actions"]
    assert "*Approved* by <@U1>" in json.dumps(updated.blocks)


async def test_a_stranger_is_refused_and_told_why(world: Any) -> None:
    h, emu, key = world
    approval_id = await request_refund(h, key)
    posted = (await until(lambda: emu.messages))[0]
    response = await emu.click(
        h.client,
        channel=posted.channel,
        ts=posted.ts,
        action_id="cosigner.approve",
        secret=SECRET,
        user="U9",
    )
    assert response.status_code == 200
    (note,) = await until(lambda: emu.ephemerals)
    assert note.user == "U9" and note.text is not None and "NOT_AN_APPROVER" in note.text
    still = await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))
    assert still.json()["status"] == "pending"


async def test_a_click_from_another_tenants_workspace_is_wrong_tenant(world: Any) -> None:
    h, emu, key = world
    await request_refund(h, key)
    posted = (await until(lambda: emu.messages))[0]
    await emu.click(
        h.client,
        channel=posted.channel,
        ts=posted.ts,
        action_id="cosigner.approve",
        secret=SECRET,
        user="U1",
        team="T0GLOBEX",
    )
    (note,) = await until(lambda: emu.ephemerals)
    assert note.text is not None and "WRONG_TENANT" in note.text


async def test_deny_with_a_comment(world: Any) -> None:
    h, emu, key = world
    approval_id = await request_refund(h, key)
    posted = (await until(lambda: emu.messages))[0]
    await emu.click(
        h.client,
        channel=posted.channel,
        ts=posted.ts,
        action_id="cosigner.deny",
        secret=SECRET,
        user="U1",
    )
    await until(lambda: emu.views)
    values = {"comment": {"comment": {"type": "plain_text_input", "value": "too much <!here>"}}}
    submitted = await emu.submit_view(h.client, secret=SECRET, values=values, user="U1", team="T0ACME")
    assert submitted.status_code == 200 and submitted.text == ""
    decided = (await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))).json()
    assert decided["status"] == "denied" and decided["comment"] == "too much <!here>"
    updated = await until(
        lambda: (m := emu.latest(posted.channel, posted.ts)) and m.method == "chat.update" and m
    )
    assert "too much &lt;!here&gt;" in json.dumps(updated.blocks)


async def test_a_replayed_click_does_not_decide_twice(world: Any) -> None:
    h, emu, key = world
    approval_id = await request_refund(h, key)
    posted = (await until(lambda: emu.messages))[0]
    for _ in range(2):
        r = await emu.click(
            h.client,
            channel=posted.channel,
            ts=posted.ts,
            action_id="cosigner.approve",
            secret=SECRET,
            user="U1",
        )
        assert r.status_code == 200
    (note,) = await until(lambda: emu.ephemerals)
    assert note.text is not None and "ALREADY_DECIDED" in note.text
    audit = (await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))).json()
    assert "approved" in json.dumps(audit)


async def test_an_unreachable_slack_fails_the_request_closed(world: Any) -> None:
    h, emu, key = world
    emu.fail_next("chat.postMessage", status=500, times=10)
    approval_id = await request_refund(h, key)

    async def status() -> str:
        r = await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))
        return str(r.json()["status"])

    assert await status() in ("denied", "pending")
    assert await until_async(lambda: _not_pending(status), seconds=10) == "denied"


async def _not_pending(status: Callable[[], Awaitable[str]]) -> str | None:
    s = await status()
    return None if s == "pending" else s
