"""Answer many at once in Slack, through the emulator and really signed presses: the batch
card lists what waits, Approve all answers each call on its own, a stale press decides nothing."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.approvals.batches import group_key
from bot.workers.batch_cards import BatchCards
from contracts.grants import verify_grant
from storage import batches
from surfaces.slack.batch import BATCH_APPROVE, BATCH_DENY
from surfaces.slack.emulator import SlackEmulator
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere
from tests.harness import Harness, press, slack_app, until, until_async

# On PostgreSQL, the storage path of the tests marked runs in the tests these name.
POSTGRES_ELSEWHERE = postgres_elsewhere(DESK, SLACK_STATE)

SECRET = "batch-signing-secret"
APP_ID = "A0COSIGNER"
POLICY = """
[tools.issue_credit]
kind = "danger"
approvers = ["tenant_admins"]

[tools.close_ticket]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2

[tools.wipe_cache]
kind = "danger"
approvers = ["tenant_admins"]
separate_duties = true

[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ANN", "U0BOB", "U0CAT"] }
admin_channel = "C0ADMINS"
"""


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, str]]:
    async with slack_app(POLICY, secret=SECRET, app_id=APP_ID, database_kind=db_kind) as (h, emu):
        yield h, emu, await h.create_tenant("acme")


async def ask(
    h: Harness, key: str, n: int, tool: str = "issue_credit", user: str = "U1", **params: Any
) -> str:
    body = {
        "executionId": "run_1",
        "toolCallId": f"call_{tool}_{n}",
        "toolName": tool,
        "parameters": {"customer": f"cus_{n}", "amountCents": 100 * n, **params},
        "reason": f"refund {n}",
        "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": user},
    }
    h.clock.advance(1)  # oldest first on the batch card: each a second after the one before
    r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


def actions(blocks: list[dict[str, Any]]) -> list[str]:
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


def batch_cards(emu: SlackEmulator) -> list[Any]:
    return [m for m in emu.messages if m.method == "chat.postMessage" and BATCH_APPROVE in actions(m.blocks)]


async def posted(h: Harness, emu: SlackEmulator, count: int = 1) -> Any:
    """The batch card once it is posted and recorded (a press is checked against the record)."""
    cards = await until(lambda: len(found := batch_cards(emu)) >= count and found)
    card = cards[count - 1]

    async def recorded() -> Any:
        return await h.parts.db.run_read(lambda tx: batches.at_message(tx, card.channel, card.ts))

    await until_async(recorded)
    return card


def listed(blocks: list[dict[str, Any]]) -> list[str]:
    value = next(e["value"] for b in blocks if b["type"] == "actions" for e in b["elements"])
    return [item.split("|")[0] for item in value.split(",")]


async def latest(emu: SlackEmulator, card: Any, check: Any) -> Any:
    return await until(lambda: (m := emu.latest(card.channel, card.ts)) is not None and check(m) and m)


def approve_all(h: Harness, card: Any, user: str, action: str = BATCH_APPROVE) -> Any:
    return press(h.client, card, action, secret=SECRET, app_id=APP_ID, user=user, team="T0ACME")


async def status(h: Harness, key: str, aid: str) -> dict[str, Any]:
    return dict((await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json())


async def told(emu: SlackEmulator, user: str, count: int = 1) -> str:
    mine = await until(lambda: len(e := [m for m in emu.ephemerals if m.user == user]) >= count and e)
    return str(mine[count - 1].text)


async def test_two_waiting_are_offered_together_and_approved_each_with_its_own_grant(world: Any) -> None:
    h, emu, key = world
    first, second = await ask(h, key, 1), await ask(h, key, 2, token="sk_live_abcdefghijklmnop1234")
    card = await posted(h, emu)
    assert card.channel == "C0ADMINS"
    assert listed(card.blocks) == [first, second]
    flat = json.dumps(card.blocks)
    assert "Approve all 2" in flat and "Deny all" in flat and "sha256:" in flat
    assert '\\"customer\\": \\"cus_2\\"' in flat or "cus_2" in flat
    assert "sk_live_abcdefghijklmnop1234" not in flat, "redacted as on each card"
    singles = [
        m for m in emu.messages if m.method == "chat.postMessage" and "cosigner.approve" in actions(m.blocks)
    ]
    assert len(singles) == 2, "each request keeps its own card"

    assert (await approve_all(h, card, "U0ANN")).status_code == 200
    bodies = await closed_all(h, key, (first, second))
    assert [b["status"] for b in bodies] == ["approved", "approved"]
    assert {b["decidedBy"]["userId"] for b in bodies} == {"U0ANN"}
    grants = [b["grant"] for b in bodies]
    assert grants[0] != grants[1], "each call its own grant"
    keys = (await h.client.get("/v1/keys")).json()
    calls = [{"customer": "cus_1", "amountCents": 100}, {"customer": "cus_2", "amountCents": 200}]
    calls[1]["token"] = "sk_live_abcdefghijklmnop1234"
    for b, call in zip(bodies, calls, strict=True):
        claims = verify_grant(
            b["grant"], keys, tool_name="issue_credit", parameters=call, approval_id=b["approvalId"]
        )
        assert claims.approval_id == b["approvalId"]
    assert "approved all 2" in (await told(emu, "U0ANN"))
    withdrawn = await latest(emu, card, lambda m: not actions(m.blocks))
    assert "no longer offered" in json.dumps(withdrawn.blocks)


async def closed_all(h: Harness, key: str, ids: tuple[str, ...]) -> list[dict[str, Any]]:
    """Each approval's body once it closed, in the order given."""

    async def bodies() -> list[dict[str, Any]] | None:
        found = [await status(h, key, aid) for aid in ids]
        return found if all(b["status"] != "pending" for b in found) else None

    return await until_async(bodies)


@POSTGRES_ELSEWHERE
async def test_a_later_request_updates_the_card_and_the_old_press_decides_nothing(world: Any) -> None:
    h, emu, key = world
    first, second = await ask(h, key, 1), await ask(h, key, 2)
    card = await posted(h, emu)
    third = await ask(h, key, 3)
    updated = await latest(emu, card, lambda m: m.method == "chat.update" and len(listed(m.blocks)) == 3)
    assert listed(updated.blocks) == [first, second, third]
    assert "Approve all 3" in json.dumps(updated.blocks)

    assert (await approve_all(h, card, "U0ANN")).status_code == 200  # the button of two
    text = await told(emu, "U0ANN")
    assert "PARAMETERS_MISMATCH" in text and "Nothing was decided" in text
    for aid in (first, second, third):
        assert (await status(h, key, aid))["status"] == "pending"
    audit = (await h.client.get(f"/v1/approvals/{first}/audit", headers=h.auth(key))).json()
    assert [e["event"] for e in audit["events"]] == ["requested", "delivered"] or all(
        e["event"] not in ("approved", "approval_counted") for e in audit["events"]
    )

    assert (await approve_all(h, updated, "U0BOB", BATCH_DENY)).status_code == 200
    bodies = await closed_all(h, key, (first, second, third))
    assert {b["status"] for b in bodies} == {"denied"}


@POSTGRES_ELSEWHERE
async def test_a_quorum_call_is_only_counted(world: Any) -> None:
    h, emu, key = world
    first, second = await ask(h, key, 1, "close_ticket"), await ask(h, key, 2, "close_ticket")
    card = await posted(h, emu)
    assert (await approve_all(h, card, "U0ANN")).status_code == 200
    assert "still waiting for more approvers" in (await told(emu, "U0ANN"))
    for aid in (first, second):
        body = await status(h, key, aid)
        assert body["status"] == "pending" and [a["by"] for a in body["approvals"]] == ["U0ANN"]
    # The same list still waits (counted, not changed): a second approver's Approve all closes both.
    assert (await approve_all(h, card, "U0BOB")).status_code == 200
    bodies = await closed_all(h, key, (first, second))
    assert {b["status"] for b in bodies} == {"approved"}
    assert [a["by"] for a in bodies[0]["approvals"]] == ["U0ANN", "U0BOB"]


@POSTGRES_ELSEWHERE
async def test_the_requester_pressing_approve_all_is_refused(world: Any) -> None:
    h, emu, key = world
    first, second = (
        await ask(h, key, 1, "wipe_cache", user="U0ANN"),
        await ask(h, key, 2, "wipe_cache", user="U0ANN"),
    )
    card = await posted(h, emu)
    assert (await approve_all(h, card, "U0ANN")).status_code == 200
    text = await told(emu, "U0ANN")
    assert "NOT_AN_APPROVER" in text and "separate_duties" in text
    for aid in (first, second):
        assert (await status(h, key, aid))["status"] == "pending"
    assert (await approve_all(h, card, "U0BOB")).status_code == 200
    bodies = await closed_all(h, key, (first, second))
    assert {b["status"] for b in bodies} == {"approved"}


@POSTGRES_ELSEWHERE
async def test_a_stranger_decides_nothing(world: Any) -> None:
    h, emu, key = world
    first, second = await ask(h, key, 1), await ask(h, key, 2)
    card = await posted(h, emu)
    assert (await approve_all(h, card, "U9STRANGER")).status_code == 200
    assert "NOT_AN_APPROVER" in (await told(emu, "U9STRANGER"))
    for aid in (first, second):
        assert (await status(h, key, aid))["status"] == "pending"


@POSTGRES_ELSEWHERE
async def test_a_batch_button_on_another_message_decides_nothing(world: Any) -> None:
    h, emu, key = world
    first, second = await ask(h, key, 1), await ask(h, key, 2)
    card = await posted(h, emu)
    single = next(m for m in emu.messages if m.method == "chat.postMessage" and m.ts != card.ts)
    # The batch button, replayed as though it sat on one request's own card.
    r = await press(
        h.client,
        card,
        BATCH_APPROVE,
        secret=SECRET,
        app_id=APP_ID,
        user="U0ANN",
        team="T0ACME",
        channel=single.channel,
        ts=single.ts,
    )
    assert r.status_code == 200
    assert "WRONG_CONVERSATION" in (await told(emu, "U0ANN"))
    for aid in (first, second):
        assert (await status(h, key, aid))["status"] == "pending"


@POSTGRES_ELSEWHERE
async def test_a_call_too_long_to_list_whole_is_never_batched(world: Any) -> None:
    h, emu, key = world
    await ask(h, key, 1)
    long = await ask(h, key, 2, note="x" * 3500)
    await h.delivered(long)
    singles = await until(
        lambda: len(s := [m for m in emu.messages if m.method == "chat.postMessage"]) >= 2 and s
    )
    third = await ask(h, key, 3)
    await h.delivered(third)
    # The worker refreshes the group after each delivery; once more here, so that a batch
    # that would be offered is surely posted before looking.
    await BatchCards(h.parts.surfaces, db=h.parts.db, clock=h.clock).refresh(third)
    # Two short ones now wait beside the long one: the three do not fit whole, so no batch.
    assert not batch_cards(emu), "a batch that cannot show every call whole is not offered"
    assert len(singles) >= 2


@POSTGRES_ELSEWHERE
async def test_a_step_up_call_is_never_offered_in_a_batch(world: Any) -> None:
    # Its Approve needs a passkey on its own inbox page: an "Approve all" could not count for it.
    h, _, key = world
    aid = await ask(h, key, 1)
    await h.delivered(aid)
    rec = await h.engine.record(aid, None)
    assert group_key(rec) is not None
    assert group_key(dataclasses.replace(rec, step_up=True)) is None
