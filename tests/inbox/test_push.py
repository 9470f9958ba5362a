"""Web Push from the inbox: a signed-in person subscribes a browser; a request waiting for
them is pushed there, encrypted to the browser's keys and signed with the server's VAPID key.

The push service on loopback (`tests.pushservice`) checks the VAPID JWT against the key it
names and decrypts each message with the browser's private key and auth secret (http_ece),
so every assertion is on what a browser would read. What the service answers drives the
rest: 410 removes the subscription, 429 and 500 are retried with backoff, 413 is recorded.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from bot.egress import LOOPBACK_ALLOW
from contracts.enums import JobKind
from storage.tables import jobs
from tests.harness import until, until_async
from tests.inbox.test_answers import POLICY_BY_EMAIL, csrf_of
from tests.inbox.world import World, inbox_world
from tests.pushservice import browser_keys, push_service

ADA = "ada@acme.example"


async def subscribe(
    w: World, client: httpx.AsyncClient, body: Any, csrf: str | None = None
) -> httpx.Response:
    token = csrf if csrf is not None else csrf_of((await client.get("/inbox/")).text)
    return await client.post("/inbox/push/subscriptions", json=body, headers={"X-CSRF-Token": token})


async def audit(w: World, key: str, aid: str, name: str) -> list[dict[str, Any]]:
    events = (await w.h.client.get(f"/v1/approvals/{aid}/audit", headers=w.h.auth(key))).json()["events"]
    return [e for e in events if e["event"] == name]


async def test_a_waiting_request_is_pushed_encrypted_to_the_browser_with_tool_and_tenant_only() -> None:
    async with push_service() as service, inbox_world(POLICY_BY_EMAIL, callback_allow=LOOPBACK_ALLOW) as w:
        key = await w.h.create_tenant("acme")
        await w.sign_in(w.h.client, "U0ADMIN")
        public = (await w.h.client.get("/inbox/push/key")).json()["publicKey"]
        assert len(public) == 87  # an uncompressed P-256 point, base64url
        made = await subscribe(w, w.h.client, {"subscription": service.subscribe("ada-phone")})
        assert made.status_code == 201, made.text
        aid = await w.ask(key, ADA)
        (got,) = await until(lambda: service.delivered)
        assert got.plaintext == {
            "title": "Approval needed: issue_refund",
            "body": "issue_refund for acme waits for your answer.",
            "url": f"/inbox/approvals/{aid}",
            "tag": aid,
        }
        # The VAPID JWT: signed by the server's key (checked by the service), for its origin,
        # expiring 12 hours after the app's clock, naming a contact.
        assert got.vapid_key == public
        assert got.claims["aud"] == f"http://127.0.0.1:{service.port}"
        assert got.claims["exp"] == int(w.h.clock()) + 12 * 3600
        assert got.claims["sub"].startswith(("mailto:", "https://"))
        assert got.headers["content-encoding"] == "aes128gcm" and int(got.headers["ttl"]) > 0
        assert got.headers["topic"] == aid.replace("_", "-")
        (sent,) = await until_async(lambda: audit(w, key, aid, "push_sent"))
        assert sent["data"] == {"sent": 1, "gone": 0, "failed": {}, "retrying": False}
        # The same key every time (kept sealed, not made again).
        assert (await w.h.client.get("/inbox/push/key")).json()["publicKey"] == public


async def test_a_request_for_someone_else_is_not_pushed() -> None:
    async with push_service() as service, inbox_world(POLICY_BY_EMAIL, callback_allow=LOOPBACK_ALLOW) as w:
        key = await w.h.create_tenant("acme")
        await w.sign_in(w.h.client, "U0BOB")
        assert (await subscribe(w, w.h.client, {"subscription": service.subscribe("bob")})).status_code == 201
        aid = await w.ask(key, ADA)
        await until_async(lambda: _job_done(w, aid))
        assert service.tried == 0


async def _job_done(w: World, aid: str) -> bool:
    placed = await w.h.desk.placed(aid)
    return placed is not None


async def _push_job_done(w: World, aid: str) -> bool:
    def done(tx: Any) -> bool:
        rows = tx.conn.execute(
            sa.select(jobs.c.done_at).where(jobs.c.approval_id == aid, jobs.c.kind == JobKind.PUSH.value)
        ).all()
        return bool(rows) and all(r.done_at is not None for r in rows)

    return bool(await w.h.engine.db.run_read(done))


async def test_a_gone_subscription_410_is_removed() -> None:
    async with push_service() as service, inbox_world(POLICY_BY_EMAIL, callback_allow=LOOPBACK_ALLOW) as w:
        key = await w.h.create_tenant("acme")
        await w.sign_in(w.h.client, "U0ADMIN")
        await subscribe(w, w.h.client, {"subscription": service.subscribe("old")})
        service.script = [410]
        first = await w.ask(key, ADA, call="c1")
        (failed,) = await until_async(lambda: audit(w, key, first, "push_failed"))
        assert failed["data"]["gone"] == 1 and failed["data"]["retrying"] is False
        second = await w.ask(key, ADA, call="c2")
        await until_async(lambda: _job_done(w, second))
        w.h.advance(5.0)
        assert service.tried == 1  # the second request found no subscription to push to


@pytest.mark.parametrize("status", [429, 500])
async def test_a_push_service_busy_or_failing_is_retried_with_backoff(status: int) -> None:
    async with push_service() as service, inbox_world(POLICY_BY_EMAIL, callback_allow=LOOPBACK_ALLOW) as w:
        key = await w.h.create_tenant("acme")
        await w.sign_in(w.h.client, "U0ADMIN")
        await subscribe(w, w.h.client, {"subscription": service.subscribe("ada")})
        service.script = [status]
        aid = await w.ask(key, ADA)
        (failed,) = await until_async(lambda: audit(w, key, aid, "push_failed"))
        assert failed["data"]["failed"] == {f"http://127.0.0.1:{service.port}": f"HTTP {status}"}
        assert failed["data"]["retrying"] is True and service.delivered == []
        await w.h.advance_until(lambda: service.delivered)
        assert service.tried == 2
        await until_async(lambda: audit(w, key, aid, "push_sent"))


async def test_a_message_too_large_413_is_recorded_and_not_retried() -> None:
    async with push_service() as service, inbox_world(POLICY_BY_EMAIL, callback_allow=LOOPBACK_ALLOW) as w:
        key = await w.h.create_tenant("acme")
        await w.sign_in(w.h.client, "U0ADMIN")
        await subscribe(w, w.h.client, {"subscription": service.subscribe("ada")})
        service.script = [413]
        aid = await w.ask(key, ADA)
        (failed,) = await until_async(lambda: audit(w, key, aid, "push_failed"))
        assert failed["data"]["failed"] == {f"http://127.0.0.1:{service.port}": "HTTP 413"}
        assert failed["data"]["retrying"] is False
        for _ in range(5):
            w.h.advance(60.0)
        assert service.tried == 1


async def test_a_subscription_that_cannot_be_used_is_refused_naming_why() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:  # the default egress rules: public https only
        signed_out = await w.h.client.post("/inbox/push/subscriptions", json={})
        assert signed_out.status_code == 401
        await w.sign_in(w.h.client, "U0ADMIN")
        keys = browser_keys()
        good = keys.subscription("https://push.example.com/send/abc")
        cases = [
            ({}, 'send {"subscription": PushSubscription.toJSON()}'),
            ({"subscription": {**good, "endpoint": "http://10.0.0.5/push"}}, "cannot be reached from here"),
            ({"subscription": {**good, "endpoint": "ftp://push.example.com"}}, "endpoint must be"),
            (
                {"subscription": {**good, "keys": {"p256dh": "AAAA", "auth": good["keys"]["auth"]}}},
                "keys.p256dh must be",
            ),
            (
                {"subscription": {**good, "keys": {"p256dh": good["keys"]["p256dh"], "auth": "!!"}}},
                "keys.auth is not base64url",
            ),
        ]
        for body, why in cases:
            r = await subscribe(w, w.h.client, body)
            assert r.status_code == 400 and why in r.json()["error"]["message"], (body, r.text)
        duplicated = await w.h.client.post(
            "/inbox/push/subscriptions",
            content=b'{"subscription": {}, "subscription": {}}',
            headers={"X-CSRF-Token": csrf_of((await w.h.client.get("/inbox/")).text)},
        )
        assert duplicated.status_code == 400
        no_csrf = await subscribe(w, w.h.client, {"subscription": good}, csrf="forged")
        assert no_csrf.status_code == 403
        assert (await subscribe(w, w.h.client, {"subscription": good})).status_code == 201


async def test_the_inbox_is_an_installable_app_with_a_service_worker_for_its_pages() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        manifest = await w.h.client.get("/inbox/manifest.webmanifest")
        assert manifest.headers["content-type"].startswith("application/manifest+json")
        assert manifest.json()["scope"] == "/inbox/" and manifest.json()["start_url"] == "/inbox/"
        worker = await w.h.client.get("/inbox/sw.js")
        assert worker.headers["service-worker-allowed"] == "/inbox/"
        assert "showNotification" in worker.text and "notificationclick" in worker.text
        await w.sign_in(w.h.client, "U0ADMIN")
        page = (await w.h.client.get("/inbox/")).text
        assert 'rel="manifest" href="/inbox/manifest.webmanifest"' in page
        assert re.search(r"Notify me on this device", page)


ESCALATING = """
[defaults]
timeout = "1h"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
escalate = [{ after = "20m", to = "tenant_admins" }]

[tenants.acme]
slack_team = "T0ACME"
admins = { dashboard = ["ada@acme.example"] }
"""


async def test_an_escalation_is_pushed_to_the_people_it_reaches() -> None:
    async with push_service() as service, inbox_world(ESCALATING, callback_allow=LOOPBACK_ALLOW) as w:
        key = await w.h.create_tenant("acme")
        await w.sign_in(w.h.client, "U0ADMIN")
        await subscribe(w, w.h.client, {"subscription": service.subscribe("ada")})
        aid = await w.ask(key, "u_requester")  # asked of the requester: nothing for Ada yet
        await until_async(lambda: _job_done(w, aid))
        # The request's own push job done before time moves: run after the escalation, it
        # would push Ada too (everyone the request then waits for), beside the step's push.
        await until_async(lambda: _push_job_done(w, aid))
        w.h.advance(60.0)
        assert service.tried == 0
        w.h.advance(20 * 60.0)
        (got,) = await until(lambda: service.delivered)
        assert got.plaintext["url"] == f"/inbox/approvals/{aid}"
        await until_async(lambda: audit(w, key, aid, "push_sent"))
