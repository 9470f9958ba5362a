"""Reminders and escalations through the Slack emulator, with really signed clicks.

A request nobody answers gets one reminder in its card's thread, then is posted to the
admin channel (and later to staff) while still pending; the escalated card's approvers may
answer there, and only there, and only once it was escalated; every card is closed in place.
Time moves by the app's manual clock; a restart and a second replica never repeat a step.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy import select

from bot.workers.follow_ups import FollowUps
from contracts.enums import SurfaceType
from contracts.ports import ApprovalDesk, Delivered
from storage import jobs as outbox
from storage.database import Database
from storage.tables import jobs
from storage.work import Work
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.emulated_methods import Recorded
from surfaces.slack.emulator import SlackEmulator
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere
from tests.harness import (
    Harness,
    ManualClock,
    cosigner_app,
    database,
    postgres_url,
    press,
    until,
    until_async,
)

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, SLACK_STATE)

SECRET = "follow-ups-signing-secret"
APP_ID = "A0COSIGNER"
POLICY = """
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
timeout = "1h"
remind_after = "5m"
escalate = [{ after = "10m", to = "tenant_admins" }, { after = "30m", to = "staff" }]

[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ADMIN"] }
admin_channel = "C0ADMINS"

[staff]
slack_team = "T0OPS"
channel = "C0STAFF"
users = ["U0OPS1"]
"""
MINUTE = 60.0


@asynccontextmanager
async def slack_world(
    emu: SlackEmulator,
    *,
    db: Database | None = None,
    clock: ManualClock | None = None,
    db_kind: str = "sqlite",
    run_workers: bool = True,
) -> AsyncIterator[Harness]:
    config = SlackConfig(signing_secret=SECRET, bot_token="xoxb-acme", api_url=emu.api_url, app_id=APP_ID)

    def factory(desk: ApprovalDesk) -> SlackAdapter:
        return SlackAdapter(config, desk)

    async with cosigner_app(
        POLICY, surfaces=[factory], db=db, clock=clock, database_kind=db_kind, run_workers=run_workers
    ) as h:
        yield h


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, str]]:
    async with SlackEmulator.running(team_id="T0ACME", app_id=APP_ID) as emu:
        async with slack_world(emu, db_kind=db_kind) as h:
            yield h, emu, await h.create_tenant("acme")


async def ask(h: Harness, key: str, call: str = "call_1", **extra: Any) -> str:
    body = {
        "executionId": "run_1",
        "toolCallId": call,
        "toolName": "issue_refund",
        "parameters": {"orderId": "ord_4421", "amountCents": 12900},
        "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
        **extra,
    }
    response = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["approvalId"])


def posted(emu: SlackEmulator, channel: str) -> list[Recorded]:
    return [m for m in emu.messages if m.method == "chat.postMessage" and m.channel == channel]


def cards(emu: SlackEmulator, channel: str) -> list[Recorded]:
    """Posted cards (with buttons), not thread replies."""
    return [m for m in posted(emu, channel) if m.blocks]


def closed_saying(emu: SlackEmulator, where: Recorded, says: str) -> Callable[[], Recorded | None]:
    """A wait for the card at `where` updated to say `says`, its buttons gone."""

    def shown() -> Recorded | None:
        m = emu.latest(where.channel, where.ts)
        if m is None or m.method != "chat.update" or says not in json.dumps(m.blocks):
            return None
        return None if [b for b in m.blocks if b["type"] == "actions"] else m

    return shown


async def events(h: Harness, key: str, approval_id: str) -> list[dict[str, Any]]:
    response = await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["events"]
    return found


async def named(h: Harness, key: str, approval_id: str, event: str) -> list[dict[str, Any]]:
    return [e for e in await events(h, key, approval_id) if e["event"] == event]


async def click(h: Harness, emu: SlackEmulator, card: Recorded, user: str, **fields: Any) -> None:
    response = await emu.click(
        h.client,
        channel=card.channel,
        ts=card.ts,
        action_id="cosigner.approve",
        secret=SECRET,
        user=user,
        **fields,
    )
    assert response.status_code == 200


async def test_remind_then_escalate_then_an_admin_approves_on_the_escalated_card(world: Any) -> None:
    h, emu, key = world
    approval_id = await ask(h, key)
    (card,) = await until(lambda: cards(emu, "C1"))
    h.advance(4 * MINUTE)
    assert await named(h, key, approval_id, "reminded") == []

    h.advance(1 * MINUTE)  # 5 minutes: the one reminder, in the card's thread
    reply = await until(lambda: [m for m in posted(emu, "C1") if m.thread_ts == card.ts])
    assert len(reply) == 1 and reply[0].text is not None
    assert "<@U1>" in reply[0].text and "Reminder" in reply[0].text and "issue_refund" in reply[0].text
    (reminded,) = await until_async(lambda: named(h, key, approval_id, "reminded"))
    assert reminded["data"]["approvers"] == ["U1"] and reminded["data"]["sent"] is True

    h.advance(5 * MINUTE)  # 10 minutes: the admin channel gets the card too
    (escalated,) = await until(lambda: cards(emu, "C0ADMINS"))
    buttons = [e["action_id"] for b in escalated.blocks if b["type"] == "actions" for e in b["elements"]]
    assert "cosigner.approve" in buttons and "cosigner.deny" in buttons
    # Always deny is the requester's own (their one approver's); the admins are not offered it.
    originals = [e["action_id"] for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
    assert "cosigner.always_deny" in originals and "cosigner.always_deny" not in buttons
    updated = await until(
        lambda: (m := emu.latest(card.channel, card.ts)) and m.method == "chat.update" and m
    )
    flat = json.dumps(updated.blocks)
    assert "Escalated to tenant admins at <!date^" in flat and "{time}" in flat
    assert [b for b in updated.blocks if b["type"] == "actions"], "still pending: buttons stay"
    (step,) = await named(h, key, approval_id, "escalated")
    assert step["data"]["to"] == "tenant_admins" and step["data"]["route"]["channel_id"] == "C0ADMINS"

    # The requester is no approver on the admins' card, nor the admin on the requester's.
    await click(h, emu, escalated, "U1")
    await click(h, emu, card, "U0ADMIN")
    notes = await until(lambda: len(emu.ephemerals) >= 2 and emu.ephemerals)
    assert all(n.text is not None and "NOT_AN_APPROVER" in n.text for n in notes)
    assert (await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))).json()[
        "status"
    ] == "pending"

    await click(h, emu, escalated, "U0ADMIN")
    decided = (await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))).json()
    assert decided["status"] == "approved" and decided["decidedBy"]["userId"] == "U0ADMIN"
    assert "escalations" not in decided, "the wire is unchanged"
    for where in (card, escalated):
        closed = await until(closed_saying(emu, where, ""))
        assert "*Approved* by <@U0ADMIN>" in json.dumps(closed.blocks)

    # A click on the escalated card after the decision is refused like any late click.
    before = len(emu.ephemerals)
    late = await press(
        h.client, escalated, secret=SECRET, app_id=APP_ID, user="U0ADMIN", team="T0ACME", user_team="T0ACME"
    )
    assert late.status_code == 200
    (told,) = await until(lambda: emu.ephemerals[before:])
    assert told.text is not None and "ALREADY_DECIDED" in told.text

    h.advance(25 * MINUTE)  # past the staff step: the request is closed, so nothing goes out
    await until_async(lambda: _outbox_empty(h), seconds=60)
    assert cards(emu, "C0STAFF") == []
    assert len(posted(emu, "C1")) == 2  # the card and the one reminder


async def test_an_escalated_request_that_nobody_answers_expires_and_every_card_says_so(world: Any) -> None:
    h, emu, key = world
    approval_id = await ask(h, key)
    (card,) = await until(lambda: cards(emu, "C1"))
    h.advance(10 * MINUTE)
    (admins,) = await until(lambda: cards(emu, "C0ADMINS"))
    h.advance(20 * MINUTE)
    (staff,) = await until(lambda: cards(emu, "C0STAFF"))
    h.advance(31 * MINUTE)  # past the hour: expiry means deny
    decided = (await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))).json()
    assert decided["status"] == "expired"
    for where in (card, admins, staff):
        await until(closed_saying(emu, where, "Expired"))
    last = emu.latest(card.channel, card.ts)
    assert last is not None
    flat = json.dumps(last.blocks)
    assert "Escalated to tenant admins at" in flat and "Escalated to staff at" in flat


async def test_a_cancel_after_the_escalation_closes_every_card(world: Any) -> None:
    h, emu, key = world
    approval_id = await ask(h, key)
    (card,) = await until(lambda: cards(emu, "C1"))
    h.advance(10 * MINUTE)
    (admins,) = await until(lambda: cards(emu, "C0ADMINS"))
    response = await h.client.post(f"/v1/approvals/{approval_id}/cancel", headers=h.auth(key))
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    for where in (card, admins):
        await until(closed_saying(emu, where, "Cancelled"))


async def test_staff_answer_from_their_own_workspace_once_escalated(world: Any) -> None:
    h, emu, key = world
    approval_id = await ask(h, key)
    await until(lambda: cards(emu, "C1"))
    h.advance(30 * MINUTE)
    (staff,) = await until(lambda: cards(emu, "C0STAFF"))

    # A click counts once Cosigner has recorded where the escalated card was posted (as Slack
    # refuses a click before the card's message is known); the receipt follows the post.
    # The staff's is the second step: the tenant admins' receipt (step 0) does not say it.
    async def staff_card_known() -> bool:
        return any(e["data"]["step"] == 1 for e in await named(h, key, approval_id, "escalation_delivered"))

    await until_async(staff_card_known)
    await click(h, emu, staff, "U0OPS1", team="T0OPS", user_team="T0OPS")
    decided = (await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))).json()
    assert decided["status"] == "approved" and decided["decidedBy"]["userId"] == "U0OPS1"


async def test_a_request_decided_before_its_steps_takes_none(world: Any) -> None:
    h, emu, key = world
    approval_id = await ask(h, key)
    (card,) = await until(lambda: cards(emu, "C1"))
    await click(h, emu, card, "U1")
    decided = (await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))).json()
    assert decided["status"] == "approved"
    h.advance(61 * MINUTE)
    await until_async(lambda: _outbox_empty(h), seconds=60)
    assert [m.channel for m in emu.messages if m.method == "chat.postMessage"] == ["C1"]
    assert await named(h, key, approval_id, "reminded") == []
    assert await named(h, key, approval_id, "escalated") == []


async def test_an_agent_asking_less_time_than_a_step_skips_it(world: Any) -> None:
    h, emu, key = world
    approval_id = await ask(h, key, timeoutSeconds=420)  # 7 minutes: the reminder, no escalation
    await until(lambda: cards(emu, "C1"))
    h.advance(5 * MINUTE)
    await until_async(lambda: named(h, key, approval_id, "reminded"))
    h.advance(3 * MINUTE)
    decided = (await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))).json()
    assert decided["status"] == "expired"
    await until_async(lambda: _outbox_empty(h), seconds=60)
    assert cards(emu, "C0ADMINS") == []


async def test_a_restart_does_not_take_a_step_twice() -> None:
    """Steps are jobs in the database: a new app on the same database finds them done."""
    async with SlackEmulator.running(team_id="T0ACME", app_id=APP_ID) as emu, database("sqlite") as db:
        clock = ManualClock()
        async with slack_world(emu, db=db, clock=clock) as h:
            key = await h.create_tenant("acme")
            approval_id = await ask(h, key)
            await until(lambda: cards(emu, "C1"))
            h.advance(10 * MINUTE)
            await until(lambda: cards(emu, "C0ADMINS"))
            await until(lambda: [m for m in posted(emu, "C1") if m.thread_ts])
            await until_async(lambda: _outbox_empty(h, upto=clock.now), seconds=60)
        restarted = ManualClock(clock.now + 1)
        async with slack_world(emu, db=db, clock=restarted) as again:
            again.advance(5 * MINUTE)  # not yet staff's step (30 minutes)
            await until_async(lambda: _outbox_empty(again, upto=restarted.now), seconds=60)
            assert len(cards(emu, "C0ADMINS")) == 1 and len(posted(emu, "C1")) == 2
            again.advance(15 * MINUTE)
            await until(lambda: cards(emu, "C0STAFF"))
            await until_async(lambda: _outbox_empty(again, upto=restarted.now), seconds=60)
            assert len(cards(emu, "C0ADMINS")) == 1 and len(cards(emu, "C0STAFF")) == 1
            rows = await again.engine.audit_trail(None, approval_id)
            assert [r.event for r in rows].count("escalated") == 2
            assert [r.event for r in rows].count("reminded") == 1


async def test_a_reminder_due_before_its_card_is_delivered_waits_for_the_card() -> None:
    """On several replicas one may run the reminder while another still delivers the card:
    the reminder is put off until the card is there, not recorded as unsendable."""
    async with SlackEmulator.running(team_id="T0ACME", app_id=APP_ID) as emu:
        async with slack_world(emu, run_workers=False) as h:
            key = await h.create_tenant("acme")
            approval_id = await ask(h, key)
            finished: list[tuple[Any, ...]] = []

            async def finish(*args: Any) -> None:
                finished.append(args)

            steps = FollowUps(
                h.engine, h.parts.surfaces, finish, db=h.parts.db, clock=h.clock, wakeups=h.parts.wakeups
            )
            h.clock.advance(5 * MINUTE)
            now = h.clock.now
            due = await h.parts.db.run_write(lambda tx: outbox.claim(tx, now, 60.0, 50))
            (remind,) = [j for j in due if j.kind.value == "remind"]
            await steps.remind(remind)
            assert finished[-1][1] == "not delivered yet" and finished[-1][2] > now  # put off
            assert await named(h, key, approval_id, "reminded") == []

            card = Delivered(SurfaceType.SLACK, "C1", ("1700000000.000100",), APP_ID)
            await h.engine.delivered(approval_id, card)
            await steps.remind(remind)
            (reply,) = [m for m in posted(emu, "C1") if m.thread_ts == "1700000000.000100"]
            assert reply.text is not None and "<@U1>" in reply.text
            (reminded,) = await named(h, key, approval_id, "reminded")
            assert reminded["data"]["sent"] is True


@pytest.mark.skipif(not postgres_url(), reason="PostgreSQL not configured (COSIGNER_TEST_POSTGRES_URL)")
@pytest.mark.slow
async def test_two_replicas_on_postgresql_take_each_step_once() -> None:
    async with SlackEmulator.running(team_id="T0ACME", app_id=APP_ID) as emu, database("postgres") as db:
        start = ManualClock().now
        first, second = ManualClock(start), ManualClock(start)
        async with slack_world(emu, db=db, clock=first) as a, slack_world(emu, db=db, clock=second) as b:
            key = await a.create_tenant("acme")
            # Six different calls (identical ones would be one question: coalesced).
            ids = [
                await ask(
                    a if i % 2 else b,
                    key,
                    call=f"call_{i}",
                    parameters={"orderId": f"ord_{i}", "amountCents": 12900},
                )
                for i in range(6)
            ]
            await until(lambda: len(cards(emu, "C1")) == 6)
            for minutes in (5, 5, 20):
                a.advance(minutes * MINUTE)
                b.advance(minutes * MINUTE)
                await until_async(lambda: _outbox_empty(a, upto=first.now), seconds=60)
            assert len(cards(emu, "C0ADMINS")) == 6 and len(cards(emu, "C0STAFF")) == 6
            assert len([m for m in posted(emu, "C1") if m.thread_ts]) == 6
            for approval_id in ids:
                rows = [r.event for r in await a.engine.audit_trail(None, approval_id)]
                assert rows.count("escalated") == 2 and rows.count("reminded") == 1


async def _outbox_empty(h: Harness, upto: float | None = None) -> bool:
    """No job due (by `upto`, default the app's clock) is left unfinished."""
    now = h.clock.now if upto is None else upto

    def due(tx: Work) -> int:
        rows = tx.conn.execute(select(jobs.c.id).where(jobs.c.done_at.is_(None), jobs.c.due_at <= now)).all()
        return len(rows)

    return await h.engine.db.run_read(due) == 0
