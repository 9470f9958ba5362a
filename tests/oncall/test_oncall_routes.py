"""Whoever is on call is asked: PagerDuty and Opsgenie on loopback, Slack through its emulator.

The providers answer their documented shapes (`servers.py`); each on-call person is found in
Slack by `users.lookupByEmail` and asked in their DM; clicks are really signed. A provider that
is down, a rotation with nobody on call and on-call people nobody knows all fail closed to the
tenant's admins, said on the card and in the audit. Time moves by the app's manual clock.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from contracts.ports import ApprovalDesk
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.emulated_methods import Recorded
from surfaces.slack.emulator import SlackEmulator
from tests.harness import Harness, cosigner_app, until, until_async
from tests.oncall.servers import OPSGENIE_KEY, PAGERDUTY_TOKEN, OnCallServers, on_call_servers

SECRET = "oncall-signing-secret"
APP_ID = "A0COSIGNER"
MINUTE = 60.0
POLICY = """
[defaults]
timeout = "1h"

[tools.deploy]
kind = "danger"
approvers = ["oncall:pagerduty:PEP0001:1"]
escalate = [{ after = "10m", to = "oncall:pagerduty:PEP0001:2" }]

[tools.rollback]
kind = "danger"
approvers = ["oncall:opsgenie:ops-primary"]

[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ADMIN"] }
admin_channel = "C0ADMINS"

[people]
dave = ["dave@acme.example", "u_dave"]
"""
SLACK_USERS = {
    "U0ALICE": "alice@acme.example",
    "U0BOB": "bob@acme.example",
    "U0ERIN": "erin@acme.example",
}

World = tuple[Harness, SlackEmulator, OnCallServers, str]


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[World]:
    async with on_call_servers() as servers, SlackEmulator.running(team_id="T0ACME", app_id=APP_ID) as emu:
        for user, email in SLACK_USERS.items():
            emu.users[user] = {"profile": {"email": email}, "real_name": email.split("@")[0]}
        config = SlackConfig(signing_secret=SECRET, bot_token="xoxb-acme", api_url=emu.api_url, app_id=APP_ID)

        def factory(desk: ApprovalDesk) -> SlackAdapter:
            return SlackAdapter(config, desk)

        async with cosigner_app(
            POLICY,
            surfaces=[factory],
            database_kind=db_kind,
            slack_signing_secret=SECRET,
            slack_bot_token="xoxb-acme",
            slack_api_url=emu.api_url,
            pagerduty_token=PAGERDUTY_TOKEN,
            pagerduty_url=servers.pagerduty_url,
            opsgenie_token=OPSGENIE_KEY,
            opsgenie_url=servers.opsgenie_url,
        ) as h:
            yield h, emu, servers, await h.create_tenant("acme")


async def ask(h: Harness, key: str, tool: str = "deploy", call: str = "call_1") -> str:
    body = {
        "executionId": "run_1",
        "toolCallId": call,
        "toolName": tool,
        # Each call its own (identical pending calls would be one question: coalesced).
        "parameters": {"service": "billing", "version": "2.4.1", "ticket": call},
        "surface": {"type": "api"},
    }
    response = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["approvalId"])


def cards(emu: SlackEmulator, channel: str) -> list[Recorded]:
    return [m for m in emu.messages if m.method == "chat.postMessage" and m.channel == channel and m.blocks]


async def audit(h: Harness, key: str, approval_id: str, event: str) -> list[dict[str, Any]]:
    response = await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))
    assert response.status_code == 200, response.text
    return [e for e in response.json()["events"] if e["event"] == event]


async def status(h: Harness, key: str, approval_id: str) -> str:
    response = await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))
    return str(response.json()["status"])


async def click(h: Harness, emu: SlackEmulator, card: Recorded, user: str) -> None:
    response = await emu.click(
        h.client, channel=card.channel, ts=card.ts, action_id="cosigner.approve", secret=SECRET, user=user
    )
    assert response.status_code == 200


async def test_the_person_on_call_is_asked_in_their_slack_dm_and_their_approve_counts(world: World) -> None:
    h, emu, servers, key = world
    servers.put("PEP0001", ["alice@acme.example"], level=1)
    approval_id = await ask(h, key)
    (card,) = await until(lambda: cards(emu, emu.dm_channel("U0ALICE")))
    assert "deploy" in json.dumps(card.blocks) and not cards(emu, "C0ADMINS")
    (requested,) = await audit(h, key, approval_id, "requested")
    assert requested["data"]["oncall"] == {
        "rotations": ["oncall:pagerduty:PEP0001:1"],
        "onCall": ["alice@acme.example"],
        "asked": ["U0ALICE"],
    }
    await h.delivered(approval_id)
    # PagerDuty was asked for that level of that escalation policy, users included.
    assert any(
        "escalation_policy_ids%5B%5D=PEP0001" in u and "escalation_levels%5B%5D=1" in u for u in servers.asked
    )
    await click(h, emu, card, "U0BOB")  # not on call: refused, nothing decided
    assert await status(h, key, approval_id) == "pending"
    await click(h, emu, card, "U0ALICE")
    assert await until_async(lambda: _is(h, key, approval_id, "approved"))


async def _is(h: Harness, key: str, approval_id: str, want: str) -> bool:
    return await status(h, key, approval_id) == want


async def test_escalation_asks_whoever_is_on_call_at_the_next_level_when_it_falls_due(world: World) -> None:
    h, emu, servers, key = world
    servers.put("PEP0001", ["alice@acme.example"], level=1)
    servers.put("PEP0001", ["bob@acme.example"], level=2)
    approval_id = await ask(h, key)
    await until(lambda: cards(emu, emu.dm_channel("U0ALICE")))
    h.advance(5 * MINUTE)
    servers.put("PEP0001", ["erin@acme.example"], level=2)  # the rotation moves on mid-request
    h.advance(5 * MINUTE)  # 10 minutes: the escalation falls due
    (escalated,) = await until(lambda: cards(emu, emu.dm_channel("U0ERIN")))
    assert not cards(emu, emu.dm_channel("U0BOB"))
    (step,) = await until_async(lambda: audit(h, key, approval_id, "escalated"))
    assert step["data"]["oncall"]["asked"] == ["U0ERIN"]
    assert step["data"]["oncall"]["rotations"] == ["oncall:pagerduty:PEP0001:2"]
    await until_async(lambda: audit(h, key, approval_id, "escalation_delivered"))
    await click(h, emu, escalated, "U0ERIN")
    assert await until_async(lambda: _is(h, key, approval_id, "approved"))


async def test_a_provider_that_is_down_sends_the_request_to_the_admins_saying_why(world: World) -> None:
    h, emu, servers, key = world
    servers.down(503)
    approval_id = await ask(h, key)
    (card,) = await until(lambda: cards(emu, "C0ADMINS"))
    shown = json.dumps(card.blocks)
    assert "on call not reached" in shown and "PagerDuty answered 503" in shown and "tenant admins" in shown
    (requested,) = await audit(h, key, approval_id, "requested")
    assert requested["data"]["oncall"]["fallback"] == "oncall:pagerduty:PEP0001:1: PagerDuty answered 503"
    assert requested["data"]["route"]["channel_id"] == "C0ADMINS"
    assert await status(h, key, approval_id) == "pending"  # never approved by the outage
    await h.delivered(approval_id)
    await click(h, emu, card, "U0ADMIN")
    assert await until_async(lambda: _is(h, key, approval_id, "approved"))


async def test_a_refused_token_is_an_unreachable_provider_too(world: World) -> None:
    h, emu, servers, key = world
    servers.put("ops-primary", ["alice@acme.example"])
    servers.down(401)
    approval_id = await ask(h, key, tool="rollback")
    await until(lambda: cards(emu, "C0ADMINS"))
    (requested,) = await audit(h, key, approval_id, "requested")
    assert "Opsgenie refused the token (401)" in requested["data"]["oncall"]["fallback"]


async def test_nobody_on_call_goes_to_the_admins(world: World) -> None:
    h, emu, servers, key = world
    servers.put("PEP0001", [], level=1)
    approval_id = await ask(h, key)
    (card,) = await until(lambda: cards(emu, "C0ADMINS"))
    assert "nobody is on call for oncall:pagerduty:PEP0001:1" in json.dumps(card.blocks)
    (requested,) = await audit(h, key, approval_id, "requested")
    assert requested["data"]["oncall"]["fallback"] == "nobody is on call for oncall:pagerduty:PEP0001:1"


async def test_someone_on_call_with_no_known_identity_goes_to_the_admins(world: World) -> None:
    h, emu, servers, key = world
    servers.put("ops-primary", ["frank@contractor.example"])
    approval_id = await ask(h, key, tool="rollback")
    (card,) = await until(lambda: cards(emu, "C0ADMINS"))
    assert "frank@contractor.example" in json.dumps(card.blocks)
    (requested,) = await audit(h, key, approval_id, "requested")
    assert "nobody on call has an identity here" in requested["data"]["oncall"]["fallback"]


async def test_someone_on_call_known_only_by_people_is_asked_in_the_inbox(world: World) -> None:
    h, emu, servers, key = world
    servers.put("ops-primary", ["dave@acme.example", "frank@contractor.example"])
    approval_id = await ask(h, key, tool="rollback")
    (requested,) = await audit(h, key, approval_id, "requested")
    assert requested["data"]["route"] == {
        "surface": "dashboard",
        "approvers": ["dave@acme.example"],
        "email": [],
    }
    assert requested["data"]["oncall"]["unknown"] == ["frank@contractor.example"]
    assert not cards(emu, "C0ADMINS")


async def test_who_is_on_call_is_kept_for_a_minute_of_the_injected_clock(world: World) -> None:
    h, emu, servers, key = world
    servers.put("PEP0001", ["alice@acme.example"], level=1)
    await ask(h, key, call="call_1")
    await ask(h, key, call="call_2")
    assert len(servers.asked) == 1  # the second request was answered from the cache
    servers.put("PEP0001", ["bob@acme.example"], level=1)
    h.advance(59)
    await ask(h, key, call="call_3")
    assert len(servers.asked) == 1
    assert len(cards(emu, emu.dm_channel("U0BOB"))) == 0
    h.advance(2)  # past the minute: asked again, and the new person is asked
    await ask(h, key, call="call_4")
    assert len(servers.asked) == 2
    await until(lambda: cards(emu, emu.dm_channel("U0BOB")))
