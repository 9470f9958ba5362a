"""Handoffs answered through the dashboard, checked against the example expect app over HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.approvals.grants import callback_secret
from cosigner.webhooks import verify_request
from tests.handoff_world import (
    EXPECT_SECRET,
    LOOPBACK,
    SECRET_ENV,
    expect_server,
    handoff_policy,
    handoff_request,
    served,
)
from tests.harness import TEST_SECRET, CallbackReceiver, Harness, ManualClock, cosigner_app, until

DASHBOARD = {"type": "dashboard", "userId": "u_42"}
TENANT = '[tenants.acme]\nadmins = { dashboard = ["u_admin"] }'


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, EXPECT_SECRET)


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, Any, str]]:
    clock = ManualClock()
    async with expect_server(clock) as (shop, url):
        policy = handoff_policy(url, TENANT)
        async with cosigner_app(policy, clock=clock, database_kind=db_kind, callback_allow=LOOPBACK) as h:
            yield h, shop, await h.create_tenant("acme")


async def start(h: Harness, key: str, call: str = "call_1", **extra: Any) -> dict[str, Any]:
    response = await h.client.post(
        "/v1/approvals", json=handoff_request(DASHBOARD, call, **extra), headers=h.auth(key)
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def decide(h: Harness, key: str, approval_id: str, decision: str, user: str = "u_42") -> Any:
    return await h.client.post(
        f"/v1/approvals/{approval_id}/decision",
        json={"decision": decision, "userId": user},
        headers=h.auth(h.approver_of(key)),
    )


async def test_handoff_start_shows_the_steps_and_redacted_parameters(world: Any) -> None:
    h, _, key = world
    body = await start(h, key)
    assert body["type"] == "handoff_start" and body["status"] == "pending"
    assert body["reason"] == "Publishing needs the verification code sent to the owner's phone"
    assert body["steps"][0] == "Open Settings → Publishing" and len(body["steps"]) == 3
    assert body["parameters"] == {"changeId": "chg_1", "ownerPin": "[REDACTED]"}
    assert body["timeout"] == 300_000
    again = await h.client.get(f"/v1/approvals/{body['approvalId']}", headers=h.auth(key))
    assert again.json() == body


async def test_done_before_the_step_fails_with_the_applications_detail(world: Any) -> None:
    h, shop, key = world
    body = await start(h, key)
    response = await decide(h, key, body["approvalId"], "done")
    assert response.status_code == 200, response.text
    decided = response.json()
    assert decided["status"] == "failed" and decided["code"] == "HANDOFF_FAILED"
    assert decided["detail"] == "change chg_1 is not published"
    assert decided["decidedBy"] == {"kind": "person", "surface": "dashboard", "userId": "u_42"}
    assert decided["grant"] is None and "receipt" not in decided
    # The application got the unredacted parameters, once, signed.
    assert len(shop.calls) == 1 and shop.calls[0]["parameters"] == {"changeId": "chg_1", "ownerPin": "482910"}
    assert shop.calls[0]["tenant"] == "acme" and shop.calls[0]["approvalId"] == body["approvalId"]


async def test_done_after_the_step_completes_with_a_receipt(world: Any) -> None:
    h, shop, key = world
    body = await start(h, key)
    shop.publish("chg_1")
    decided = (await decide(h, key, body["approvalId"], "done")).json()
    assert decided["status"] == "completed" and "code" not in decided
    receipt = decided["receipt"]
    assert receipt["detail"] == "change chg_1 is live" and receipt["responseDigest"].startswith("sha256:")
    assert receipt["delivery"].startswith("dlv_")
    trail = (await h.client.get(f"/v1/approvals/{body['approvalId']}/audit", headers=h.auth(key))).json()
    events = [e["event"] for e in trail["events"]]
    assert events == ["requested", "handoff_done", "handoff_check", "completed"]
    assert "482910" not in json.dumps(trail)


async def test_cancel_and_a_late_done(world: Any) -> None:
    h, shop, key = world
    body = await start(h, key)
    cancelled = (await decide(h, key, body["approvalId"], "cancel")).json()
    assert cancelled["status"] == "cancelled" and cancelled["code"] == "HANDOFF_CANCELLED"
    late = await decide(h, key, body["approvalId"], "done")
    assert late.status_code == 409 and late.json()["error"]["code"] == "ALREADY_DECIDED"
    assert shop.calls == []


async def test_expiry_and_a_done_after_it(world: Any) -> None:
    h, shop, key = world
    body = await start(h, key)
    h.advance(301)
    decided = await h.client.get(f"/v1/approvals/{body['approvalId']}?wait=5", headers=h.auth(key))
    assert decided.json()["status"] == "expired" and decided.json()["code"] == "HANDOFF_TIMEOUT"
    shop.publish("chg_1")
    late = await decide(h, key, body["approvalId"], "done")
    assert late.status_code == 409 and late.json()["error"]["code"] == "APPROVAL_EXPIRED"
    assert shop.calls == []


async def test_done_past_its_time_before_the_sweep_is_refused(world: Any) -> None:
    h, shop, key = world
    h.parts.wakeups.expiry.clear()
    body = await start(h, key)
    h.clock.advance(301)  # no wake-up: the Done itself finds the handoff past its time
    late = await decide(h, key, body["approvalId"], "done")
    assert late.status_code == 409 and late.json()["error"]["code"] == "APPROVAL_EXPIRED"
    current = (await h.client.get(f"/v1/approvals/{body['approvalId']}", headers=h.auth(key))).json()
    assert current["status"] == "expired" and current["code"] == "HANDOFF_TIMEOUT"
    assert shop.calls == []


async def test_wrong_person_tenant_and_verdict_are_refused(world: Any) -> None:
    h, shop, key = world
    body = await start(h, key)
    aid = body["approvalId"]
    stranger = await decide(h, key, aid, "done", user="u_mallory")
    assert stranger.status_code == 403 and stranger.json()["error"]["code"] == "NOT_AN_APPROVER"
    other = await h.create_tenant("globex")
    foreign = await decide(h, other, aid, "done")
    assert foreign.status_code == 404
    approve = await decide(h, key, aid, "approve")
    assert approve.status_code == 400 and "is a handoff" in approve.json()["error"]["message"]
    assert shop.calls == []
    refund = await h.client.post(
        "/v1/approvals",
        json={**handoff_request(DASHBOARD, "call_r"), "toolName": "issue_refund"},
        headers=h.auth(key),
    )
    assert refund.json()["type"] == "approval_start"
    done = await decide(h, key, refund.json()["approvalId"], "done")
    assert done.status_code == 400 and "not a handoff" in done.json()["error"]["message"]
    admin = await decide(h, key, aid, "done", user="u_admin")
    assert admin.status_code == 403  # the requester by default, as for approvals
    trail = (await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).json()
    assert [e["event"] for e in trail["events"]].count("decision_refused") == 3


async def test_two_done_at_once_make_one_check_and_one_outcome(world: Any) -> None:
    h, shop, key = world
    body = await start(h, key)
    shop.publish("chg_1")
    answers = await asyncio.gather(*(decide(h, key, body["approvalId"], "done") for _ in range(2)))
    codes = sorted(a.status_code for a in answers)
    assert codes == [200, 409], [a.text for a in answers]
    assert len(shop.calls) == 1
    final = (await h.client.get(f"/v1/approvals/{body['approvalId']}", headers=h.auth(key))).json()
    assert final["status"] == "completed"
    trail = (await h.client.get(f"/v1/approvals/{body['approvalId']}/audit", headers=h.auth(key))).json()
    assert [e["event"] for e in trail["events"]].count("completed") == 1


async def test_headless_runs_fail_closed(world: Any) -> None:
    h, _, key = world
    response = await h.client.post(
        "/v1/approvals", json=handoff_request({"type": "schedule"}), headers=h.auth(key)
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "APPROVAL_MODE_UNSUPPORTED"


async def test_long_poll_stream_and_callback_carry_the_outcome(world: Any) -> None:
    h, shop, key = world
    with CallbackReceiver() as receiver:
        body = await start(h, key, callbackUrl=receiver.url)
        aid = body["approvalId"]

        async def read() -> list[tuple[str, dict[str, Any]]]:
            events = []
            async with h.client.stream("GET", f"/v1/approvals/{aid}/events", headers=h.auth(key)) as r:
                name = ""
                async for line in r.aiter_lines():
                    if line.startswith("event: "):
                        name = line[7:]
                    elif line.startswith("data: "):
                        events.append((name, json.loads(line[6:])))
            return events

        streamed = asyncio.create_task(read())
        waiting = asyncio.create_task(h.client.get(f"/v1/approvals/{aid}?wait=30", headers=h.auth(key)))
        await h.waiters(2)
        shop.publish("chg_1")
        assert (await decide(h, key, aid, "done")).json()["status"] == "completed"
        events = await asyncio.wait_for(streamed, 10)
        assert [e[0] for e in events] == ["handoff_start", "approval_decided"]
        assert events[1][1]["status"] == "completed" and events[1][1]["receipt"]
        assert (await waiting).json()["status"] == "completed"
        sent = await until(receiver.snapshot)
        decided = json.loads(sent[0]["body"])
        assert decided["status"] == "completed" and decided["receipt"]["delivery"].startswith("dlv_")
        secret = callback_secret(TEST_SECRET, "acme")
        assert verify_request(sent[0]["body"], sent[0]["headers"], secret, now=h.clock())


@pytest.mark.parametrize("where", ["unreachable", "forged"])
async def test_an_unverifiable_check_fails_closed(db_kind: str, where: str) -> None:
    clock = ManualClock()
    secret = "another-secret-" + "z" * 20 if where == "forged" else EXPECT_SECRET
    async with expect_server(clock, secret=secret) as (shop, url):
        if where == "unreachable":
            url = url.replace(url.split(":")[2].split("/")[0], "9")  # port 9 (discard): refused
        async with cosigner_app(
            handoff_policy(url, TENANT), clock=clock, database_kind=db_kind, callback_allow=LOOPBACK
        ) as h:
            key = await h.create_tenant("acme")
            body = await start(h, key)
            shop.publish("chg_1")
            decided = (await decide(h, key, body["approvalId"], "done")).json()
            assert decided["status"] == "failed" and decided["code"] == "HANDOFF_FAILED"
            assert decided["detail"] == "could not be verified"
            assert shop.calls == []
            assert shop.refused == (1 if where == "forged" else 0)


async def test_the_applications_detail_is_redacted_and_a_non_bool_done_fails(db_kind: str) -> None:
    answers = [
        b'{"done": false, "detail": "the key sk_live_abcdefghijklmnop was refused"}',
        b'{"done": "true"}',
    ]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        body = answers.pop(0)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    clock = ManualClock()
    async with served(app) as url:
        async with cosigner_app(
            handoff_policy(url, TENANT), clock=clock, database_kind=db_kind, callback_allow=LOOPBACK
        ) as h:
            key = await h.create_tenant("acme")
            first = (await decide(h, key, (await start(h, key))["approvalId"], "done")).json()
            assert first["status"] == "failed" and "sk_live" not in json.dumps(first)
            trail = (
                await h.client.get(f"/v1/approvals/{first['approvalId']}/audit", headers=h.auth(key))
            ).text
            assert "sk_live" not in trail
            second = (await decide(h, key, (await start(h, key, "call_2"))["approvalId"], "done")).json()
            assert second["status"] == "failed" and second["detail"] == "could not be verified"
