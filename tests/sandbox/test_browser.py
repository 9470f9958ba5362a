"""The sandbox page in headless Chromium: press Approve on a card, the example agent hears it.

Needs Playwright's Python package (in the `dev` extra, which `./run` installs) and a
Chromium: Debian's `chromium` (`apt-get install chromium`), one named by
COSIGNER_TEST_CHROMIUM, or Playwright's own (`python -m playwright install chromium`).
Skipped, saying which is missing, otherwise.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from bot.dev.sandbox import Sandbox
from tests.sandbox.delivery import shown_card

SCREENSHOT = "/tmp/sandbox.png"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_binary() -> str | None:
    """A Chromium to drive: COSIGNER_TEST_CHROMIUM, Debian's, or one on PATH."""
    for candidate in (
        os.environ.get("COSIGNER_TEST_CHROMIUM"),
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """A headless Chromium under Playwright, or a skip naming what is missing."""
    try:
        from playwright.async_api import Error, async_playwright
    except ImportError as exc:
        pytest.skip(f"Playwright is not installed ({exc}); run `pip install -e '.[dev]'`")
    binary = chromium_binary()
    async with async_playwright() as pw:
        try:
            if binary:
                found = await pw.chromium.launch(executable_path=binary, args=ARGS)
            else:
                found = await pw.chromium.launch(args=ARGS)
        except Error as exc:
            where = binary or "Playwright's bundled Chromium"
            pytest.skip(
                f"no Chromium could be started ({where}: {str(exc).splitlines()[0]}); "
                "install one with `apt-get install chromium` or "
                "`python -m playwright install chromium`"
            )
        try:
            yield found
        finally:
            await found.close()


async def test_approve_in_the_page_reaches_the_agent_and_updates_the_card(
    sb: Sandbox, browser: Any, run_agent: Any, wait_until: Any, http: httpx.AsyncClient
) -> None:
    from playwright.async_api import expect

    # A bound for a page gone wrong, not a speed check: the suite's workers share 2 cores.
    expect.set_options(timeout=30_000)

    agent = await run_agent("--timeout", "90")
    await wait_until(lambda: agent.said("waiting for decisions"), 20)
    page = await browser.new_page(viewport={"width": 1440, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(f"{sb.url}/sandbox")

    refund = page.locator(".message:not(.ephemeral)", has=page.locator(".bk-header", has_text="issue_refund"))
    credit = page.locator(".message:not(.ephemeral)", has=page.locator(".bk-header", has_text="issue_credit"))
    await expect(refund).to_have_count(1)
    # The card as Slack would show it: redacted parameters in a code block, a mention, a date.
    await expect(refund.locator("pre.bk-code")).to_contain_text('"cardToken": "[REDACTED]"')
    await expect(refund.locator(".mention").first).to_have_text("@Alice")
    await expect(refund.locator(".bk-context")).not_to_contain_text("<!date")

    for title in ("issue_refund", "issue_credit"):  # answerable once on the record (delivery.py)
        await shown_card(http, title)

    # Cosigner's Home tab, as Alice (the page opens it with the signed app_home_opened event):
    # what waits for her, with a link to each card.
    await page.get_by_test_id("open-home").click()
    home = page.get_by_test_id("home-tab")
    await expect(home).to_contain_text("Waiting for you")
    await expect(home).to_contain_text("issue_refund")
    await expect(home.locator("a[href*='/archives/C0DEMO/']").first).to_be_visible()
    await page.locator("#channels li", has_text="support").click()

    # Mallory is in the channel but not an approver: her click is refused, and she is told why.
    await page.select_option("#as", "outsider")
    await credit.get_by_role("button", name="Approve", exact=True).click()
    note = page.locator(".message.ephemeral")
    await expect(note).to_contain_text("NOT_AN_APPROVER")
    await expect(note).to_contain_text("Only visible to Mallory")

    # Alice approves the refund; the danger button asks for confirmation first.
    await page.select_option("#as", "requester")
    await refund.get_by_role("button", name="Approve", exact=True).click()
    dialog = page.locator("#confirm")
    await expect(dialog).to_be_visible()
    await expect(dialog).to_contain_text("Cosigner cannot undo it")
    await dialog.get_by_role("button", name="Approve").click()
    await wait_until(lambda: agent.said("DECISION issue_refund APPROVED by U0ALICE via slack"), 15)
    await expect(refund.locator("button")).to_have_count(0)
    await expect(refund).to_contain_text("Approved by @Alice")
    await expect(refund.locator(".edited")).to_have_count(1)

    # The phone answers the emailed request by SMS.
    await expect(page.locator(".bubble.in").first).to_contain_text("send_email")
    await page.fill("#reply-body", "YES")
    await page.press("#reply-body", "Enter")
    await wait_until(lambda: agent.said("DECISION send_email APPROVED"), 15)
    await expect(page.locator(".bubble.out")).to_have_text(["YES"])
    await page.screenshot(path=SCREENSHOT)

    # Deny opens a modal; the comment reaches the agent with the decision.
    await credit.get_by_role("button", name="Deny", exact=True).click()
    modal = page.locator("#modal")
    await expect(modal).to_be_visible()
    await modal.locator("textarea").fill("Check with the customer first")
    await modal.get_by_role("button", name="Deny").click()
    await expect(modal).to_be_hidden()
    assert await agent.finish() == 0, "\n".join(agent.lines)
    # issue_credit runs through the SDK's gate: a denial means its body never ran.
    assert agent.said(
        "DID NOT RUN issue_credit: issue_credit was denied by person: Check with the customer first"
    )
    await expect(credit.locator("button")).to_have_count(0)
    assert errors == []
