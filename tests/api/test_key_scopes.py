"""Separation of duties: an agent key asks, an approver key answers, and neither does the other's part."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from contracts.enums import KeyScope
from cosigner import AsyncCosigner
from cosigner.errors import WrongKeyScope
from tests.api.test_approvals import call
from tests.harness import BASE_URL, Harness, cosigner_app

U1 = {"type": "dashboard", "userId": "u_1"}


async def pending(h: Harness, key: str, call_id: str) -> str:
    r = await h.client.post("/v1/approvals", json=call(call_id=call_id, surface=U1), headers=h.auth(key))
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


def scope_refusal(r: httpx.Response, needs: KeyScope) -> None:
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert error["code"] == "KEY_SCOPE" and error["needs"] == needs.value
    assert f"--scope {needs.value}" in error["message"], "the message names how to get the right key"


async def test_the_agent_key_cannot_decide_nor_list_or_lift_standing_denies(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        agent = await h.create_tenant("acme")
        approver = h.approver_of(agent)
        aid = await pending(h, agent, "c1")
        for verdict in ("approve", "deny", "always_deny"):
            r = await h.client.post(
                f"/v1/approvals/{aid}/decision",
                json={"decision": verdict, "userId": "u_1"},
                headers=h.auth(agent),
            )
            scope_refusal(r, KeyScope.APPROVER)
        assert (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(agent))).json()[
            "status"
        ] == "pending"
        denied = await h.client.post(
            f"/v1/approvals/{aid}/decision",
            json={"decision": "always_deny", "userId": "u_1"},
            headers=h.auth(approver),
        )
        assert denied.status_code == 200, denied.text
        scope_refusal(await h.client.get("/v1/denials", headers=h.auth(agent)), KeyScope.APPROVER)
        (denial,) = (await h.client.get("/v1/denials", headers=h.auth(approver))).json()["denials"]
        lift = f"/v1/denials/{denial['denialId']}"
        scope_refusal(await h.client.delete(lift, headers=h.auth(agent)), KeyScope.APPROVER)
        still = (await h.client.get("/v1/denials", headers=h.auth(approver))).json()["denials"]
        assert [d["denialId"] for d in still] == [denial["denialId"]], "the agent's key lifted nothing"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/approvals", call(call_id="c9", surface=U1)),
        ("POST", "/v1/runs/admit", {"executionId": "run_9", "surface": U1, "tools": ["issue_refund"]}),
        ("GET", "/v1/approvals/{aid}/events", None),
        ("POST", "/v1/approvals/{aid}/cancel", None),
        ("POST", "/v1/approvals/{aid}/result", {"outcome": "succeeded"}),
    ],
)
async def test_the_approver_key_cannot_ask_nor_act_for_the_agent(method: str, path: str, body: Any) -> None:
    async with cosigner_app() as h:
        agent = await h.create_tenant("acme")
        aid = await pending(h, agent, "c1")
        r = await h.client.request(
            method, path.format(aid=aid), json=body, headers=h.auth(h.approver_of(agent))
        )
        scope_refusal(r, KeyScope.AGENT)
        got = await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(agent))
        assert got.json()["status"] == "pending"


async def test_both_keys_read_an_approval_and_its_audit() -> None:
    async with cosigner_app() as h:
        agent = await h.create_tenant("acme")
        aid = await pending(h, agent, "c1")
        for key in (agent, h.approver_of(agent)):
            assert (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).status_code == 200
            assert (await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).status_code == 200


async def test_the_sdk_decide_with_an_agent_key_says_it_needs_an_approver_key() -> None:
    async with cosigner_app() as h:
        agent = await h.create_tenant("acme")
        aid = await pending(h, agent, "c1")
        transport = httpx.ASGITransport(app=h.app)
        async with AsyncCosigner(url=BASE_URL, api_key=agent, transport=transport) as client:
            with pytest.raises(WrongKeyScope) as caught:
                await client.decide(aid, decision="approve", user_id="u_1")
        assert caught.value.status == 403 and caught.value.code == "KEY_SCOPE"
        assert "needs an approver key" in caught.value.message and caught.value.details["needs"] == "approver"
        async with AsyncCosigner(url=BASE_URL, api_key=h.approver_of(agent), transport=transport) as app:
            assert (await app.decide(aid, decision="approve", user_id="u_1")).approved
