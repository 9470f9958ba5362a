"""What the approver sees is what runs: every field on the card, masks in place, the full-call modal.

Through the real app and the Slack emulator, with really signed clicks.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from surfaces.slack.emulated_methods import OpenedView, Recorded
from surfaces.slack.emulator import SlackEmulator
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere
from tests.harness import DEFAULT_POLICY, Harness, slack_app, until

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, SLACK_STATE)

SECRET = "full-call-signing-secret"
APP_ID = "A0COSIGNER"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiJwYXlvdXRzIiwiYW1vdW50Ijo1MDAwMCwiaWF0IjoxNzAwMDAwMDAwfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
HIDING = {"to": f"payouts@attacker.example {JWT}", "body": "Wire $50,000 to acct 4111111111111111 today"}
PUSHING = {"note": "n" * 3500, "to": "payouts@attacker.example"}


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, str]]:
    async with slack_app(DEFAULT_POLICY, secret=SECRET, app_id=APP_ID, database_kind=db_kind) as (h, emu):
        yield h, emu, await h.create_tenant("acme")


async def ask(h: Harness, key: str, parameters: dict[str, Any], call: str = "call_1") -> dict[str, Any]:
    body = {
        "executionId": "run_1",
        "toolCallId": call,
        "toolName": "issue_refund",
        "parameters": {"amountCents": 900000, **parameters},
        "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
    }
    response = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert response.status_code == 201, response.text
    start: dict[str, Any] = response.json()
    return start


async def card_of(h: Harness, emu: SlackEmulator, approval_id: str) -> Recorded:
    await h.delivered(approval_id)
    posts = [m for m in emu.messages if m.method == "chat.postMessage"]
    return posts[-1]


async def open_full_call(h: Harness, emu: SlackEmulator, card: Recorded, user: str = "U1") -> Any:
    response = await emu.click(
        h.client, channel=card.channel, ts=card.ts, action_id="cosigner.full_call", secret=SECRET, user=user
    )
    assert response.status_code == 200
    return response


def modal_text(view: dict[str, Any]) -> str:
    """The code blocks of a full-call page joined back into the text they split."""
    pieces = [b["text"]["text"] for b in view["blocks"][1:] if b["type"] == "section"]
    inner = [re.fullmatch(r"```\n(.*)\n```", p, re.DOTALL) for p in pieces]
    return "".join(m.group(1) for m in inner if m)


def confirm_of(card: Recorded) -> str:
    actions = next(b for b in card.blocks if b["type"] == "actions")
    approve = next(e for e in actions["elements"] if e["action_id"] == "cosigner.approve")
    return str(approve["confirm"]["text"]["text"])


async def test_a_credential_inside_a_value_hides_only_itself(world: Any) -> None:
    h, emu, key = world
    start = await ask(h, key, HIDING)
    masked_to = f"payouts@attacker.example [hidden: JWT, {len(JWT)} chars]"
    masked_body = "Wire $50,000 to acct [hidden: card number, 16 chars] today"
    # The echo: masks in place, never the whole value.
    assert start["parameters"]["to"] == masked_to and start["parameters"]["body"] == masked_body
    echo = (await h.client.get(f"/v1/approvals/{start['approvalId']}", headers=h.auth(key))).json()
    assert echo["parameters"] == start["parameters"]
    card = await card_of(h, emu, start["approvalId"])
    flat = json.dumps(card.blocks)
    assert masked_to in flat and masked_body.replace("$", "$") in flat
    assert JWT not in flat and "4111111111111111" not in flat
    assert "2 values partly hidden: see the full call" in flat
    assert "partly hidden (credential-looking text): body, to" in confirm_of(card)

    await open_full_call(h, emu, card)
    view = (await until(lambda: emu.views))[-1].view
    text = modal_text(view)
    assert f'"to": "{masked_to}"' in text and f'"body": "{masked_body}"' in text
    assert JWT not in json.dumps(view), "secrets never leave redacted, not even in the modal"
    assert start["approvalId"] in view["private_metadata"]


async def test_a_long_value_cannot_push_the_next_field_off_the_card(world: Any) -> None:
    h, emu, key = world
    start = await ask(h, key, PUSHING)
    assert start["parameters"]["note"] == "n" * 3500, "the echo is never cut"
    card = await card_of(h, emu, start["approvalId"])
    flat = json.dumps(card.blocks)
    assert '\\"to\\": \\"payouts@attacker.example\\"' in flat
    assert "1 value cut: see the full call" in flat
    assert "cut: note" in confirm_of(card)

    await open_full_call(h, emu, card)
    view = (await until(lambda: emu.views))[-1].view
    text = modal_text(view)
    assert '"note": "' + "n" * 3500 + '"' in text and '"to": "payouts@attacker.example"' in text


async def test_a_large_call_is_paged_and_each_page_is_checked(world: Any) -> None:
    h, emu, key = world
    big = {f"line_{i:02}": f"{i:02} " + "x" * 997 for i in range(50)}
    start = await ask(h, key, big)
    card = await card_of(h, emu, start["approvalId"])
    assert len(card.blocks) <= 50
    await open_full_call(h, emu, card)
    opened: OpenedView = (await until(lambda: emu.views))[-1]
    assert len(opened.view["blocks"]) <= 100
    assert "Page 1 of 4" in json.dumps(opened.view)
    every = modal_text(opened.view)
    assert '"line_00"' in every and '"line_49"' not in every

    def updated(times: int) -> bool:
        return opened.updates == times

    for page in (2, 3, 4):
        pressed = await emu.click_in_view(
            h.client, action_id="cosigner.full_call_next", secret=SECRET, user="U1"
        )
        assert pressed.status_code == 200
        await until(functools.partial(updated, page - 1))
        assert f"Page {page} of 4" in json.dumps(opened.view)
        every += modal_text(opened.view)
    assert '"line_49"' in every
    assert all(f'"line_{i:02}": "{i:02} ' + "x" * 997 + '"' in every for i in range(50)), "nothing is cut"

    # A stranger can neither turn the page nor open the call.
    await emu.click_in_view(h.client, action_id="cosigner.full_call_previous", secret=SECRET, user="U9")
    await emu.click(
        h.client, channel=card.channel, ts=card.ts, action_id="cosigner.full_call", secret=SECRET, user="U9"
    )
    await until(lambda: emu.ephemerals)
    # The approver's own press turns the page once more; the stranger's did not count.
    await emu.click_in_view(h.client, action_id="cosigner.full_call_previous", secret=SECRET, user="U1")
    await until(lambda: opened.updates >= 4)
    assert "Page 3 of 4" in json.dumps(opened.view)
    assert opened.updates == 4 and len(emu.views) == 1


async def test_only_an_approver_may_read_the_full_call(world: Any) -> None:
    h, emu, key = world
    start = await ask(h, key, PUSHING)
    card = await card_of(h, emu, start["approvalId"])
    await open_full_call(h, emu, card, user="U9")
    (told,) = await until(lambda: emu.ephemerals)
    assert told.user == "U9" and "NOT_AN_APPROVER" in (told.text or "")
    assert not emu.views
    status = (await h.client.get(f"/v1/approvals/{start['approvalId']}", headers=h.auth(key))).json()
    assert status["status"] == "pending", "reading decides nothing"
