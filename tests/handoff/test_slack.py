"""Handoffs in Slack: a Done/Cancel card, really signed clicks through Bolt, a real expect endpoint."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from contracts.ports import ApprovalDesk
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.emulator import SlackEmulator
from surfaces.slack.interactions import block_actions_payload, send_signed
from tests.databases import DESK, HANDOFFS, postgres_elsewhere
from tests.handoff_world import (
    EXPECT_SECRET,
    LOOPBACK,
    SECRET_ENV,
    expect_server,
    handoff_policy,
    handoff_request,
)
from tests.harness import Harness, ManualClock, cosigner_app, until
from tests.surfaces.slack.test_full_call import modal_text

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, HANDOFFS)

SECRET = "handoff-signing-secret"
APP_ID = "A0COSIGNER"
SURFACE = {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"}
TENANTS = '[tenants.acme]\nslack_team = "T0ACME"\n\n[tenants.globex]\nslack_team = "T0GLOBEX"'


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, EXPECT_SECRET)


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, Any, str]]:
    clock = ManualClock()
    async with (
        expect_server(clock) as (shop, url),
        SlackEmulator.running(team_id="T0ACME", app_id=APP_ID) as emu,
    ):
        config = SlackConfig(signing_secret=SECRET, bot_token="xoxb-acme", api_url=emu.api_url, app_id=APP_ID)

        def slack(desk: ApprovalDesk) -> SlackAdapter:
            return SlackAdapter(config, desk)

        policy = handoff_policy(url, TENANTS)
        async with cosigner_app(
            policy, surfaces=[slack], clock=clock, database_kind=db_kind, callback_allow=LOOPBACK
        ) as h:
            yield h, emu, shop, await h.create_tenant("acme")


async def posted_card(h: Harness, emu: SlackEmulator, key: str, call: str = "call_1") -> tuple[str, Any]:
    response = await h.client.post("/v1/approvals", json=handoff_request(SURFACE, call), headers=h.auth(key))
    assert response.status_code == 201 and response.json()["type"] == "handoff_start", response.text
    aid = response.json()["approvalId"]
    cards = await until(
        lambda: [m for m in emu.messages if m.method == "chat.postMessage" and aid in json.dumps(m.blocks)]
    )
    await delivered(h, aid)
    return aid, cards[0]


async def click(h: Harness, emu: SlackEmulator, card: Any, action: str, **fields: Any) -> httpx.Response:
    """A signed click on a button of the card as it was posted (even after it was updated)."""
    (button,) = [
        {**e, "block_id": b["block_id"]}
        for b in card.blocks
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == action
    ]
    fields.setdefault("user", "U1")
    fields.setdefault("team", "T0ACME")
    fields.setdefault("channel", card.channel)
    payload = block_actions_payload(
        action={k: button[k] for k in ("type", "block_id", "action_id", "value", "text")},
        blocks=card.blocks,
        ts=card.ts,
        app_id=APP_ID,
        response_url=emu.response_url,
        **fields,
    )
    return await send_signed(
        h.client, "/slack/events", payload, secret=SECRET, timestamp=str(int(time.time()))
    )


async def decided(h: Harness, key: str, aid: str) -> dict[str, Any]:
    waited = h.client.get(f"/v1/approvals/{aid}?wait=10", headers=h.auth(key))
    body: dict[str, Any] = (await asyncio.wait_for(waited, 10)).json()
    return body


async def updated(emu: SlackEmulator, card: Any) -> Any:
    return await until(lambda: (m := emu.latest(card.channel, card.ts)) and m.method == "chat.update" and m)


async def delivered(h: Harness, aid: str) -> None:
    async def check() -> bool:
        placed = await h.desk.placed(aid)
        return placed is not None and placed.delivered is not None and bool(placed.delivered.message_refs)

    for _ in range(250):
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not delivered")


async def test_the_card_offers_done_and_cancel_only(world: Any) -> None:
    h, emu, _, key = world
    _, card = await posted_card(h, emu, key)
    flat = json.dumps(card.blocks, ensure_ascii=False)
    actions = [e["action_id"] for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
    assert actions == ["cosigner.done", "cosigner.cancel", "cosigner.full_call"]
    assert "Approve" not in flat and "Deny" not in flat and "for this run" not in flat
    assert "Publishing needs the verification code" in flat
    assert "1. Open Settings → Publishing" in flat and "3. Press Publish" in flat
    assert "[REDACTED]" in flat and "482910" not in flat
    assert "Who must do it" in flat and "<@U1>" in flat and "Expires" in flat


async def test_done_is_checked_then_fails_or_completes(world: Any) -> None:
    h, emu, shop, key = world
    aid, card = await posted_card(h, emu, key)
    assert (await click(h, emu, card, "cosigner.done")).status_code == 200
    body = await decided(h, key, aid)
    assert body["status"] == "failed" and body["detail"] == "change chg_1 is not published"
    assert body["decidedBy"] == {"kind": "person", "surface": "slack", "userId": "U1", "teamId": "T0ACME"}
    closed = json.dumps((await updated(emu, card)).blocks)
    assert "Not confirmed" in closed and "is not published" in closed and '"actions"' not in closed

    aid2, card2 = await posted_card(h, emu, key, "call_2")
    shop.publish("chg_1")
    await click(h, emu, card2, "cosigner.done")
    body = await decided(h, key, aid2)
    assert body["status"] == "completed" and body["receipt"]["detail"] == "change chg_1 is live"
    closed = json.dumps((await updated(emu, card2)).blocks)
    assert "Done and confirmed" in closed and "checked with the application" in closed
    assert [c["parameters"]["ownerPin"] for c in shop.calls] == ["482910", "482910"]


async def test_cancel_and_expiry(world: Any) -> None:
    h, emu, shop, key = world
    aid, card = await posted_card(h, emu, key)
    await click(h, emu, card, "cosigner.cancel")
    body = await decided(h, key, aid)
    assert body["status"] == "cancelled" and body["code"] == "HANDOFF_CANCELLED"
    assert "Cancelled" in json.dumps((await updated(emu, card)).blocks)

    aid2, card2 = await posted_card(h, emu, key, "call_2")
    h.advance(301)
    body = await decided(h, key, aid2)
    assert body["status"] == "expired" and body["code"] == "HANDOFF_TIMEOUT"
    assert "nobody pressed Done in time" in json.dumps((await updated(emu, card2)).blocks)
    shop.publish("chg_1")
    await click(h, emu, card2, "cosigner.done")  # a late Done on the card as it was posted
    note = await until(lambda: [e for e in emu.ephemerals if "APPROVAL_EXPIRED" in (e.text or "")])
    assert note and shop.calls == []


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"user": "U9"}, "NOT_AN_APPROVER"),
        ({"team": "T0GLOBEX"}, "WRONG_TENANT"),
        ({"channel": "C2"}, "WRONG_CONVERSATION"),
    ],
)
async def test_done_from_the_wrong_person_tenant_or_channel_is_refused(
    world: Any, fields: dict[str, str], code: str
) -> None:
    h, emu, shop, key = world
    shop.publish("chg_1")
    aid, card = await posted_card(h, emu, key)
    assert (await click(h, emu, card, "cosigner.done", **fields)).status_code == 200
    (note,) = await until(lambda: emu.ephemerals)
    assert note.text is not None and code in note.text
    current = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
    assert current["status"] == "pending" and shop.calls == []


async def test_two_done_clicks_at_once_make_one_check(world: Any) -> None:
    h, emu, shop, key = world
    shop.publish("chg_1")
    aid, card = await posted_card(h, emu, key)
    clicks = await asyncio.gather(*(click(h, emu, card, "cosigner.done") for _ in range(3)))
    assert all(c.status_code == 200 for c in clicks)
    assert (await decided(h, key, aid))["status"] == "completed"
    notes = await until(lambda: len(emu.ephemerals) == 2 and emu.ephemerals)
    assert all("ALREADY_DECIDED" in (n.text or "") for n in notes)
    assert len(shop.calls) == 1


async def test_a_long_value_cannot_hide_a_field_of_a_handoff(world: Any) -> None:
    """A handoff card shows every field as an approval card does: a long value is cut and
    said, the next field stays on the card, and See the full call shows the rest."""
    h, emu, _, key = world
    body = handoff_request(SURFACE, "call_long")
    body["parameters"] = {"changeId": "chg_1", "note": "n" * 3500, "ownerPin": "482910"}
    response = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert response.status_code == 201, response.text
    aid = response.json()["approvalId"]
    (card,) = await until(
        lambda: [m for m in emu.messages if m.method == "chat.postMessage" and aid in json.dumps(m.blocks)]
    )
    await delivered(h, aid)
    flat = json.dumps(card.blocks, ensure_ascii=False)
    assert '\\"changeId\\": \\"chg_1\\"' in flat and '\\"ownerPin\\": \\"[REDACTED]\\"' in flat
    assert "482910" not in flat
    assert "1 value cut: see the full call" in flat
    opened = await emu.click(
        h.client, channel=card.channel, ts=card.ts, action_id="cosigner.full_call", secret=SECRET, user="U1"
    )
    assert opened.status_code == 200
    view = (await until(lambda: emu.views))[-1].view
    assert '"note": "' + "n" * 3500 + '"' in modal_text(view), "the modal shows the value whole"
    assert "482910" not in json.dumps(view)
    assert (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()["status"] == "pending"
