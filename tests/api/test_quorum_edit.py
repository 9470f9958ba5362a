"""Edit before approve under a quorum, through the dashboard decision endpoint on a real
database: an answer names the call it was given for (`parametersDigest`), an edit starts the
count again, and an answer for another version of the call is refused with 409."""

from __future__ import annotations

import json
from typing import Any

from cosigner.digest import parameters_digest
from cosigner.grants import GrantRefused, verify_grant
from tests.harness import Harness, cosigner_app

ADMINS = ["u_ann", "u_bob", "u_cat"]
POLICY = f"""
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
editable = ["amountCents"]
redact = ["cardToken"]
deny_above = {{ parameter = "amountCents", value = 100000 }}

[tenants.acme]
admins = {{ dashboard = {json.dumps(ADMINS)} }}
"""
CALL = {"orderId": "ord_1", "amountCents": 40000, "cardToken": "tok_secret"}
EDITED = {**CALL, "amountCents": 4000}


async def create(h: Harness, key: str) -> dict[str, Any]:
    body = {
        "executionId": "run_1",
        "toolCallId": "call_1",
        "toolName": "issue_refund",
        "parameters": CALL,
        "surface": {"type": "dashboard", "userId": "u_req"},
        "acceptsEdits": True,
    }
    r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert r.status_code == 201, r.text
    start: dict[str, Any] = r.json()
    return start


async def decide(h: Harness, key: str, aid: str, user: str, decision: str = "approve", **kw: Any) -> Any:
    return await h.client.post(
        f"/v1/approvals/{aid}/decision",
        headers=h.auth(h.approver_of(key)),
        json={"decision": decision, "userId": user, **kw},
    )


async def current(h: Harness, key: str, aid: str) -> dict[str, Any]:
    body: dict[str, Any] = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
    return body


async def test_an_edit_restarts_the_count_and_a_stale_or_missing_digest_is_refused_with_409(
    db_kind: str,
) -> None:
    async with cosigner_app(POLICY, database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        start = await create(h, key)
        aid, original = start["approvalId"], start["parametersDigest"]
        assert original == parameters_digest(CALL)
        # Cat approves the agent's call, naming it: 1 of 2.
        assert (await decide(h, key, aid, "u_cat", parametersDigest=original)).status_code == 200

        edited = await decide(h, key, aid, "u_ann", edit={"amountCents": 4000}, parametersDigest=original)
        assert edited.status_code == 200, edited.text
        body = await current(h, key, aid)
        assert body["status"] == "pending" and [a["by"] for a in body["approvals"]] == ["u_ann"]
        new = body["currentCall"]["digest"]
        assert new == parameters_digest(EDITED), "the digest covers the hidden cardToken's real value"
        assert body["currentCall"]["parameters"] == {**EDITED, "cardToken": "[REDACTED]"}

        # Bob's app showed the agent's call: stale, 409, told the current digest; not counted.
        stale = await decide(h, key, aid, "u_bob", parametersDigest=original)
        assert stale.status_code == 409
        error = stale.json()["error"]
        assert (
            error["code"] == "PARAMETERS_MISMATCH" and error["digest"] == new and error["editedBy"] == "u_ann"
        )
        assert "edited by u_ann" in error["message"]
        # An app that names no digest is taken to have shown the agent's call: refused too.
        assert (await decide(h, key, aid, "u_bob")).status_code == 409
        assert (await decide(h, key, aid, "u_bob", decision="deny")).status_code == 409
        # A digest of nothing shown at all is refused as well.
        wrong = await decide(h, key, aid, "u_bob", parametersDigest="sha256:" + "0" * 64)
        assert wrong.status_code == 409
        assert [a["by"] for a in (await current(h, key, aid))["approvals"]] == ["u_ann"]

        done = await decide(h, key, aid, "u_bob", parametersDigest=new)
        assert done.status_code == 200, done.text
        body = await current(h, key, aid)
        assert body["status"] == "approved" and body["edited"] is True
        assert [a["by"] for a in body["approvals"]] == ["u_ann", "u_bob"]
        assert body["digest"] == new and body["originalDigest"] == original
        keys = (await h.client.get("/v1/keys")).json()
        claims = verify_grant(body["grant"], keys, parameters=EDITED, tool_name="issue_refund")
        assert claims.digest == new
        try:
            verify_grant(body["grant"], keys, parameters=CALL, tool_name="issue_refund")
        except GrantRefused:
            pass
        else:
            raise AssertionError("the grant must not verify for the agent's original call")

        trail = (await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).json()["events"]
        names = [e["event"] for e in trail]
        assert names.count("decision_refused") == 4 and names[-1] == "approved"
        aside = next(e for e in trail if e["event"] == "approvals_set_aside")
        assert aside["data"]["approvers"] == [{"by": "u_cat", "surface": "dashboard"}]
        assert "tok_secret" not in json.dumps(trail)


async def test_the_editor_cannot_approve_again_and_the_requester_never_counts(db_kind: str) -> None:
    policy = POLICY.replace('["u_ann", "u_bob", "u_cat"]', '["u_ann", "u_bob", "u_cat", "u_req"]')
    async with cosigner_app(policy, database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        aid = (await create(h, key))["approvalId"]
        refused = await decide(h, key, aid, "u_req", edit={"amountCents": 4000})
        assert refused.status_code == 403 and "separate_duties" in refused.text
        assert "currentCall" not in await current(h, key, aid), "a refused edit changes nothing"
        assert (await decide(h, key, aid, "u_ann", edit={"amountCents": 4000})).status_code == 200
        new = (await current(h, key, aid))["currentCall"]["digest"]
        again = await decide(h, key, aid, "u_ann", parametersDigest=new)
        assert again.status_code == 200
        assert (await current(h, key, aid))["status"] == "pending", "one person never counts twice"
        # A second edit of the edited call: a new version, counted for its editor only.
        second = await decide(h, key, aid, "u_bob", edit={"amountCents": 3000}, parametersDigest=new)
        assert second.status_code == 200, second.text
        body = await current(h, key, aid)
        assert [a["by"] for a in body["approvals"]] == ["u_bob"]
        assert body["currentCall"]["parameters"]["amountCents"] == 3000
        late = await decide(h, key, aid, "u_ann", edit={"amountCents": 2000}, parametersDigest=new)
        assert late.status_code == 409, "an edit of a version since replaced is refused"


async def test_an_edit_that_crosses_a_deny_rule_denies_the_request(db_kind: str) -> None:
    async with cosigner_app(POLICY, database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        aid = (await create(h, key))["approvalId"]
        r = await decide(h, key, aid, "u_ann", edit={"amountCents": 400000})
        assert r.status_code == 200
        body = await current(h, key, aid)
        assert body["status"] == "denied" and body["decidedBy"]["rule"] == "tools.issue_refund.deny_above"


async def test_openapi_publishes_the_digest_an_answer_names_and_the_current_call() -> None:
    async with cosigner_app(POLICY) as h:
        schemas = (await h.client.get("/openapi.json")).json()["components"]["schemas"]
        digest = schemas["DecisionRequest"]["properties"]["parametersDigest"]
        assert "PARAMETERS_MISMATCH" in digest["description"]
        assert "parametersDigest" not in schemas["DecisionRequest"].get("required", [])
        assert "currentCall" in schemas["ApprovalStart"]["properties"]
        assert set(schemas["CurrentCall"]["required"]) >= {"parameters", "editedFields", "digest"}
