"""The sandbox from the approver's side: the banner's request lands in Alice's inbox (run
with curl exactly as printed), and the Teams pane can ask, names people, renders the card's
markdown and says a refused press on the card (in Chromium: no blocking `alert()`)."""

from __future__ import annotations

import asyncio
import json
import shlex
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx

from bot.dev.sandbox import Sandbox, banner
from bot.dev.teams import PEOPLE
from tests.harness import until_async
from tests.sandbox.delivery import approval_on, shown_card
from tests.sandbox.test_browser import browser  # noqa: F401  (the Chromium fixture)


def _command_after(text: str, heading: str) -> str:
    """The shell command printed under the banner line starting with `heading`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading)) + 1
    command = []
    for line in lines[start:]:
        command.append(line.strip().removesuffix("\\"))
        if not line.endswith("\\"):
            break
    return " ".join(command)


async def _sign_in_as_alice(client: httpx.AsyncClient) -> None:
    start = await client.get("/inbox/login")
    authorize = start.headers["location"]
    args = dict(parse_qsl(urlsplit(authorize).query))
    async with httpx.AsyncClient() as issuer:
        chosen = await issuer.post(authorize.split("?")[0], data={**args, "user": "U0ALICE"})
    back = urlsplit(chosen.headers["location"])
    assert (await client.get(f"{back.path}?{back.query}")).status_code == 303


async def test_the_banners_dashboard_request_lands_in_alices_inbox(sb: Sandbox) -> None:
    text = banner(sb, "127.0.0.1")
    # The banner names every surface and the ids each knows the sandbox's people by.
    assert "emulated Slack, Teams and Twilio (SMS and WhatsApp)" in text
    assert "inbox/dashboard U0ALICE or alice@demo.example" in text
    assert f"Teams {PEOPLE['alice']}" in text and "whatsapp:+15550100200" in text
    command = _command_after(text, "Ask Alice in her inbox")
    assert command.startswith("curl -s ") and '"userId": "U0ALICE"' in command
    # Run as printed, by a shell, with the real curl.
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err
    created = json.loads(out)
    assert created["status"] == "pending", created
    approval = created["approvalId"]
    async with httpx.AsyncClient(base_url=sb.url, timeout=30) as client:
        await _sign_in_as_alice(client)
        page = (await client.get("/inbox/")).text
    assert approval in page, "Alice's inbox does not list the banner's request"
    # The banner's Teams and WhatsApp surfaces are accepted as printed.
    for line in text.splitlines():
        if line.startswith('    {"type": '):
            surface = json.loads(line)
            body = {**json.loads(command.split(" -d ", 1)[1].strip("'")), "surface": surface}
            body["executionId"] = f"run_{surface['type']}"
            async with httpx.AsyncClient(base_url=sb.url, timeout=30) as client:
                r = await client.post(
                    "/v1/approvals", json=body, headers={"Authorization": f"Bearer {sb.api_key}"}
                )
            assert r.status_code == 201 and r.json()["status"] == "pending", r.text
    # ...and reach Alice there: a Teams card in the pane, a WhatsApp message on her phone.
    await until_async(lambda: _teams_cards(sb), seconds=30)
    await until_async(lambda: _whatsapp_texts(sb), seconds=30)
    assert shlex.split(command)[0] == "curl"


async def _teams_cards(sb: Sandbox) -> int:
    assert sb.teams is not None
    return len(sb.teams.cards())


async def _whatsapp_texts(sb: Sandbox) -> int:
    return sum(t.to == "whatsapp:+15550100200" for t in sb.twilio.sent)


async def test_ask_here_cards_the_sample_request_in_the_teams_pane(
    sb: Sandbox, http: httpx.AsyncClient
) -> None:
    refused = await http.post("/sandbox/api/teams/ask", content=b"{}")  # no JSON type: refused
    assert refused.status_code == 415
    asked = await http.post("/sandbox/api/teams/ask", json={})
    assert asked.status_code == 200 and asked.json()["status"] == 201, asked.text
    approval = asked.json()["answer"]["approvalId"]

    async def cards() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = (await http.get("/sandbox/api/teams")).json()["cards"]
        return found

    (card,) = await until_async(cards, seconds=30)
    state = (await http.get("/sandbox/api/teams")).json()
    assert state["names"][PEOPLE["alice"]] == "Alice"
    assert approval == card["card"]["actions"][0]["data"]["approvalId"]
    # A second press asks again, as a new run: two cards.
    again = await http.post("/sandbox/api/teams/ask", json={})
    assert again.json()["answer"]["approvalId"] != approval


async def test_ask_here_in_a_slack_channel(sb: Sandbox, http: httpx.AsyncClient) -> None:
    bad = await http.post("/sandbox/api/ask", json={"channel": "C0NOPE"})
    assert bad.status_code == 400 and "C0DEMO" in bad.json()["error"]["message"]
    asked = await http.post("/sandbox/api/ask", json={"channel": "C0ADMINS"})
    assert asked.json()["status"] == 201, asked.text
    card = await shown_card(http, "issue_refund")
    assert card["channel"] == "C0ADMINS"
    assert approval_on(card) == asked.json()["answer"]["approvalId"]


async def test_the_teams_pane_in_chromium(sb: Sandbox, browser: Any, http: httpx.AsyncClient) -> None:  # noqa: F811
    from playwright.async_api import expect

    expect.set_options(timeout=30_000)
    page = await browser.new_page(viewport={"width": 1440, "height": 900})
    dialogs: list[str] = []

    async def seen(dialog: Any) -> None:
        dialogs.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", seen)
    await page.goto(f"{sb.url}/sandbox")
    await page.locator("details.teams-pane summary").click()
    pane = page.locator("details.teams-pane")
    await expect(pane.locator("#teams-empty")).to_be_visible()
    await page.get_by_test_id("teams-ask").click()
    card = pane.get_by_test_id("teams-card")
    await expect(card).to_have_count(1)
    await expect(pane.locator("#teams-empty")).to_be_hidden()
    # Names, not object ids; bold, not asterisks.
    await expect(card).to_contain_text("Triggered by: Alice")
    await expect(card).not_to_contain_text(PEOPLE["alice"])
    await expect(card).not_to_contain_text("**")
    await expect(card.locator("strong", has_text="Parameters")).to_have_count(1)
    await expect(card.locator("dd").first).to_have_text("12900")
    # Mallory's press is refused, said on the card; nothing blocks the page.
    await card.get_by_label("Pressing as").select_option("mallory")
    await card.get_by_role("button", name="Approve", exact=True).click()
    refusal = card.get_by_test_id("teams-refusal")
    await expect(refusal).to_contain_text("Mallory:")
    await expect(refusal).to_contain_text("approver")
    assert dialogs == []
    # Alice approves: the card is updated to its outcome, the refusal gone with the buttons.
    await card.get_by_label("Pressing as").select_option("alice")
    await card.get_by_role("button", name="Approve", exact=True).click()
    await expect(card).to_contain_text("Approved by Alice")
    await expect(card.get_by_test_id("teams-refusal")).to_have_count(0)
    assert dialogs == []
    await page.screenshot(path="/tmp/sandbox-teams.png")
    # The Slack channel offers the same: Alice asks in #support, and her card appears.
    await page.get_by_test_id("ask-here").click()
    slack_card = page.locator(
        ".message:not(.ephemeral)", has=page.locator(".bk-header", has_text="issue_refund")
    )
    await expect(slack_card).to_have_count(1)
    await expect(page.locator("#empty")).to_have_count(0)
