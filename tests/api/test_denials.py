"""Always deny from the dashboard: a person's standing no, its scope, its refusals and lifting it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.test_approvals import call, start
from tests.harness import DEFAULT_POLICY, Harness, cosigner_app, database

U1 = {"type": "dashboard", "userId": "u_1"}
U2 = {"type": "dashboard", "userId": "u_2"}


async def always_deny(h: Harness, key: str, approval_id: str, user: str = "u_1") -> Any:
    return await h.client.post(
        f"/v1/approvals/{approval_id}/decision",
        json={"decision": "always_deny", "userId": user},
        headers=h.auth(h.approver_of(key)),
    )


async def set_one(h: Harness, key: str) -> dict[str, Any]:
    """u_1 answers Always deny on their own issue_refund request; returns the standing deny."""
    first = await start(h, key, call_id="c1", surface=U1)
    r = await always_deny(h, key, first["approvalId"])
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "denied" and r.json()["grant"] is None
    assert r.json()["decidedBy"] == {"kind": "person", "surface": "dashboard", "userId": "u_1"}
    (denial,) = (await h.client.get("/v1/denials", headers=h.auth(h.approver_of(key)))).json()["denials"]
    assert denial["toolName"] == "issue_refund" and denial["requester"] == "dashboard:u_1"
    assert denial["approver"] == {"surface": "dashboard", "userId": "u_1", "teamId": None}
    assert denial["approvalId"] == first["approvalId"] and denial["liftedAt"] is None
    return dict(denial)


async def test_the_next_request_in_scope_is_refused_at_once_naming_the_deny(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        denial = await set_one(h, key)
        r = await h.client.post("/v1/approvals", json=call(call_id="c2", surface=U1), headers=h.auth(key))
        assert r.status_code == 403, r.text
        error = r.json()["error"]
        assert error["code"] == "PERMISSION_DENIED"
        assert error["denial"] == denial
        assert "dashboard:u_1" in error["message"] and denial["setAt"] in error["message"]
        assert f"DELETE /v1/denials/{denial['denialId']}" in error["message"]
        refused = error["approvalId"]
        got = (await h.client.get(f"/v1/approvals/{refused}", headers=h.auth(key))).json()
        assert got["status"] == "denied" and got["grant"] is None
        assert got["decidedBy"]["kind"] == "policy"
        assert got["decidedBy"]["rule"].startswith(
            f"standing deny {denial['denialId']} (set by dashboard:u_1"
        )
        trail = (await h.client.get(f"/v1/approvals/{refused}/audit", headers=h.auth(key))).json()
        assert [e["event"] for e in trail["events"]] == ["requested", "denied"]
        # Retrying the same call is refused the same way, not answered with a decision.
        again = await h.client.post("/v1/approvals", json=call(call_id="c2", surface=U1), headers=h.auth(key))
        assert again.status_code == 403 and again.json()["error"]["denial"] == denial
        # The request where it was set records it on its own audit chain.
        first = denial["approvalId"]
        events = (await h.client.get(f"/v1/approvals/{first}/audit", headers=h.auth(key))).json()["events"]
        assert [e["event"] for e in events] == ["requested", "denied", "standing_deny_set"]
        assert events[-1]["data"]["denialId"] == denial["denialId"]


async def test_it_never_widens_to_another_requester_tool_or_tenant(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        acme, globex = await h.create_tenant("acme"), await h.create_tenant("globex")
        await set_one(h, acme)
        await start(h, acme, call_id="c2", surface=U2)  # another requester: asked as before
        await start(h, acme, call_id="c3", surface=U1, tool="issue_credit")  # another tool
        await start(h, globex, call_id="c4", surface=U1)  # the same user id in another tenant
        assert (await h.client.get("/v1/denials", headers=h.auth(h.approver_key("globex")))).json() == {
            "denials": []
        }


async def test_it_never_turns_into_an_approval(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        await set_one(h, key)
        # acme approves refunds below 5000 without a person; the standing no still wins.
        small = call(call_id="c2", surface=U1, params={"orderId": "o", "amountCents": 100})
        r = await h.client.post("/v1/approvals", json=small, headers=h.auth(key))
        assert r.status_code == 403 and r.json()["error"]["code"] == "PERMISSION_DENIED"
        # A tool in mode none is not gated at all: nothing to deny.
        read = call("lookup_order", call_id="c3", surface=U1, params={"orderId": "o1"})
        assert (await h.client.post("/v1/approvals", json=read, headers=h.auth(key))).status_code == 200


async def test_lifting_it_restores_the_request(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        acme = await h.create_tenant("acme")
        await h.create_tenant("globex")
        denial = await set_one(h, acme)
        refused = call(call_id="c2", surface=U1)
        assert (await h.client.post("/v1/approvals", json=refused, headers=h.auth(acme))).status_code == 403
        url = f"/v1/denials/{denial['denialId']}"
        other = await h.client.delete(url, headers=h.auth(h.approver_key("globex")))
        assert other.status_code == 404 and other.json()["error"]["code"] == "DENIAL_NOT_FOUND"
        scoped = await h.client.delete(url, headers=h.auth(acme))
        assert scoped.status_code == 403 and scoped.json()["error"]["code"] == "KEY_SCOPE"
        lifted = await h.client.delete(url, headers=h.auth(h.approver_key("acme")))
        assert lifted.status_code == 200, lifted.text
        assert lifted.json()["liftedBy"] == "api" and lifted.json()["liftedAt"]
        again = await h.client.delete(url, headers=h.auth(h.approver_key("acme")))
        assert again.status_code == 200 and again.json()["liftedAt"] == lifted.json()["liftedAt"]
        # The call it refused stays refused (the same call, the same answer), saying it was lifted.
        replayed = await h.client.post("/v1/approvals", json=refused, headers=h.auth(acme))
        assert replayed.status_code == 403 and "lifted since" in replayed.json()["error"]["message"]
        assert (await h.client.get("/v1/denials", headers=h.auth(h.approver_key("acme")))).json() == {
            "denials": []
        }
        asked = await start(h, acme, call_id="c3", surface=U1)
        assert asked["status"] == "pending"
        first = denial["approvalId"]
        events = (await h.client.get(f"/v1/approvals/{first}/audit", headers=h.auth(acme))).json()["events"]
        assert [e["event"] for e in events][-1] == "standing_deny_lifted"
        assert events[-1]["actor"] == {"kind": "approver_app", "tenant": "acme"}


async def test_outsiders_cannot_set_it(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        acme, globex = await h.create_tenant("acme"), await h.create_tenant("globex")
        pending = (await start(h, acme, call_id="c1", surface=U1))["approvalId"]
        stranger = await always_deny(h, acme, pending, user="u_2")
        assert stranger.status_code == 403 and stranger.json()["error"]["code"] == "NOT_AN_APPROVER"
        foreign = await always_deny(h, globex, pending)
        assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "APPROVAL_NOT_FOUND"
        assert (await h.client.get("/v1/denials", headers=h.auth(h.approver_key("acme")))).json() == {
            "denials": []
        }
        assert (await h.client.get(f"/v1/approvals/{pending}", headers=h.auth(acme))).json()["status"] == (
            "pending"
        )


async def test_not_offered_where_the_approver_is_not_one_person_for_one_requester(db_kind: str) -> None:
    policy = DEFAULT_POLICY.replace('approvers = ["requester"]', 'approvers = ["requester", "tenant_admins"]')
    async with cosigner_app(policy, database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        # The requester and the admins answer together: one must not deny for the others.
        shared = (await start(h, key, call_id="c1", surface=U1))["approvalId"]
        r = await always_deny(h, key, shared)
        assert r.status_code == 400 and r.json()["error"]["field"] == "decision"
        # A scheduled run routed to the admins names no requester: a deny would cover them all.
        headless = (await start(h, key, call_id="c2", surface={"type": "schedule"}))["approvalId"]
        r = await always_deny(h, key, headless, user="u_admin")
        assert r.status_code == 400 and "Always deny is not offered" in r.json()["error"]["message"]
        for aid in (shared, headless):
            got = await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))
            assert got.json()["status"] == "pending"
        assert (await h.client.get("/v1/denials", headers=h.auth(h.approver_of(key)))).json() == {
            "denials": []
        }


async def test_admission_reports_it() -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        denial = await set_one(h, key)
        tools = ["issue_refund", "issue_credit", "lookup_order"]
        body = {"executionId": "run_9", "surface": U1, "tools": tools}
        r = await h.client.post("/v1/runs/admit", json=body, headers=h.auth(key))
        assert r.status_code == 200
        assert r.json() == {"admitted": True, "standingDenies": [denial]}
        other = await h.client.post("/v1/runs/admit", json={**body, "surface": U2}, headers=h.auth(key))
        assert other.json() == {"admitted": True}


@pytest.mark.parametrize("kind", ["sqlite"])
async def test_it_survives_a_restart(kind: str) -> None:
    async with database(kind) as db:
        async with cosigner_app(db=db) as h:
            key = await h.create_tenant("acme")
            denial = await set_one(h, key)
        async with cosigner_app(db=db) as fresh:
            r = await fresh.client.post(
                "/v1/approvals", json=call(call_id="c2", surface=U1), headers=fresh.auth(key)
            )
            assert r.status_code == 403 and r.json()["error"]["denial"] == denial


async def test_a_single_admin_denies_only_for_the_requester_whose_run_it_was(db_kind: str) -> None:
    policy = DEFAULT_POLICY.replace('approvers = ["requester"]', 'approvers = ["tenant_admins"]')
    async with cosigner_app(policy, database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        u1 = (await start(h, key, call_id="c1", surface=U1))["approvalId"]
        assert (await always_deny(h, key, u1, user="u_1")).json()["error"]["code"] == "NOT_AN_APPROVER"
        r = await always_deny(h, key, u1, user="u_admin")
        assert r.status_code == 200 and r.json()["status"] == "denied"
        (denial,) = (await h.client.get("/v1/denials", headers=h.auth(h.approver_of(key)))).json()["denials"]
        assert denial["approver"]["userId"] == "u_admin" and denial["requester"] == "dashboard:u_1"
        refused = await h.client.post(
            "/v1/approvals", json=call(call_id="c2", surface=U1), headers=h.auth(key)
        )
        assert refused.status_code == 403
        assert (await start(h, key, call_id="c3", surface=U2))["status"] == "pending"


async def test_one_standing_deny_per_scope_and_a_new_one_after_a_lift(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        first = (await start(h, key, call_id="c1", surface=U1))["approvalId"]
        second = (await start(h, key, call_id="c2", surface=U1, execution="run_2"))[
            "approvalId"
        ]  # asked before the deny
        assert (await always_deny(h, key, first)).status_code == 200
        assert (await always_deny(h, key, second)).json()["status"] == "denied"
        (denial,) = (await h.client.get("/v1/denials", headers=h.auth(h.approver_of(key)))).json()["denials"]
        assert denial["approvalId"] == first
        events = (await h.client.get(f"/v1/approvals/{second}/audit", headers=h.auth(key))).json()["events"]
        assert events[-1]["event"] == "standing_deny_set"
        assert events[-1]["data"] == {
            "denialId": denial["denialId"],
            "toolName": "issue_refund",
            "requester": "dashboard:u_1",
            "alreadyInForce": True,
        }
        # A replayed answer on a closed request sets nothing.
        assert (await always_deny(h, key, first)).json()["error"]["code"] == "ALREADY_DECIDED"
        await h.client.delete(f"/v1/denials/{denial['denialId']}", headers=h.auth(h.approver_of(key)))
        third = (await start(h, key, call_id="c3", surface=U1))["approvalId"]
        assert (await always_deny(h, key, third)).status_code == 200
        (renewed,) = (await h.client.get("/v1/denials", headers=h.auth(h.approver_of(key)))).json()["denials"]
        assert renewed["denialId"] != denial["denialId"] and renewed["approvalId"] == third
