"""Always deny on a Slack card, and `/cosigner` to lift it: really signed requests through Bolt."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from contracts.ports import ApprovalDesk
from storage.database import Database
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.emulated_methods import Recorded
from surfaces.slack.emulator import SlackEmulator
from surfaces.slack.interactions import block_actions_payload, send_signed, signed_headers
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere
from tests.harness import DEFAULT_POLICY, Harness, cosigner_app, database, until

# On PostgreSQL, the storage path of the tests marked runs in the tests these name.
POSTGRES_ELSEWHERE = postgres_elsewhere(DESK, SLACK_STATE)

SECRET = "denials-signing-secret"
APP_ID = "A0COSIGNER"
CONFIRM = (
    "Deny `issue_refund` for requests you approve, now and from now on: later ones are refused "
    "without asking you. Lift it with /cosigner."
)


@asynccontextmanager
async def world(db: Database, emu: SlackEmulator) -> AsyncIterator[Harness]:
    config = SlackConfig(signing_secret=SECRET, bot_token="xoxb-acme", api_url=emu.api_url, app_id=APP_ID)

    def factory(desk: ApprovalDesk) -> SlackAdapter:
        return SlackAdapter(config, desk)

    async with cosigner_app(DEFAULT_POLICY, db=db, surfaces=[factory]) as h:
        yield h


@pytest.fixture
async def slack(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, str, str]]:
    async with database(db_kind) as db, SlackEmulator.running(team_id="T0ACME", app_id=APP_ID) as emu:
        async with world(db, emu) as h:
            yield h, emu, await h.create_tenant("acme"), await h.create_tenant("globex")


def surface(user: str = "U1", team: str = "T0ACME") -> dict[str, Any]:
    return {"type": "slack", "teamId": team, "channelId": "C1", "userId": user}


async def ask(h: Harness, key: str, call: str, **who: str) -> httpx.Response:
    body = {
        "executionId": "run_1",
        "toolCallId": call,
        "toolName": "issue_refund",
        "parameters": {"orderId": "ord_4421", "amountCents": 12900},
        "surface": surface(**who),
    }
    return await h.client.post("/v1/approvals", json=body, headers=h.auth(key))


def posted(emu: SlackEmulator) -> list[Recorded]:
    return [m for m in emu.messages if m.method == "chat.postMessage"]


async def card_for(h: Harness, emu: SlackEmulator, key: str, call: str, **who: str) -> tuple[str, Recorded]:
    before = len(posted(emu))
    r = await ask(h, key, call, **who)
    assert r.status_code == 201, r.text
    card = (await until(lambda: posted(emu)[before:]))[0]
    return str(r.json()["approvalId"]), card


def buttons(card: Recorded) -> dict[str, dict[str, Any]]:
    return {e["action_id"]: e for b in card.blocks if b["type"] == "actions" for e in b["elements"]}


async def always_deny(h: Harness, emu: SlackEmulator, card: Recorded, user: str = "U1") -> httpx.Response:
    return await emu.click(
        h.client, channel=card.channel, ts=card.ts, action_id="cosigner.always_deny", secret=SECRET, user=user
    )


async def command(h: Harness, user: str = "U1", team: str = "T0ACME", secret: str = SECRET) -> httpx.Response:
    form = {
        "token": "deprecated",
        "team_id": team,
        "team_domain": "acme",
        "channel_id": "C1",
        "channel_name": "refunds",
        "user_id": user,
        "user_name": user.lower(),
        "command": "/cosigner",
        "text": "",
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": "https://hooks.slack.com/commands/T0ACME/1/x",
        "trigger_id": "1.2.cmd",
    }
    body = urlencode(form).encode()
    return await h.client.post("/slack/events", content=body, headers=signed_headers(body, secret))


async def lift(h: Harness, emu: SlackEmulator, listing: dict[str, Any], user: str = "U1") -> httpx.Response:
    (button,) = [b["accessory"] for b in listing["blocks"] if b.get("accessory")]
    action = {"type": "button", "block_id": "x", "action_id": button["action_id"], "value": button["value"]}
    payload = block_actions_payload(
        action=action,
        blocks=listing["blocks"],
        channel="C1",
        ts=f"{time.time():.6f}",
        user=user,
        team="T0ACME",
        app_id=APP_ID,
        is_ephemeral=True,
        response_url=emu.response_url,
    )
    return await send_signed(h.client, "/slack/events", payload, secret=SECRET)


@POSTGRES_ELSEWHERE
async def test_the_card_offers_always_deny_with_a_dialog_saying_what_it_does(slack: Any) -> None:
    h, emu, acme, _ = slack
    _, card = await card_for(h, emu, acme, "c1")
    offered = buttons(card)["cosigner.always_deny"]
    assert offered["text"]["text"] == "Always deny"
    assert offered["confirm"]["text"]["text"] == CONFIRM
    assert offered["confirm"]["confirm"]["text"] == "Always deny"


async def test_always_deny_refuses_the_next_request_without_a_card_until_lifted(slack: Any) -> None:
    h, emu, acme, globex = slack
    first, card = await card_for(h, emu, acme, "c1")
    assert (await always_deny(h, emu, card)).status_code == 200
    decided = (await h.client.get(f"/v1/approvals/{first}?wait=5", headers=h.auth(acme))).json()
    assert decided["status"] == "denied" and decided["decidedBy"]["userId"] == "U1"
    updated = await until(
        lambda: (m := emu.latest(card.channel, card.ts)) and m.method == "chat.update" and m
    )
    assert "actions" not in [b["type"] for b in updated.blocks]

    cards = len(posted(emu))
    refused = await ask(h, acme, "c2")
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "PERMISSION_DENIED" and error["denial"]["approver"]["userId"] == "U1"
    assert error["denial"]["approver"]["teamId"] == "T0ACME" and "slack:U1" in error["message"]
    # Another requester, and the same user id in another tenant, still get a card.
    await card_for(h, emu, acme, "c3", user="U2")
    await card_for(h, emu, globex, "c4", team="T0GLOBEX")
    assert len(posted(emu)) == cards + 2

    listing = await command(h)
    assert listing.status_code == 200
    shown = listing.json()
    assert shown["response_type"] == "ephemeral" and "issue_refund" in json.dumps(shown["blocks"])
    assert (await lift(h, emu, shown)).status_code == 200
    replaced = await until(lambda: emu.responses)
    assert replaced[-1]["replace_original"] is True and "Lifted" in json.dumps(replaced[-1]["blocks"])
    await card_for(h, emu, acme, "c5")
    empty = (await command(h)).json()
    assert "no standing denies" in empty["text"]


@POSTGRES_ELSEWHERE
async def test_outsiders_can_neither_set_nor_see_nor_lift_it(slack: Any) -> None:
    h, emu, acme, _ = slack
    pending, card = await card_for(h, emu, acme, "c1")
    await always_deny(h, emu, card, user="U9")
    (note,) = await until(lambda: emu.ephemerals)
    assert note.user == "U9" and note.text is not None and "NOT_AN_APPROVER" in note.text
    assert (await h.client.get(f"/v1/approvals/{pending}", headers=h.auth(acme))).json()[
        "status"
    ] == "pending"
    assert (await h.client.get("/v1/denials", headers=h.auth(h.approver_key("acme")))).json() == {
        "denials": []
    }

    await always_deny(h, emu, card)
    mine = (await command(h)).json()
    assert "no standing denies" in (await command(h, user="U9")).json()["text"]
    assert (await lift(h, emu, mine, user="U9")).status_code == 200
    refused = await until(lambda: emu.responses)
    assert "DENIAL_NOT_FOUND" in json.dumps(refused[-1]["blocks"])
    assert (
        len((await h.client.get("/v1/denials", headers=h.auth(h.approver_key("acme")))).json()["denials"])
        == 1
    )
    forged = await command(h, secret="not-the-secret")
    assert forged.status_code == 401


@POSTGRES_ELSEWHERE
async def test_a_card_for_the_admins_does_not_offer_it(slack: Any) -> None:
    h, emu, acme, _ = slack
    r = await h.client.post(
        "/v1/approvals",
        json={
            "executionId": "run_1",
            "toolCallId": "h1",
            "toolName": "issue_refund",
            "parameters": {"orderId": "o", "amountCents": 12900},
            "surface": {"type": "schedule"},
        },
        headers=h.auth(acme),
    )
    assert r.status_code == 201
    (card,) = await until(lambda: posted(emu))
    assert set(buttons(card)) == {"cosigner.approve", "cosigner.deny", "cosigner.full_call"}


async def test_it_survives_a_restart(db_kind: str) -> None:
    async with database(db_kind) as db, SlackEmulator.running(team_id="T0ACME", app_id=APP_ID) as emu:
        async with world(db, emu) as h:
            acme = await h.create_tenant("acme")
            _, card = await card_for(h, emu, acme, "c1")
            await always_deny(h, emu, card)
            await until(lambda: [m for m in emu.messages if m.method == "chat.update"])
        async with world(db, emu) as fresh:
            cards = len(posted(emu))
            assert (await ask(fresh, acme, "c2")).status_code == 403
            assert len(posted(emu)) == cards
            assert "issue_refund" in json.dumps((await command(fresh)).json()["blocks"])


def test_the_button_is_built_only_where_offered_and_fits_slacks_limits(
    make_card: Any, make_route: Any
) -> None:
    from surfaces.slack.blocks import as_dicts, to_blocks

    def actions(card: Any) -> list[str]:
        blocks = as_dicts(to_blocks(card, make_route())[0])  # slack_sdk validates every limit
        return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]

    assert "cosigner.always_deny" not in actions(make_card())
    longest = make_card(offers_always_deny=True, tool_name="t" * 128)
    assert actions(longest)[-2:] == ["cosigner.always_deny", "cosigner.full_call"]


def test_the_manifest_declares_the_command_at_the_events_route() -> None:
    from pathlib import Path
    from urllib.parse import urlparse

    import yaml

    manifest = yaml.safe_load((Path(__file__).resolve().parents[3] / "manifest.yml").read_text())
    (declared,) = manifest["features"]["slash_commands"]
    assert declared["command"] == "/cosigner"
    assert (
        urlparse(declared["url"]).path == urlparse(manifest["settings"]["interactivity"]["request_url"]).path
    )
    assert "commands" in manifest["oauth_config"]["scopes"]["bot"]
