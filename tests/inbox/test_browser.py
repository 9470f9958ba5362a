"""The inbox in headless Chromium: sign in with the emulated Slack, answer, and be refused.

Needs Playwright and a Chromium, as `tests/sandbox/test_browser.py` (skipped otherwise).
With COSIGNER_DOCS_SCREENSHOTS=1 the screenshots land in docs/images/ for docs/inbox.md.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.inbox.test_answers import POLICY_BY_EMAIL
from tests.inbox.world import inbox_world, served
from tests.processes import free_port
from tests.sandbox.test_browser import ARGS, chromium_binary

DOCS = Path(__file__).resolve().parents[2] / "docs" / "images"


def shot(tmp_path: Path, name: str) -> str:
    """Where a screenshot goes: docs/images when asked for, else the test's own folder."""
    folder = DOCS if os.environ.get("COSIGNER_DOCS_SCREENSHOTS") == "1" else tmp_path
    return str(folder / f"inbox-{name}.png")


@pytest.fixture
async def chromium() -> AsyncIterator[Any]:
    """A headless Chromium under Playwright, or a skip naming what is missing."""
    try:
        from playwright.async_api import async_playwright
    except ImportError as exc:
        pytest.skip(f"Playwright is not installed ({exc}); run `pip install -e '.[dev]'`")
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium; install one with `apt-get install chromium`")
    async with async_playwright() as pw:
        found = await pw.chromium.launch(executable_path=binary, args=ARGS)
        try:
            yield found
        finally:
            await found.close()


async def sign_in(page: Any, url: str, who: str) -> None:
    """Sign in through the emulated "Sign in with Slack" as the person named `who`."""
    await page.goto(f"{url}/inbox/")
    await page.click("#sign-in")
    await page.get_by_role("button", name=who).click()
    await page.wait_for_url(f"{url}/inbox/")


async def test_an_approver_answers_in_the_inbox_and_others_are_refused(chromium: Any, tmp_path: Path) -> None:
    from playwright.async_api import expect

    # A bound for a page gone wrong, not a speed check: the suite's workers share 2 cores.
    expect.set_options(timeout=30_000)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    async with inbox_world(POLICY_BY_EMAIL, public_url=url, inbox_session_seconds=3600) as w:
        acme, globex = await w.h.create_tenant("acme"), await w.h.create_tenant("globex")
        refund = await w.ask(acme, "ada@acme.example", call="c1")
        credit = await w.ask(acme, "ada@acme.example", call="c2")
        foreign = await w.ask(globex, "ada@acme.example", call="c3")
        async with served(w.h.app, port):
            ada = await chromium.new_page(viewport={"width": 1100, "height": 900})
            errors: list[str] = []
            ada.on("pageerror", lambda exc: errors.append(str(exc)))
            await ada.goto(f"{url}/inbox/")
            await ada.screenshot(path=shot(tmp_path, "sign-in"))
            await sign_in(ada, url, "Ada Admin")
            cards = ada.locator("#waiting .card")
            await expect(cards).to_have_count(2)
            await expect(ada.locator(f"#{refund}")).to_contain_text('"cardToken": "[REDACTED]"')
            await expect(ada.locator(f"#{refund}")).to_contain_text("its claim, not verified")
            await expect(ada.locator(f"#{foreign}")).to_have_count(0)  # another tenant's
            await ada.screenshot(path=shot(tmp_path, "waiting"), full_page=True)

            # The agent waits; Approve reaches it with a grant.
            waiting = asyncio.create_task(
                w.h.client.get(f"/v1/approvals/{refund}?wait=30", headers=w.h.auth(acme))
            )
            await w.h.waiters()
            await ada.locator(f".card:has(#{refund})").get_by_role("button", name="Approve").click()
            decided = (await waiting).json()
            assert decided["status"] == "approved" and decided["grant"]
            assert decided["decidedBy"]["userId"] == "ada@acme.example"

            # Deny with a comment.
            credit_card = ada.locator(f".card:has(#{credit})")
            await credit_card.get_by_label("Comment").fill("Check with the customer first")
            await credit_card.get_by_role("button", name="Deny", exact=True).click()
            await expect(ada.locator(".empty")).to_contain_text("Nothing waits for you")
            body = (await w.h.client.get(f"/v1/approvals/{credit}", headers=w.h.auth(acme))).json()
            assert body["status"] == "denied" and body["comment"] == "Check with the customer first"

            # A new request appears without a reload.
            fresh = await w.ask(acme, "ada@acme.example", call="c4")
            await expect(ada.locator(f"#{fresh}")).to_have_count(1, timeout=15000)

            # A form posted without its CSRF token is refused (the browser's own cookie rides along).
            forged = await ada.request.post(
                f"{url}/inbox/approvals/{fresh}/answer", form={"decision": "approve"}, max_redirects=0
            )
            assert forged.status == 403
            # Another tenant's request, answered by id, is refused as unknown.
            token = await ada.locator('input[name="csrf"]').first.get_attribute("value")
            by_id = await ada.request.post(
                f"{url}/inbox/approvals/{foreign}/answer",
                form={"decision": "approve", "csrf": token},
                max_redirects=0,
            )
            assert by_id.status == 404

            # Bob signs in too, but is not an approver of Ada's request.
            bob_context = await chromium.new_context(viewport={"width": 390, "height": 844})
            bob = await bob_context.new_page()
            await sign_in(bob, url, "Bob Builder")
            await expect(bob.locator(f"#{fresh}")).to_have_count(0)
            await bob.screenshot(path=shot(tmp_path, "phone"), full_page=True)
            bob_token = await bob.locator('input[name="csrf"]').first.get_attribute("value")
            refused = await bob.request.post(
                f"{url}/inbox/approvals/{fresh}/answer",
                form={"decision": "approve", "csrf": bob_token},
                max_redirects=0,
            )
            assert refused.status == 403 and "not an approver" in await refused.text()

            # History with the audit trail.
            await ada.goto(f"{url}/inbox/history")
            await expect(ada.locator(f"#{credit}")).to_contain_text("denied")
            await ada.screenshot(path=shot(tmp_path, "history"), full_page=True)

            # Nothing the refused posts touched was decided.
            for key, aid in ((acme, fresh), (globex, foreign)):
                still = (await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()
                assert still["status"] == "pending"

            # The session expires: the next page is the sign-in.
            w.h.advance(3601)
            await ada.goto(f"{url}/inbox/")
            await expect(ada.locator("#sign-in")).to_be_visible()
            assert errors == []
            await bob_context.close()
            await ada.close()


async def test_an_approver_edits_reviews_and_approves_the_edited_call(chromium: Any, tmp_path: Path) -> None:
    from playwright.async_api import expect

    # A bound for a page gone wrong, not a speed check: the suite's workers share 2 cores.
    expect.set_options(timeout=30_000)

    from tests.inbox.test_edit import CALL, POLICY, ask

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    async with inbox_world(POLICY, public_url=url) as w:
        acme = await w.h.create_tenant("acme")
        refund = (await ask(w, acme))["approvalId"]
        async with served(w.h.app, port):
            ada = await chromium.new_page(viewport={"width": 1100, "height": 900})
            errors: list[str] = []
            ada.on("pageerror", lambda exc: errors.append(str(exc)))
            await sign_in(ada, url, "Ada Admin")
            await ada.locator(f".card:has(#{refund})").get_by_role("link", name="Edit").click()
            await expect(ada.get_by_role("heading", name="Edit before approving")).to_be_visible()
            # Typed inputs; the redacted cardToken is no input at all.
            await expect(ada.get_by_label("amountCents")).to_have_value("40000")
            await expect(ada.get_by_label("currency")).to_have_value("0")
            await expect(ada.locator('[name="f.cardToken"]')).to_have_count(0)

            # A value the schema refuses: the reason under its field, nothing decided.
            await ada.get_by_label("note").fill("x" * 41)
            await ada.get_by_role("button", name="Review").click()
            await expect(ada.locator(".problem")).to_contain_text("note: ")
            await expect(ada.locator(".problem")).to_contain_text("must be at most 40 characters long")

            await ada.get_by_label("note").fill("refund")
            await ada.get_by_label("amountCents").fill("4000")
            await ada.get_by_role("button", name="Review").click()
            change = ada.locator("tr.change")
            await expect(change).to_have_count(1)
            await expect(change.locator(".old")).to_have_text("40000")
            await expect(change.locator(".new")).to_have_text("4000")
            await ada.screenshot(path=shot(tmp_path, "edit-review"), full_page=True)

            waiting = asyncio.create_task(
                w.h.client.get(f"/v1/approvals/{refund}?wait=30", headers=w.h.auth(acme))
            )
            await w.h.waiters()
            await ada.get_by_role("button", name="Approve edited").click()
            decided = (await waiting).json()
            assert decided["status"] == "approved" and decided["edited"] is True
            assert decided["parameters"] == {**CALL, "amountCents": 4000, "cardToken": "[REDACTED]"}
            await expect(ada.locator(".empty")).to_contain_text("Nothing waits for you")
            assert errors == []
            await ada.close()
