"""The inbox's pages in headless Chromium: answering on a request's page with `a`/`d` and a
confirm, the same without JavaScript, every page on a 390-pixel-wide phone without sideways
scrolling, and no serious or critical axe-core violation on any page.

With COSIGNER_DOCS_SCREENSHOTS=1 the screenshots land in docs/images/ for docs/inbox.md.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.allowances.test_inbox_allowances import press
from tests.harness import cosigner_app, until
from tests.inbox import test_edit as editing
from tests.inbox.a11y import PHONE, axe_source, scroll_width, violations
from tests.inbox.test_browser import chromium, shot, sign_in
from tests.inbox.test_step_up import enrolled
from tests.inbox.world import inbox_world, served
from tests.processes import free_port

__all__ = ["chromium"]  # the fixture, used by name
DESKTOP = {"width": 1100, "height": 900}
# The pages of the newer features too: a step-up call (its page, and Ada's passkeys) and a
# call offering "Allow for …" (her standing allows).
EVERY_PAGE_POLICY = (
    editing.POLICY
    + """
[tools.wire_funds]
kind = "danger"
approvers = ["requester"]
step_up = true

[tools.send_credit]
kind = "danger"
approvers = ["requester"]
allow_for = "1h"
allow_for_at_most = ["amountCents"]
"""
)


async def checked(page: Any, url: str, name: str, tmp_path: Path, problems: list[str]) -> None:
    """Open `url` and note what fails: an axe-core serious or critical violation, or (at the
    phone's width) a page wider than the screen; a screenshot for the docs either way."""
    await page.goto(url)
    await record(page, name, tmp_path, problems)


async def record(page: Any, name: str, tmp_path: Path, problems: list[str]) -> None:
    """Check the page as it stands (see `checked`)."""
    for v in await violations(page):
        problems.append(f"{name}: {v['id']} ({v['impact']}) {v['help']}: {v['nodes'][:3]}")
    width = page.viewport_size["width"]
    if width <= PHONE["width"] and (wide := await scroll_width(page)) > width:
        problems.append(f"{name}: {wide} pixels wide on a {width}-pixel screen")
    await page.screenshot(path=shot(tmp_path, name), full_page=True)


async def test_a_request_page_answers_with_shortcuts_and_a_confirm_and_works_without_javascript(
    chromium: Any, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    # A bound for a page gone wrong, not a speed check: the suite's workers share 2 cores.
    expect.set_options(timeout=30_000)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    async with inbox_world(editing.POLICY, public_url=url, oidc_display_name="Slack") as w:
        acme = await w.h.create_tenant("acme")
        refund = await w.ask(acme, "ada@acme.example", call="c1")
        credit = await w.ask(acme, "ada@acme.example", call="c2")
        async with served(w.h.app, port):
            ada = await chromium.new_page(viewport=DESKTOP)
            errors: list[str] = []
            ada.on("pageerror", lambda exc: errors.append(str(exc)))
            await sign_in(ada, url, "Ada Admin")
            await expect(ada).to_have_title("(2) Cosigner inbox")
            await ada.locator(f"#{refund} h3 a").click()
            await expect(ada).to_have_url(f"{url}/inbox/approvals/{refund}")
            await expect(ada.locator("#shortcuts-hint")).to_be_visible()

            # `d`, then Cancel in the confirm: nothing is decided.
            asked: list[str] = []

            async def dismiss(dialog: Any) -> None:
                asked.append(dialog.message)
                await dialog.dismiss()

            ada.once("dialog", dismiss)
            await ada.keyboard.press("d")
            await until(lambda: len(asked) == 1, 30)
            assert asked[0] == "Deny issue_refund (amountCents 12900, cardToken [REDACTED])?"
            body = (await w.h.client.get(f"/v1/approvals/{refund}", headers=w.h.auth(acme))).json()
            assert body["status"] == "pending"
            # Typing `a` in the comment is typing, not a shortcut.
            await ada.get_by_label("Comment").fill("ok after a call")
            assert len(asked) == 1

            # `a`, then OK: approved with the comment, and the page says so in place.
            async def accept(dialog: Any) -> None:
                asked.append(dialog.message)
                await dialog.accept()

            ada.once("dialog", accept)
            waiting = asyncio.create_task(
                w.h.client.get(f"/v1/approvals/{refund}?wait=30", headers=w.h.auth(acme))
            )
            await w.h.waiters()
            await ada.locator("main h1").click()  # focus leaves the comment field
            await ada.keyboard.press("a")
            decided = (await waiting).json()
            assert asked[1] == "Approve issue_refund (amountCents 12900, cardToken [REDACTED])?"
            assert decided["status"] == "approved" and decided["comment"] == "ok after a call"
            await expect(ada.locator("#done")).to_contain_text(
                "Approved issue_refund (amountCents 12900, cardToken [REDACTED]) — grant issued."
            )
            await expect(ada.locator(".comment").first).to_have_text("ok after a call")
            await expect(ada.locator(".timeline")).to_contain_text("Approved")
            await expect(ada).to_have_title("(1) issue_refund · Cosigner inbox")

            # Without JavaScript the same page answers with its buttons.
            plain = await chromium.new_context(viewport=DESKTOP, java_script_enabled=False)
            page = await plain.new_page()
            await sign_in(page, url, "Ada Admin")
            await page.goto(f"{url}/inbox/approvals/{credit}")
            await page.get_by_label("Comment").fill("Not without a receipt")
            await page.get_by_role("button", name="Deny", exact=True).click()
            await expect(page.locator("#done")).to_contain_text(
                "Denied issue_refund (amountCents 12900, cardToken [REDACTED]). "
                "Your comment: Not without a receipt"
            )
            body = (await w.h.client.get(f"/v1/approvals/{credit}", headers=w.h.auth(acme))).json()
            assert body["status"] == "denied"
            await plain.close()
            assert errors == []
            await ada.close()


async def test_every_inbox_page_fits_a_phone_and_has_no_serious_accessibility_violation(
    chromium: Any, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    expect.set_options(timeout=30_000)
    axe_source()  # installed (or skipped) before any server starts
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    problems: list[str] = []
    async with inbox_world(EVERY_PAGE_POLICY, public_url=url, oidc_display_name="Slack") as w:
        acme = await w.h.create_tenant("acme")
        editable = (await editing.ask(w, acme))["approvalId"]
        wire = await w.ask(acme, "ada@acme.example", tool="wire_funds", call="w1")
        # Ada has a passkey, and granted a standing allow (in the inbox, outside the browser).
        await enrolled(w)
        allowed = await w.ask(acme, "ada@acme.example", tool="send_credit", call="a1")
        assert (await press(w, w.h.client, allowed, allow_for="1h")).status_code == 303
        refund = await w.ask(acme, "ada@acme.example", call="c1")
        credit = await w.ask(acme, "ada@acme.example", call="c2")
        over = {**editing.CALL, "amountCents": 250000}  # above the policy's deny_above: denied outright
        r = await w.h.client.post(
            "/v1/approvals",
            headers=w.h.auth(acme),
            json={
                "executionId": "run_big",
                "toolCallId": "big",
                "toolName": "issue_refund",
                "parameters": over,
                "surface": {"type": "dashboard", "userId": "ada@acme.example"},
            },
        )
        assert r.status_code == 403, r.text
        async with served(w.h.app, port):
            for size, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
                context = await chromium.new_context(viewport=size)
                page = await context.new_page()
                await checked(page, f"{url}/inbox/", f"sign-in{suffix}", tmp_path, problems)
                await sign_in(page, url, "Ada Admin")
                await record(page, f"waiting{suffix}", tmp_path, problems)
                await checked(
                    page, f"{url}/inbox/approvals/{editable}", f"detail{suffix}", tmp_path, problems
                )
                await checked(
                    page, f"{url}/inbox/approvals/{editable}/edit", f"edit{suffix}", tmp_path, problems
                )
                await page.get_by_label("amountCents").fill("4000")
                await page.get_by_role("button", name="Review").click()
                await expect(page.locator("tr.change")).to_have_count(1)
                await record(page, f"edit-review{suffix}", tmp_path, problems)
                await checked(
                    page, f"{url}/inbox/approvals/apv_unknown", f"refused{suffix}", tmp_path, problems
                )
                await checked(page, f"{url}/inbox/passkeys", f"passkeys-listed{suffix}", tmp_path, problems)
                await checked(
                    page, f"{url}/inbox/approvals/{wire}/step-up", f"step-up-page{suffix}", tmp_path, problems
                )
                await checked(page, f"{url}/inbox/allowances", f"allowances{suffix}", tmp_path, problems)
                if not suffix:  # decide two, once: the pages after an answer
                    await page.goto(f"{url}/inbox/approvals/{refund}")
                    await page.get_by_label("Comment").fill("Refund agreed with the customer")
                    await page.get_by_role("button", name="Approve", exact=True).click()
                    await expect(page.locator("#done")).to_be_visible()
                    await page.goto(f"{url}/inbox/")
                    await (
                        page.locator(f".card:has(#{credit})")
                        .get_by_role("button", name="Deny", exact=True)
                        .click()
                    )
                    await expect(page.locator("#done")).to_be_visible()
                    await record(page, "answered", tmp_path, problems)
                else:
                    await checked(
                        page, f"{url}/inbox/?answered={credit}", "answered-phone", tmp_path, problems
                    )
                await checked(page, f"{url}/inbox/approvals/{refund}", f"trail{suffix}", tmp_path, problems)
                await checked(page, f"{url}/inbox/history", f"history{suffix}", tmp_path, problems)
                await checked(
                    page,
                    f"{url}/inbox/history?status=denied",
                    f"history-filtered{suffix}",
                    tmp_path,
                    problems,
                )
                await context.close()
    # The page an inbox without sign-in shows.
    async with cosigner_app() as h:
        port = free_port()
        async with served(h.app, port):
            for size, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
                page = await chromium.new_page(viewport=size)
                await checked(page, f"http://127.0.0.1:{port}/inbox/", f"off{suffix}", tmp_path, problems)
                await page.close()
    assert problems == []


async def test_the_accessibility_check_finds_what_it_looks_for(chromium: Any) -> None:
    # The check above can fail: a nameless button and an image without alt text are critical.
    page = await chromium.new_page(viewport=PHONE)
    await page.set_content(
        '<html lang="en"><title>t</title><main><img src="data:,"><button></button>'
        '<div style="width:600px">wide</div></main></html>'
    )
    assert {v["id"] for v in await violations(page)} >= {"image-alt", "button-name"}
    assert await scroll_width(page) > PHONE["width"]
    await page.close()
