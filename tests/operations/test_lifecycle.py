"""An operation from proposal to outcome against the real example application over HTTP."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bot.approvals.grants import callback_secret
from cosigner.webhooks import verify_request
from storage import ledger
from storage.database import Database
from tests.harness import (
    TEST_SECRET,
    CallbackReceiver,
    Harness,
    ManualClock,
    cosigner_app,
    database,
    postgres_url,
    until,
)
from tests.operations.application import OPERATION, SECRET, SECRET_ENV, contract_application, policy_for

ALLOW = "127.0.0.1"


def proposal(call: str = "c1", order: str = "ord_4421", **extra: Any) -> dict[str, Any]:
    """A refund proposal decided on the dashboard by u_1."""
    return {
        "executionId": "run_1",
        "toolCallId": call,
        "operation": OPERATION,
        "request": {"orderId": order, "note": "customer says the discount was missing"},
        "reason": "Customer says the discount was not applied",
        "surface": {"type": "dashboard", "userId": "u_1"},
        **extra,
    }


async def propose(h: Harness, key: str, body: dict[str, Any]) -> Any:
    """POST /v1/approvals."""
    return await h.client.post("/v1/approvals", json=body, headers=h.auth(key))


async def decide(h: Harness, key: str, aid: str, decision: str = "approve") -> Any:
    """A dashboard answer by u_1."""
    return await h.client.post(
        f"/v1/approvals/{aid}/decision",
        json={"decision": decision, "userId": "u_1"},
        headers=h.auth(h.approver_of(key)),
    )


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)


async def test_propose_approve_execute_outcome(db_kind: str) -> None:
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), database_kind=db_kind, callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            r = await propose(h, key, proposal())
            assert r.status_code == 201, r.text
            start = r.json()
            assert start["operation"] == OPERATION
            assert start["preview"]["title"] == "Refund the missing discount on ord_4421"
            assert {"label": "Amount", "value": "$129.00"} in start["preview"]["fields"]
            assert start["argumentsDigest"].startswith("sha256:")
            assert "arguments" not in start
            aid = start["approvalId"]
            waiting = asyncio.create_task(
                h.client.get(f"/v1/approvals/{aid}?wait=30", headers=h.auth(key), timeout=60)
            )
            await h.waiters()
            r = await decide(h, key, aid)
            assert r.status_code == 200, r.text
            done = (await waiting).json()
            assert done["status"] == "approved"
            assert done["outcome"] == {
                "type": "succeeded",
                "message": "Refunded $129.00",
                "result": {"refundId": f"re_{aid[-8:]}", "amountCents": 12900},
            }
            assert app.shop.calls["execute"] == 1 and app.shop.refunds == 1
            # A repeated proposal replays the stored outcome and never executes again.
            again = await propose(h, key, proposal())
            assert again.status_code == 200 and again.json()["outcome"] == done["outcome"]
            assert app.shop.calls["prepare"] == 1 and app.shop.calls["execute"] == 1
            trail = (await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).json()
            events = [e["event"] for e in trail["events"]]
            assert events[:2] == ["requested", "prepared"]
            assert {"approved", "claimed", "execute_sent", "outcome"} <= set(events)
            assert trail["events"][1]["data"]["argumentsDigest"] == start["argumentsDigest"]
            assert "arguments" not in trail["events"][1]["data"]


async def test_prepare_rejection_reaches_the_agent_and_keeps_nothing() -> None:
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            r = await propose(h, key, proposal(order="ord_9999"))
            assert r.status_code == 422
            error = r.json()["error"]
            assert error["code"] == "OPERATION_REJECTED"
            assert error["message"] == "there is no order ord_9999; send the orderId of an existing order"
            # Nothing pending: the corrected request under the same ids is a new proposal.
            r = await propose(h, key, proposal())
            assert r.status_code == 201, r.text


async def test_unknown_operation_is_permission_denied() -> None:
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            r = await propose(h, key, {**proposal(), "operation": "order.delete_everything"})
            assert r.status_code == 403 and r.json()["error"]["code"] == "PERMISSION_DENIED"
            assert app.shop.calls["prepare"] == 0


async def test_unreachable_application_is_unavailable_and_keeps_nothing() -> None:
    with contract_application() as app:
        dead = app.url.replace("/cosigner", "/nowhere").rsplit(":", 1)[0] + ":9/cosigner"
    async with cosigner_app(policy_for(dead), callback_allow=ALLOW) as h:
        key = await h.create_tenant("acme")
        r = await propose(h, key, proposal())
        assert r.status_code == 503 and r.json()["error"]["code"] == "OPERATION_UNAVAILABLE"
        row = await h.engine.db.run_read(lambda tx: ledger.load_call(tx, "acme", "run_1", "c1"))
        assert row is None


async def test_the_callback_carries_the_outcome_and_is_sent_once_it_is_known() -> None:
    with contract_application() as app, CallbackReceiver() as receiver:
        async with cosigner_app(policy_for(app.url), callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            r = await propose(h, key, proposal(callbackUrl=receiver.url))
            aid = r.json()["approvalId"]
            await decide(h, key, aid)
            (got,) = await until(lambda: receiver.snapshot())
            body = json.loads(got["body"])
            assert body["status"] == "approved" and body["outcome"]["message"] == "Refunded $129.00"
            secret = callback_secret(TEST_SECRET, "acme")
            assert verify_request(got["body"], got["headers"], secret, now=h.clock()) == got["delivery"]


async def test_another_request_under_the_same_ids_is_parameters_mismatch() -> None:
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            assert (await propose(h, key, proposal())).status_code == 201
            other = proposal()
            other["request"] = {"orderId": "ord_5150"}
            r = await propose(h, key, other)
            assert r.status_code == 409 and r.json()["error"]["code"] == "PARAMETERS_MISMATCH"
            # The application is not asked again for a call it already prepared.
            assert (await propose(h, key, proposal())).status_code == 201
            assert app.shop.calls["prepare"] == 1


async def test_an_operation_the_policy_approves_is_executed_at_once() -> None:
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url, kind="read"), callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            r = await propose(h, key, proposal())
            assert r.status_code == 200 and r.json()["decidedBy"]["kind"] == "policy"
            aid = r.json()["approvalId"]
            done = (await h.client.get(f"/v1/approvals/{aid}?wait=10", headers=h.auth(key))).json()
            assert done["outcome"]["type"] == "succeeded"
            assert app.shop.calls["execute"] == 1


@pytest.mark.skipif(
    not postgres_url(), reason="replicas need PostgreSQL: set COSIGNER_TEST_POSTGRES_URL (.ci/run does)"
)
async def test_two_replicas_execute_an_operation_once_and_both_tell_the_outcome() -> None:
    # Two apps on one PostgreSQL schema (two `serve` processes behind a load balancer): the
    # agent proposes on one and waits on both, approvals race on both; one execute, and
    # each replica's long-poll answers with the outcome.
    with contract_application() as app:
        async with database("postgres") as db:
            other = Database(db.url, schema=db.schema)
            clock = ManualClock()
            policy = policy_for(app.url)
            async with (
                cosigner_app(policy, db=db, clock=clock, callback_allow=ALLOW) as a,
                cosigner_app(policy, db=other, clock=clock, callback_allow=ALLOW) as b,
            ):
                key = await a.create_tenant("acme")
                r = await propose(a, key, proposal())
                assert r.status_code == 201, r.text
                aid = r.json()["approvalId"]
                polls = [
                    asyncio.create_task(
                        h.client.get(f"/v1/approvals/{aid}?wait=30", headers=h.auth(key), timeout=60)
                    )
                    for h in (a, b)
                ]
                await a.waiters()
                await b.waiters()
                answers = await asyncio.gather(*(decide(h, key, aid) for h in (a, b, a, b)))
                assert sorted(r.status_code for r in answers) == [200, 409, 409, 409]
                told = [(await p).json() for p in polls]
                assert [t["outcome"]["type"] for t in told] == ["succeeded", "succeeded"]
                assert app.shop.calls["prepare"] == 1
                assert app.shop.calls["execute"] == 1 and app.shop.refunds == 1
