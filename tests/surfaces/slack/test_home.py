"""The Home tab and `/cosigner pending`: what waits for a person, with links to the cards."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import yaml

from surfaces.slack.interactions import send_signed_event, signed_headers
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere
from tests.harness import Harness, until
from tests.surfaces.slack.test_denials import APP_ID, SECRET, card_for, slack

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, SLACK_STATE)

__all__ = ["slack"]  # the fixture, shared with the standing-deny tests


async def open_home(h: Harness, user: str, team: str = "T0ACME", secret: str = SECRET) -> Any:
    payload = {
        "type": "event_callback",
        "team_id": team,
        "api_app_id": APP_ID,
        "event_id": f"Ev{user}",
        "event_time": 1,
        "event": {"type": "app_home_opened", "user": user, "channel": "D1", "tab": "home"},
    }
    return await send_signed_event(h.client, "/slack/events", payload, secret=secret)


async def pending_command(h: Harness, user: str, text: str = "pending") -> Any:
    form = {
        "team_id": "T0ACME",
        "channel_id": "C1",
        "user_id": user,
        "command": "/cosigner",
        "text": text,
        "api_app_id": APP_ID,
        "response_url": "https://hooks.slack.com/commands/T0ACME/1/x",
        "trigger_id": "1.2.cmd",
    }
    body = urlencode(form).encode()
    return await h.client.post("/slack/events", content=body, headers=signed_headers(body, SECRET))


async def test_the_home_tab_lists_the_persons_pending_requests_with_links(slack: Any) -> None:
    h, emu, acme, _ = slack
    _, card = await card_for(h, emu, acme, "c1", user="U1")
    assert (await open_home(h, "U1")).status_code == 200
    home = json.dumps(emu.home_tabs["U1"])
    assert "issue_refund" in home and "acme" in home
    assert f"archives/{card.channel}/p{card.ts.replace('.', '')}" in home
    # Someone else's Home tab does not list it; a forged event publishes nothing.
    await open_home(h, "U9")
    assert "issue_refund" not in json.dumps(emu.home_tabs["U9"])
    assert (await open_home(h, "U2", secret="not-the-secret")).status_code == 401
    assert "U2" not in emu.home_tabs


async def test_a_new_card_and_its_decision_refresh_the_approvers_home_tab(slack: Any) -> None:
    h, emu, acme, _ = slack
    aid, card = await card_for(h, emu, acme, "c1", user="U1")
    await h.delivered(aid)
    # Published when the card was posted, without the person opening the tab, and linked.
    home = json.dumps(await until(lambda: emu.home_tabs.get("U1")))
    assert "issue_refund" in home and f"p{card.ts.replace('.', '')}" in home
    press = await emu.click(
        h.client, channel=card.channel, ts=card.ts, action_id="cosigner.approve", user="U1", secret=SECRET
    )
    assert press.status_code == 200
    await until(lambda: "Nothing waits for you" in json.dumps(emu.home_tabs["U1"]))


async def test_cosigner_pending_answers_with_the_same_list_and_help_says_what_it_does(slack: Any) -> None:
    h, emu, acme, _ = slack
    await card_for(h, emu, acme, "c1", user="U1")
    listing = (await pending_command(h, "U1")).json()
    assert listing["response_type"] == "ephemeral" and "issue_refund" in json.dumps(listing["blocks"])
    assert "Nothing waits for you" in json.dumps((await pending_command(h, "U9")).json()["blocks"])
    assert "/cosigner pending" in (await pending_command(h, "U1", "help")).json()["text"]


def test_the_manifest_declares_the_home_tab_and_its_event() -> None:
    manifest = yaml.safe_load(open("manifest.yml").read())
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True
    assert "app_home_opened" in manifest["settings"]["event_subscriptions"]["bot_events"]
    assert "pending" in manifest["features"]["slash_commands"][0]["usage_hint"]
