"""The grants the server signs carry `jti`, `aud` (the tool's `audience`) and RFC 9396
`authorization_details`, and the SDK's `verify_grant` checks them: the right executor only,
once only, for this call only. Today's claims stay, so an older check still passes."""

from __future__ import annotations

from typing import Any

import jwt
import pytest

from contracts.digest import parameters_digest
from contracts.grants import GrantClaims, GrantRefused, verify_grant
from cosigner.grants import Seen
from tests.harness import Harness, cosigner_app

POLICY = """
[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
audience = "payments-executor"

[tools.close_ticket]
kind = "danger"
approvers = ["requester"]

[tenants.acme.tools.close_ticket]
audience = "helpdesk-executor"

[tenants.acme]
admins = { dashboard = ["u_admin"] }
"""
PARAMS = {"orderId": "ord_4421", "amountCents": 12900}


async def approved(h: Harness, key: str, tool: str, call: str = "call_1") -> dict[str, Any]:
    body = {
        "executionId": "run_1",
        "toolCallId": call,
        "toolName": tool,
        "parameters": PARAMS,
        "surface": {"type": "dashboard", "userId": "u_dev"},
    }
    created = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert created.status_code == 201, created.text
    aid = created.json()["approvalId"]
    decided = await h.client.post(
        f"/v1/approvals/{aid}/decision",
        headers=h.auth(h.approver_key("acme")),
        json={"decision": "approve", "userId": "u_dev"},
    )
    assert decided.status_code == 200, decided.text
    result: dict[str, Any] = decided.json()
    return result


async def test_a_grant_names_its_executor_once_and_its_call() -> None:
    async with cosigner_app(POLICY) as h:
        key = await h.create_tenant("acme")
        jwks = (await h.client.get("/v1/keys")).json()
        decision = await approved(h, key, "issue_refund")
        claims = jwt.decode(decision["grant"], options={"verify_signature": False})
        assert claims["aud"] == "payments-executor"
        assert claims["jti"].startswith("grt_") and len(claims["jti"]) == 26
        assert claims["authorization_details"] == [
            {
                "type": "cosigner_tool_call",
                "tool": "issue_refund",
                "parameters_digest": parameters_digest(PARAMS),
            }
        ]
        # Today's claims are all still there.
        assert {
            "iss",
            "sub",
            "tenant",
            "executionId",
            "toolCallId",
            "toolName",
            "digest",
            "iat",
            "exp",
        } <= set(claims)
        # Every read of the decision gives the same grant, so its jti is the same too.
        again = await h.client.get(f"/v1/approvals/{decision['approvalId']}", headers=h.auth(key))
        assert again.json()["grant"] == decision["grant"]

        seen: set[str] = set()

        def check(seen: Seen, parameters: dict[str, Any] = PARAMS) -> GrantClaims:
            return verify_grant(
                decision["grant"],
                jwks,
                tool_name="issue_refund",
                parameters=parameters,
                audience="payments-executor",
                seen=seen,
            )

        ok = check(seen)
        assert ok.grant_id == claims["jti"] and ok.audience == "payments-executor" and seen == {claims["jti"]}
        with pytest.raises(GrantRefused, match="used already"):
            check(seen)
        with pytest.raises(GrantRefused, match="audience"):
            verify_grant(decision["grant"], jwks, tool_name="issue_refund", parameters=PARAMS)
        with pytest.raises(GrantRefused, match="not 'ledger'"):
            verify_grant(
                decision["grant"], jwks, tool_name="issue_refund", parameters=PARAMS, audience="ledger"
            )
        # A shared store: a callable that records the jti and says whether it had it.
        store: dict[str, int] = {}

        def used(jti: str) -> bool:
            store[jti] = store.get(jti, 0) + 1
            return store[jti] > 1

        check(used)
        with pytest.raises(GrantRefused, match="used already"):
            check(used)
        # A refused check does not use the grant up.
        fresh: set[str] = set()
        with pytest.raises(GrantRefused, match="parameters differ"):
            check(fresh, {**PARAMS, "amountCents": 1})
        assert fresh == set()


async def test_each_grant_has_its_own_jti_and_a_tenant_may_name_the_audience() -> None:
    async with cosigner_app(POLICY) as h:
        key = await h.create_tenant("acme")
        one = await approved(h, key, "close_ticket", "call_1")
        two = await approved(h, key, "close_ticket", "call_2")
        first = jwt.decode(one["grant"], options={"verify_signature": False})
        second = jwt.decode(two["grant"], options={"verify_signature": False})
        assert first["jti"] != second["jti"]
        assert first["aud"] == second["aud"] == "helpdesk-executor"


async def test_a_tool_without_audience_has_no_aud_and_older_checks_still_pass() -> None:
    text = POLICY.replace('audience = "payments-executor"\n', "")
    async with cosigner_app(text) as h:
        key = await h.create_tenant("acme")
        jwks = (await h.client.get("/v1/keys")).json()
        decision = await approved(h, key, "issue_refund")
        claims = jwt.decode(decision["grant"], options={"verify_signature": False})
        assert "aud" not in claims and "jti" in claims
        verify_grant(decision["grant"], jwks, tool_name="issue_refund", parameters=PARAMS)


def test_an_empty_audience_is_refused_by_policy_check() -> None:
    from bot.policy.rules import load_policy
    from contracts.errors import PolicyError

    with pytest.raises(PolicyError) as info:
        load_policy('[tools.t]\nkind = "danger"\naudience = ""\n')
    assert any(p.startswith("tools.t.audience: must be a non-empty string") for p in info.value.problems)


async def test_the_clients_key_cache_takes_the_same_options() -> None:
    from cosigner.keys import KeyCache

    async with cosigner_app(POLICY) as h:
        key = await h.create_tenant("acme")
        cache = KeyCache()
        cache.store((await h.client.get("/v1/keys")).json())
        decision = await approved(h, key, "issue_refund")
        seen: set[str] = set()
        claims = cache.verify(decision["grant"], PARAMS, audience="payments-executor", seen=seen)
        assert claims.grant_id in seen
        with pytest.raises(GrantRefused, match="used already"):
            cache.verify(decision["grant"], PARAMS, audience="payments-executor", seen=seen)
        with pytest.raises(GrantRefused, match="audience"):
            cache.verify(decision["grant"], PARAMS)
