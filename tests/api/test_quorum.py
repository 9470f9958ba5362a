"""Four eyes through the agent API and the dashboard decision endpoint, on a real database:
a quorum of distinct approvers, one Deny vetoes, the requester never counts, and the
callback and the waiting agent are told once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import sqlalchemy as sa

from contracts.grants import verify_grant
from storage import raw
from storage.tables import approval_votes, audit_events, jobs
from tests.harness import CallbackReceiver, Harness, cosigner_app, until, until_async

LOOPBACK = "127.0.0.0/8"
ADMINS = ["u_ann", "u_bob", "u_cat", "u_dan"]
POLICY = f"""
[defaults]
timeout = "5m"

[tools.delete_account]
kind = "danger"
approvers = ["requester", "tenant_admins"]
quorum = 2

[tools.wire_money]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 3

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]

[tenants.acme]
admins = {{ dashboard = {json.dumps(ADMINS)} }}
"""
PARAMS = {"accountId": "acct_9"}


def call(tool: str = "delete_account", user: str = "u_req", **extra: Any) -> dict[str, Any]:
    body = {
        "executionId": "run_1",
        "toolCallId": f"c_{tool}",
        "toolName": tool,
        "parameters": PARAMS,
        "surface": {"type": "dashboard", "userId": user},
    }
    return body | extra


async def create(h: Harness, key: str, **kw: Any) -> str:
    r = await h.client.post("/v1/approvals", json=call(**kw), headers=h.auth(key))
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


async def decide(h: Harness, key: str, aid: str, user: str, decision: str = "approve", **kw: Any) -> Any:
    return await h.client.post(
        f"/v1/approvals/{aid}/decision",
        headers=h.auth(h.approver_of(key)),
        json={"decision": decision, "userId": user, **kw},
    )


async def events_of(h: Harness, aid: str) -> list[tuple[str, Any, Any]]:
    async with raw.read(h.parts.db) as conn:
        rows = await conn.execute(
            sa.select(audit_events.c.event, audit_events.c.actor, audit_events.c.data)
            .where(audit_events.c.approval_id == aid)
            .order_by(audit_events.c.seq)
        )
        return [(r.event, json.loads(r.actor), json.loads(r.data)) for r in rows]


async def test_two_distinct_approvers_approve_and_the_agent_is_told_once(db_kind: str) -> None:
    with CallbackReceiver() as receiver:
        async with cosigner_app(POLICY, database_kind=db_kind, callback_allow=LOOPBACK) as h:
            key = await h.create_tenant("acme")
            aid = await create(h, key, callbackUrl=receiver.url)
            first = await decide(h, key, aid, "u_ann")
            assert first.status_code == 200, first.text
            body = first.json()
            assert body["type"] == "approval_start" and body["status"] == "pending"
            assert body["quorum"] == 2
            assert [(a["by"], a["surface"]) for a in body["approvals"]] == [("u_ann", "dashboard")]
            # The same person again changes nothing: still one approval of two.
            again = await decide(h, key, aid, "u_ann")
            assert again.json()["status"] == "pending" and len(again.json()["approvals"]) == 1
            got = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
            assert got["status"] == "pending" and [a["by"] for a in got["approvals"]] == ["u_ann"]
            assert receiver.snapshot() == [], "nothing is told before the quorum is met"

            second = await decide(h, key, aid, "u_bob")
            decision = second.json()
            assert decision["status"] == "approved" and decision["quorum"] == 2
            assert [a["by"] for a in decision["approvals"]] == ["u_ann", "u_bob"]
            assert decision["decidedBy"] == {"kind": "person", "surface": "dashboard", "userId": "u_bob"}
            jwks = (await h.client.get("/v1/keys")).json()
            claims = verify_grant(decision["grant"], jwks, tool_name="delete_account", parameters=PARAMS)
            assert claims.approvers == (("dashboard", "u_ann"), ("dashboard", "u_bob"))

            late = await decide(h, key, aid, "u_cat")
            assert late.json()["error"]["code"] == "ALREADY_DECIDED"
            await until(lambda: len(receiver.snapshot()) >= 1)
            async with raw.read(h.parts.db) as conn:
                queued = (
                    await conn.execute(
                        sa.select(jobs).where(jobs.c.approval_id == aid, jobs.c.kind == "callback")
                    )
                ).all()
            assert len(queued) == 1, "one callback, queued when the quorum is met"
            sent = receiver.snapshot()
            assert len(sent) == 1
            told = json.loads(sent[0]["body"])
            assert told["status"] == "approved" and [a["by"] for a in told["approvals"]] == ["u_ann", "u_bob"]

            # The attempt goes on the chain once the receiver answered: read the chain after it.
            async def attempted() -> list[tuple[str, Any, Any]] | None:
                found = await events_of(h, aid)
                return found if any(e[0] == "callback_attempt" for e in found) else None

            events = await until_async(attempted)
            names = [e[0] for e in events]
            assert names.count("approval_counted") == 2 and names.count("callback_attempt") == 1, names
            assert names.count("approved") == 1 and names.count("decision_refused") == 1, names
            assert names.index("approval_counted") < names.index("approved") < names.index("decision_refused")
            approved = next(e for e in events if e[0] == "approved")
            assert approved[2]["approvers"] == [
                {"by": "u_ann", "surface": "dashboard"},
                {"by": "u_bob", "surface": "dashboard"},
            ]
            audit = await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))
            assert [e["event"] for e in audit.json()["events"]] == names


async def test_one_deny_vetoes_with_that_persons_comment(db_kind: str) -> None:
    async with cosigner_app(POLICY, database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        aid = await create(h, key, tool="wire_money")
        await decide(h, key, aid, "u_ann")
        await decide(h, key, aid, "u_bob")
        veto = await decide(h, key, aid, "u_cat", "deny", comment="not this account")
        body = veto.json()
        assert body["status"] == "denied" and body["comment"] == "not this account"
        assert body["decidedBy"]["userId"] == "u_cat" and body["grant"] is None
        assert [a["by"] for a in body["approvals"]] == ["u_ann", "u_bob"], "who had approved before the veto"
        after = await decide(h, key, aid, "u_dan")
        assert after.json()["error"]["code"] == "ALREADY_DECIDED"


async def test_the_requester_never_counts_toward_the_quorum(db_kind: str) -> None:
    async with cosigner_app(POLICY, database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        # An admin who asks is still the requester: their own Approve is refused.
        aid = await create(h, key, user="u_ann")
        own = await decide(h, key, aid, "u_ann")
        assert own.status_code == 403 and own.json()["error"]["code"] == "NOT_AN_APPROVER"
        assert "separate_duties" in own.json()["error"]["message"]
        assert (await decide(h, key, aid, "u_bob")).json()["status"] == "pending"
        done = (await decide(h, key, aid, "u_cat")).json()
        assert done["status"] == "approved" and [a["by"] for a in done["approvals"]] == ["u_bob", "u_cat"]
        refused = [e for e in await events_of(h, aid) if e[0] == "decision_refused"]
        assert len(refused) == 1 and refused[0][2]["code"] == "NOT_AN_APPROVER"


async def test_concurrent_approvals_are_each_counted_once_and_close_once(db_kind: str) -> None:
    async with cosigner_app(POLICY, database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        aid = await create(h, key, tool="wire_money", callbackUrl="https://agent.example/cb")
        answers = await asyncio.gather(*(decide(h, key, aid, who) for who in ADMINS * 3))
        bodies = [a.json() for a in answers]
        approved = [b for b in bodies if b.get("type") == "approval_decided"]
        refused = [b for b in bodies if "error" in b]
        assert {b["error"]["code"] for b in refused} <= {"ALREADY_DECIDED"}
        assert approved, "the quorum was met"
        final = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
        assert final["status"] == "approved" and len(final["approvals"]) == 3
        assert len({a["by"] for a in final["approvals"]}) == 3
        async with raw.read(h.parts.db) as conn:
            votes = (
                await conn.execute(sa.select(approval_votes).where(approval_votes.c.approval_id == aid))
            ).all()
            callbacks = (
                await conn.execute(
                    sa.select(jobs).where(jobs.c.approval_id == aid, jobs.c.kind == "callback")
                )
            ).all()
        assert len(votes) == 3 and len(callbacks) == 1
        names = [e[0] for e in await events_of(h, aid)]
        assert names.count("approval_counted") == 3 and names.count("approved") == 1


async def test_a_route_with_too_few_approvers_is_refused_before_anyone_is_asked(db_kind: str) -> None:
    small = POLICY.replace(json.dumps(ADMINS), '["u_ann", "u_bob"]')
    async with cosigner_app(small.replace("quorum = 3", "quorum = 2"), database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        r = await h.client.post("/v1/approvals", json=call("wire_money"), headers=h.auth(key))
        assert r.status_code == 201, "two admins can approve what u_req asks"
        # u_ann, an admin, asks: only u_bob may count, and two must approve.
        r = await h.client.post(
            "/v1/approvals", json=call("wire_money", user="u_ann", toolCallId="c2"), headers=h.auth(key)
        )
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "APPROVAL_MODE_UNSUPPORTED" and err["policy"] == "tools.wire_money.quorum"
        assert "besides the requester" in err["message"]


async def test_quorum_one_keeps_its_decision_shape(db_kind: str) -> None:
    async with cosigner_app(POLICY, database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        aid = await create(h, key, tool="issue_refund")
        body = (await decide(h, key, aid, "u_req")).json()
        # One answer decides: the body keeps the shape older SDKs read (no quorum, no approvals).
        assert body["status"] == "approved" and "quorum" not in body and "approvals" not in body
        assert body["decidedBy"]["userId"] == "u_req"
        async with raw.read(h.parts.db) as conn:
            assert (await conn.execute(sa.select(approval_votes))).all() == [], "quorum 1 writes no vote rows"
