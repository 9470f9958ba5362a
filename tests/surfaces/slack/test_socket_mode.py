"""Slack over Socket Mode, end to end: clicks arrive as envelopes on a WebSocket the bot
opened to the emulator (no `/slack/events`), pass the same answer checks, and are
acknowledged only once their decision is committed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from contracts.errors import SurfaceUnavailable
from contracts.ports import ApprovalDesk
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.emulator import APP_TOKEN, SlackEmulator
from surfaces.slack.interactions import click_payload, send_signed
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere
from tests.harness import DEFAULT_POLICY, Harness, cosigner_app, until, until_async

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, SLACK_STATE)

APP_ID = "A0COSIGNER"
World = tuple[Harness, SlackEmulator, str]


def _config(emu: SlackEmulator, **changes: Any) -> SlackConfig:
    values: dict[str, Any] = {
        "signing_secret": "",
        "bot_token": "xoxb-acme",
        "api_url": emu.api_url,
        "app_id": APP_ID,
        "app_token": APP_TOKEN,
    }
    values.update(changes)
    return SlackConfig(**values)


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[World]:
    async with SlackEmulator.running(team_id="T0ACME", app_id=APP_ID) as emu:
        config = _config(emu)

        def factory(desk: ApprovalDesk) -> SlackAdapter:
            return SlackAdapter(config, desk)

        async with cosigner_app(DEFAULT_POLICY, surfaces=[factory], database_kind=db_kind) as h:
            await emu.wait_connected()
            yield h, emu, await h.create_tenant("acme")


async def _ask(h: Harness, key: str, **body: Any) -> str:
    request = {
        "executionId": "run_81",
        "toolCallId": "call_7",
        "toolName": "issue_refund",
        "parameters": {"orderId": "ord_4421", "amountCents": 12900},
        "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
        "timeoutSeconds": 300,
        **body,
    }
    response = await h.client.post("/v1/approvals", json=request, headers=h.auth(key))
    assert response.status_code == 201, response.text
    approval_id = str(response.json()["approvalId"])
    await h.delivered(approval_id)
    return approval_id


async def _status(h: Harness, key: str, approval_id: str) -> dict[str, Any]:
    body: dict[str, Any] = (await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))).json()
    return body


async def _closed_card(emu: SlackEmulator, channel: str, ts: str) -> Any:
    return await until(lambda: (m := emu.latest(channel, ts)) and m.method == "chat.update" and m)


async def test_a_click_over_socket_mode_approves_and_is_acked_after_the_commit(world: World) -> None:
    h, emu, key = world
    approval_id = await _ask(h, key)
    posted = emu.messages[0]
    ack = await emu.socket_click(
        channel=posted.channel, ts=posted.ts, action_id="cosigner.approve", user="U1"
    )
    assert ack["envelope_id"]
    # Read at once, without waiting: the decision was committed before the ack was sent.
    decided = await _status(h, key, approval_id)
    assert decided["status"] == "approved", decided
    assert decided["decidedBy"]["userId"] == "U1" and decided["decidedBy"]["surface"] == "slack"
    closed = await _closed_card(emu, posted.channel, posted.ts)
    assert not [b for b in closed.blocks if b["type"] == "actions"]
    assert "*Approved* by <@U1>" in json.dumps(closed.blocks)


async def test_a_non_approver_decides_nothing(world: World) -> None:
    h, emu, key = world
    approval_id = await _ask(h, key)
    posted = emu.messages[0]
    await emu.socket_click(channel=posted.channel, ts=posted.ts, action_id="cosigner.approve", user="U9")
    (note,) = await until(lambda: emu.ephemerals)
    assert note.user == "U9" and note.text is not None and "NOT_AN_APPROVER" in note.text
    assert (await _status(h, key, approval_id))["status"] == "pending"


async def test_a_click_from_another_tenants_workspace_decides_nothing(world: World) -> None:
    h, emu, key = world
    approval_id = await _ask(h, key)
    posted = emu.messages[0]
    await emu.socket_click(
        channel=posted.channel, ts=posted.ts, action_id="cosigner.approve", user="U1", team="T0GLOBEX"
    )
    (note,) = await until(lambda: emu.ephemerals)
    assert note.text is not None and "WRONG_TENANT" in note.text
    assert (await _status(h, key, approval_id))["status"] == "pending"


async def test_a_click_carried_into_another_conversation_decides_nothing(world: World) -> None:
    h, emu, key = world
    approval_id = await _ask(h, key)
    posted = emu.messages[0]
    payload = click_payload(
        emu, channel=posted.channel, ts=posted.ts, action_id="cosigner.approve", user="U1"
    )
    payload["channel"]["id"] = payload["container"]["channel_id"] = "C0ELSEWHERE"
    await emu.push(payload)
    (note,) = await until(lambda: emu.ephemerals)
    assert note.text is not None and "WRONG_CONVERSATION" in note.text
    assert (await _status(h, key, approval_id))["status"] == "pending"


@pytest.mark.parametrize(
    "change",
    [
        {"actions": "cosigner.approve"},
        {"actions": [{"value": "x"}]},
        {"team": 5},
        {"authorizations": [5]},
        {"view": "x", "type": "view_submission"},
        {"event": None},
    ],
    ids=["actions not a list", "action without id", "team a number", "authorizations", "view", "event"],
)
async def test_an_envelope_bolt_would_fail_on_is_acknowledged_and_decides_nothing(
    world: World, change: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    h, emu, key = world
    approval_id = await _ask(h, key)
    posted = emu.messages[0]
    payload = click_payload(
        emu, channel=posted.channel, ts=posted.ts, action_id="cosigner.approve", user="U1"
    )
    ack = await emu.push({**payload, **change})  # acknowledged at once: Slack sends it no more
    assert ack["envelope_id"] and "payload" not in ack
    assert (await _status(h, key, approval_id))["status"] == "pending"
    assert "Refused a Slack Socket Mode envelope" in caplog.text
    # The connection still serves the real click.
    await emu.socket_click(channel=posted.channel, ts=posted.ts, action_id="cosigner.approve", user="U1")
    assert (await _status(h, key, approval_id))["status"] == "approved"


async def test_a_replayed_envelope_does_not_decide_twice(world: World) -> None:
    h, emu, key = world
    approval_id = await _ask(h, key)
    posted = emu.messages[0]
    deny = click_payload(emu, channel=posted.channel, ts=posted.ts, action_id="cosigner.approve", user="U1")
    await emu.push(deny)
    first = await _status(h, key, approval_id)
    await emu.push(deny)
    (note,) = await until(lambda: emu.ephemerals)
    assert note.text is not None and "ALREADY_DECIDED" in note.text
    assert await _status(h, key, approval_id) == first


async def test_a_late_click_is_refused_and_the_card_shows_expiry(world: World) -> None:
    h, emu, key = world
    approval_id = await _ask(h, key, timeoutSeconds=1)
    posted = emu.messages[0]
    h.advance(1.1)
    await emu.socket_click(channel=posted.channel, ts=posted.ts, action_id="cosigner.approve", user="U1")
    (note,) = await until(lambda: emu.ephemerals)
    assert note.text is not None and "APPROVAL_EXPIRED" in note.text
    assert (await _status(h, key, approval_id))["status"] == "expired"
    closed = await _closed_card(emu, posted.channel, posted.ts)
    assert not [b for b in closed.blocks if b["type"] == "actions"] and "xpired" in json.dumps(closed.blocks)


async def test_a_cancel_updates_the_card(world: World) -> None:
    h, emu, key = world
    approval_id = await _ask(h, key)
    posted = emu.messages[0]
    r = await h.client.post(f"/v1/approvals/{approval_id}/cancel", headers=h.auth(key))
    assert r.json()["status"] == "cancelled"
    closed = await _closed_card(emu, posted.channel, posted.ts)
    assert not [b for b in closed.blocks if b["type"] == "actions"] and "ancelled" in json.dumps(
        closed.blocks
    )


async def test_an_undeliverable_card_fails_the_request_closed(world: World) -> None:
    h, emu, key = world
    emu.fail_next("chat.postMessage", error="channel_not_found", status=200, times=10)
    request = {
        "executionId": "run_81",
        "toolCallId": "call_7",
        "toolName": "issue_refund",
        "parameters": {"orderId": "ord_4421"},
        "surface": {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"},
    }
    created = await h.client.post("/v1/approvals", json=request, headers=h.auth(key))
    approval_id = created.json()["approvalId"]

    async def closed() -> dict[str, Any] | None:
        body = await _status(h, key, approval_id)
        return body if body["status"] != "pending" else None

    body = await until_async(closed, seconds=10)
    assert body["status"] == "denied"
    audit = (await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))).text
    assert "SURFACE_UNAVAILABLE" in audit


async def test_without_a_signing_secret_slack_events_is_not_served(world: World) -> None:
    h, emu, key = world
    approval_id = await _ask(h, key)
    posted = emu.messages[0]
    # "Signed" with the empty secret a Socket Mode-only install has: no such route exists.
    payload = click_payload(
        emu, channel=posted.channel, ts=posted.ts, action_id="cosigner.approve", user="U1"
    )
    response = await send_signed(h.client, "/slack/events", payload, secret="")
    assert response.status_code == 404
    assert (await _status(h, key, approval_id))["status"] == "pending"


async def test_a_wrong_app_token_fails_start_with_the_fix_named() -> None:
    async with SlackEmulator.running(team_id="T0ACME", app_id=APP_ID) as emu:

        class NoDesk:
            async def answer(self, answer: Any) -> Any:
                raise AssertionError("no answer expected")

            def tenant_for_org(self, surface: Any, org: str) -> str | None:
                return None

            async def full_call(self, look: Any) -> Any:
                raise AssertionError("no look expected")

        adapter = SlackAdapter(_config(emu, app_token="xapp-1-forged"), NoDesk())
        with pytest.raises(SurfaceUnavailable, match=r"apps\.connections\.open.*invalid_auth"):
            await adapter.start()
        assert emu.socket_connections == 0


def test_a_bot_token_in_place_of_the_app_token_is_refused() -> None:
    from surfaces.slack.adapter import SlackConfigError

    with pytest.raises(SlackConfigError, match="xapp-"):
        SlackAdapter(
            SlackConfig(signing_secret="", bot_token="xoxb-acme", app_token="xoxb-acme"),
            None,  # type: ignore[arg-type]  # refused before the desk is used
        )


async def test_the_emulator_refuses_a_socket_url_it_did_not_issue() -> None:
    async with SlackEmulator.running() as emu, httpx.AsyncClient() as http:
        r = await http.post(emu.api_url + "apps.connections.open", headers={"Authorization": "Bearer xoxb-x"})
        assert r.json() == {"ok": False, "error": "not_allowed_token_type"}


def test_socket_mode_alone_turns_slack_on_without_a_public_url() -> None:
    from bot.settings import Settings

    settings = Settings(
        secret="s" * 32,
        slack_bot_token="xoxb-acme",
        slack_app_token=APP_TOKEN,
        public_url="not a url",
    )
    assert settings.slack_enabled
    # A signing secret means Slack calls /slack/events, which needs the URL again.
    with pytest.raises(ValueError, match="COSIGNER_PUBLIC_URL"):
        Settings(
            secret="s" * 32,
            slack_bot_token="xoxb-acme",
            slack_app_token=APP_TOKEN,
            slack_signing_secret="x",
            public_url="not a url",
        )
