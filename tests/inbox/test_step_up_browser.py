"""Step-up in headless Chromium with a virtual authenticator (the DevTools Protocol's
`WebAuthn` domain): an approver signs in through the emulated OpenID provider, adds a passkey,
and confirms Approves with it; a signature for another call, a passkey without user
verification and a removed passkey are refused; the Slack card links to the inbox instead of
offering Approve, and a forged Slack Approve is refused.

Needs Playwright and a Chromium, as `tests/inbox/test_browser.py` (skipped otherwise). The
app is reached at http://localhost:PORT: WebAuthn takes `localhost` as a relying party id
(an IP address is none) and as a secure context over plain HTTP.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

from contracts.grants import verify_grant
from tests.harness import press, until, until_async
from tests.inbox.test_browser import chromium, shot, sign_in
from tests.inbox.world import SLACK_SECRET, World, inbox_world, served
from tests.processes import free_port

__all__ = ["chromium"]  # the fixture, imported for the tests below

POLICY = """
[defaults]
timeout = "30m"

[tools.wire_funds]
kind = "danger"
approvers = ["requester"]
step_up = true

[tenants.acme]
slack_team = "T0ACME"
admins = { dashboard = ["ada@acme.example", "bob@acme.example"] }
"""

CALL = {"iban": "DE89370400440532013000", "amountCents": 4_500_000}


async def ask(w: World, key: str, call: str, surface: dict[str, Any] | None = None) -> str:
    r = await w.h.client.post(
        "/v1/approvals",
        headers=w.h.auth(key),
        json={
            "executionId": f"run_{call}",
            "toolCallId": call,
            "toolName": "wire_funds",
            "parameters": {**CALL, "reference": call},
            "surface": surface or {"type": "dashboard", "userId": "ada@acme.example"},
        },
    )
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


async def status_of(w: World, key: str, aid: str) -> str:
    return str((await w.h.client.get(f"/v1/approvals/{aid}", headers=w.h.auth(key))).json()["status"])


async def authenticator(page: Any, verified: bool = True) -> tuple[Any, str]:
    """A CTAP2 platform authenticator with user verification, pressed automatically."""
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("WebAuthn.enable", {"enableUI": False})
    added = await cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": verified,
                "automaticPresenceSimulation": True,
            }
        },
    )
    return cdp, str(added["authenticatorId"])


async def audit(w: World, key: str, aid: str) -> list[dict[str, Any]]:
    r = await w.h.client.get(f"/v1/approvals/{aid}/audit", headers=w.h.auth(key))
    return list(r.json()["events"])


async def test_a_step_up_call_is_approved_only_with_a_passkey_for_that_very_call(
    chromium: Any, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    # A bound for a page gone wrong, not a speed check: the suite's workers share 2 cores.
    expect.set_options(timeout=30_000)
    port = free_port()
    url = f"http://localhost:{port}"
    async with inbox_world(POLICY, public_url=url, slack=True) as w:
        acme = await w.h.create_tenant("acme")
        first, second = await ask(w, acme, "w1"), await ask(w, acme, "w2")
        async with served(w.h.app, port):
            context = await chromium.new_context(viewport={"width": 1100, "height": 900})
            ada = await context.new_page()
            errors: list[str] = []
            ada.on("pageerror", lambda exc: errors.append(str(exc)))
            cdp, device = await authenticator(ada)
            await sign_in(ada, url, "Ada Admin")

            # The list offers no Approve for a step-up call, only the way to the passkey.
            card = ada.locator(f".card:has(#{first})")
            await expect(card.get_by_role("link", name="Approve with a passkey")).to_be_visible()
            await expect(card.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
            token = await ada.locator('input[name="csrf"]').first.get_attribute("value")
            plain = await ada.request.post(
                f"{url}/inbox/approvals/{first}/answer",
                form={"decision": "approve", "csrf": token},
                max_redirects=0,
            )
            assert plain.status == 403 and "needs step-up" in await plain.text()

            # No passkey yet: the step-up page sends the approver to add one.
            await card.get_by_role("link", name="Approve with a passkey").click()
            await expect(ada.locator(".refusal")).to_contain_text("Add a passkey")
            await ada.goto(f"{url}/inbox/passkeys")
            await ada.get_by_label("Name").fill("Work laptop")
            await ada.get_by_role("button", name="Add a passkey").click()
            await expect(ada.locator(".passkey h3")).to_have_text(["Work laptop"])
            held = (await cdp.send("WebAuthn.getCredentials", {"authenticatorId": device}))["credentials"]
            assert len(held) == 1
            await ada.screenshot(path=shot(tmp_path, "passkeys"), full_page=True)

            # A signature made for one call, posted for another, approves neither.
            async def to_second(route: Any) -> None:
                if route.request.method == "POST":
                    await route.continue_(url=f"{url}/inbox/approvals/{second}/step-up")
                else:
                    await route.continue_()

            await ada.route(f"{url}/inbox/approvals/{first}/step-up", to_second)
            await ada.goto(f"{url}/inbox/approvals/{first}/step-up")
            await ada.get_by_role("button", name="Approve with a passkey").click()
            await expect(ada.locator("#passkey-status")).to_contain_text(
                f"this signature was made for approval {first}, not {second}"
            )
            await ada.unroute(f"{url}/inbox/approvals/{first}/step-up")
            assert await status_of(w, acme, first) == "pending"
            assert await status_of(w, acme, second) == "pending"

            # The passkey confirms the call the page shows: approved, the grant says how.
            waiting = asyncio.create_task(
                w.h.client.get(f"/v1/approvals/{first}?wait=30", headers=w.h.auth(acme))
            )
            await w.h.waiters()
            await ada.goto(f"{url}/inbox/approvals/{first}/step-up")
            await ada.screenshot(path=shot(tmp_path, "step-up"), full_page=True)
            await ada.get_by_label("Comment").fill("Checked with the CFO")
            await ada.get_by_role("button", name="Approve with a passkey").click()
            decided = (await waiting).json()
            assert decided["status"] == "approved" and decided["comment"] == "Checked with the CFO"
            assert decided["decidedBy"]["userId"] == "ada@acme.example"
            jwks = (await w.h.client.get("/v1/keys")).json()
            claims = verify_grant(
                decided["grant"],
                jwks,
                tool_name="wire_funds",
                parameters={**CALL, "reference": "w1"},
                now=w.h.clock(),
            )
            assert claims.amr == ("webauthn",)
            await ada.wait_for_url(f"{url}/inbox/")
            events = await audit(w, acme, first)
            confirmed = [e["data"] for e in events if e["event"] == "passkey_confirmed"]
            # DevTools gives the id in standard base64; WebAuthn and the audit in base64url.
            cid = base64.urlsafe_b64encode(base64.b64decode(held[0]["credentialId"])).decode().rstrip("=")
            assert confirmed == [{"credentialId": cid, "userVerified": True}]
            refused = [e["data"]["code"] for e in events if e["event"] == "decision_refused"]
            assert refused == ["STEP_UP_REQUIRED"]  # the plain Approve above, audited

            # Slack: the card links to the inbox instead of Approve; a forged Approve is refused.
            slack = await ask(
                w,
                acme,
                "s1",
                {"type": "slack", "teamId": "T0ACME", "channelId": "C0PAY", "userId": "U0ADMIN"},
            )
            await w.h.delivered(slack)
            (posted,) = await until(lambda: [m for m in w.emu.messages if m.method == "chat.postMessage"])
            buttons = {
                e["action_id"]: e for b in posted.blocks if b["type"] == "actions" for e in b["elements"]
            }
            assert "cosigner.approve" not in buttons and "cosigner.deny" in buttons
            link = buttons["cosigner.step_up"]
            assert link["text"]["text"] == "Approve in Cosigner"
            assert link["url"] == f"{url}/inbox/approvals/{slack}/step-up"
            forged = dict(buttons["cosigner.deny"], action_id="cosigner.approve")
            posted.blocks.append({"type": "actions", "elements": [forged]})
            clicked = await press(
                w.h.client,
                posted,
                "cosigner.approve",
                secret=SLACK_SECRET,
                app_id=w.emu.app_id,
                user="U0ADMIN",
                team="T0ACME",
            )
            assert clicked.status_code == 200
            codes = await until_refused(w, acme, slack)
            assert codes == ["STEP_UP_REQUIRED"] and await status_of(w, acme, slack) == "pending"
            # The link asks nothing of Slack: the signed-in approver confirms with her passkey.
            await ada.goto(link["url"])
            await ada.get_by_role("button", name="Approve with a passkey").click()
            await ada.wait_for_url(f"{url}/inbox/")
            body = (await w.h.client.get(f"/v1/approvals/{slack}", headers=w.h.auth(acme))).json()
            assert body["status"] == "approved" and body["decidedBy"]["userId"] == "U0ADMIN"

            # User verification absent: the browser itself refuses to sign (the server refuses an
            # assertion without the UV flag too: tests/inbox/test_step_up.py); nothing is approved.
            await cdp.send("WebAuthn.setUserVerified", {"authenticatorId": device, "isUserVerified": False})
            await ada.goto(f"{url}/inbox/approvals/{second}/step-up")
            await ada.get_by_role("button", name="Approve with a passkey").click()
            await expect(ada.locator("#passkey-status")).to_contain_text("Not done")
            assert await status_of(w, acme, second) == "pending"
            await cdp.send("WebAuthn.setUserVerified", {"authenticatorId": device, "isUserVerified": True})

            # A removed passkey: an assertion it made is refused once it is gone.
            captured: list[str] = []

            async def keep(route: Any) -> None:
                if route.request.method == "POST":
                    captured.append(route.request.post_data or "")
                    await route.abort()
                else:
                    await route.continue_()

            await ada.route(f"{url}/inbox/approvals/{second}/step-up", keep)
            await ada.goto(f"{url}/inbox/approvals/{second}/step-up")
            await ada.get_by_role("button", name="Approve with a passkey").click()
            await until(lambda: captured, 30)
            await ada.unroute(f"{url}/inbox/approvals/{second}/step-up")
            await ada.goto(f"{url}/inbox/passkeys")
            await ada.get_by_role("button", name="Remove Work laptop").click()
            await expect(ada.locator(".empty")).to_contain_text("no passkey yet")
            late = await ada.request.post(
                f"{url}/inbox/approvals/{second}/step-up",
                data=captured[0],
                headers={"Content-Type": "application/json"},
            )
            assert late.status == 403 and "not one of yours" in await late.text()
            assert await status_of(w, acme, second) == "pending"
            assert errors == []
            await context.close()


async def until_refused(w: World, key: str, aid: str) -> list[str]:
    """The codes of the refused answers on the approval's audit trail, once there is one."""

    async def codes() -> list[str] | None:
        found = [e["data"]["code"] for e in await audit(w, key, aid) if e["event"] == "decision_refused"]
        return found or None

    found: list[str] = await until_async(codes)
    return found
