"""The inbox's service worker and Web Push subscription in headless Chromium.

What a browser does is tested here, as far as headless Chromium can: the worker registers
for `/inbox/`, the button is offered, a press asks the Push API for a subscription with the
server's VAPID key and stores it (its `toJSON()` shape checked by the server), and the worker
shows a notification from a message handed to it, naming what the push names and opening
the request's page. Headless Chromium has no push service to deliver a real push through
(its `subscribe` fails with "AbortError: Registration failed - permission denied"); the
message path stands in for `push` there, and the server side of delivery is tested against
a decrypting push service (`test_push.py`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.inbox.test_answers import POLICY_BY_EMAIL
from tests.inbox.test_browser import chromium, sign_in
from tests.inbox.world import inbox_world, served
from tests.processes import free_port

__all__ = ["chromium"]

# The worker answers on the message's port once `showNotification` has resolved, so the page
# waits for that answer (a condition), then reads the notifications with the message's tag.
NOTIFIED = """
async (payload) => {
  const registration = await navigator.serviceWorker.ready;
  const said = await new Promise(resolve => {
    const channel = new MessageChannel();
    channel.port1.onmessage = event => resolve(event.data);
    registration.active.postMessage({ type: "show", payload }, [channel.port2]);
  });
  if (!said.shown) return said;
  const shown = await registration.getNotifications({ tag: payload.tag });
  return shown.map(n => ({ title: n.title, body: n.body, tag: n.tag, url: n.data.url }));
}
"""

SUBSCRIBE = """
async (key) => {
  const registration = await navigator.serviceWorker.ready;
  const raw = atob(key.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((key.length + 3) % 4));
  const bytes = Uint8Array.from(raw, c => c.charCodeAt(0));
  try {
    const options = { userVisibleOnly: true, applicationServerKey: bytes };
    const sub = await registration.pushManager.subscribe(options);
    return { ok: true, json: sub.toJSON() };
  } catch (e) {
    return { ok: false, error: e.name + ": " + e.message };
  }
}
"""


async def test_the_worker_registers_and_shows_a_notification_that_opens_the_request(
    chromium: Any, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    expect.set_options(timeout=30_000)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    async with inbox_world(POLICY_BY_EMAIL, public_url=url) as w, served(w.h.app, port):
        context = await chromium.new_context()
        await context.grant_permissions(["notifications"], origin=url)
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await sign_in(page, url, "Ada Admin")
        scope = await page.evaluate("navigator.serviceWorker.ready.then(r => r.scope)")
        assert scope == f"{url}/inbox/"
        await expect(page.locator("#push-on")).to_be_visible()
        key = (await page.evaluate("fetch('/inbox/push/key').then(r => r.json())"))["publicKey"]
        got = await page.evaluate(SUBSCRIBE, key)
        if got["ok"]:  # a Chromium with a push service: the shape the server stores
            sub = got["json"]
            assert sub["endpoint"].startswith("https://") and set(sub["keys"]) == {"p256dh", "auth"}
        else:
            assert got["error"].startswith("AbortError"), got
        await page.click("#push-on")
        state = page.locator("#push-state")
        await expect(state).not_to_be_empty()
        if not got["ok"]:
            await expect(state).to_contain_text("Not turned on")

        payload = {
            "title": "Approval needed: issue_refund",
            "body": "issue_refund for acme waits for your answer.",
            "url": "/inbox/approvals/apv_0123",
            "tag": "apv_0123",
        }
        # A bound for a worker that never answers, not a speed check (the suite's 30 s).
        shown = await asyncio.wait_for(page.evaluate(NOTIFIED, payload), 30)
        assert shown == [
            {
                "title": "Approval needed: issue_refund",
                "body": "issue_refund for acme waits for your answer.",
                "tag": "apv_0123",
                "url": "/inbox/approvals/apv_0123",
            }
        ]
        # A link elsewhere is not followed: the worker opens inbox pages only.
        elsewhere = {"title": "t", "url": "https://evil.example/", "tag": "x"}
        other = await asyncio.wait_for(page.evaluate(NOTIFIED, elsewhere), 30)
        assert other == [{"title": "t", "body": "", "tag": "x", "url": "/inbox/"}]
        assert errors == []
        await context.close()
