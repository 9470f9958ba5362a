"""Edit before approve through the agent API and the dashboard decision: intake checks, the
decision object, and the edited call put to the policy again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from cosigner.digest import parameters_digest
from tests.harness import Harness, cosigner_app

POLICY = """
[tools.issue_refund]
kind = "danger"
redact = ["cardToken"]
editable = ["amountCents", "note"]
deny_above = { parameter = "amountCents", value = 100000 }

[tenants.acme]
admins = { dashboard = ["u_1"] }

[tenants.acme.tools.issue_refund]
allow_below = { parameter = "amountCents", value = 5000 }
"""
CALL = {"orderId": "ord_1", "amountCents": 40000, "note": "late", "cardToken": "tok_x"}
SURFACE = {"type": "dashboard", "userId": "u_1"}


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, str]]:
    async with cosigner_app(POLICY, database_kind=db_kind) as h:
        yield h, await h.create_tenant("acme")


async def ask(h: Harness, key: str, call: str = "c1", **extra: Any) -> Any:
    body = {
        "executionId": "run_1",
        "toolCallId": call,
        "toolName": "issue_refund",
        "parameters": CALL,
        "surface": SURFACE,
        "acceptsEdits": True,
        **extra,
    }
    return await h.client.post("/v1/approvals", json=body, headers=h.auth(key))


async def decide(h: Harness, approval_id: str, **body: Any) -> Any:
    return await h.client.post(
        f"/v1/approvals/{approval_id}/decision",
        json={"decision": "approve", "userId": "u_1", **body},
        headers=h.auth(h.approver_key()),
    )


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "object", "properties": {"amountCents": {"type": "integr"}}}, "not a valid JSON Schema"),
        ({"$schema": "https://example.com/my-schema", "type": "object"}, "not a JSON Schema draft"),
        ({"type": "object", "description": "x" * 40000}, "the limit is 32768"),
    ],
)
async def test_a_bad_parameters_schema_is_refused_naming_the_fix(
    world: tuple[Harness, str], schema: dict[str, Any], says: str
) -> None:
    h, key = world
    response = await ask(h, key, parametersSchema=schema)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (
        error["code"] == "INVALID_REQUEST"
        and error["field"] == "parametersSchema"
        and says in error["message"]
    )


async def test_a_call_over_deny_above_is_refused(world: tuple[Harness, str]) -> None:
    h, key = world
    body = {
        "executionId": "run_1",
        "toolCallId": "c9",
        "toolName": "issue_refund",
        "parameters": {**CALL, "amountCents": 100001},
        "surface": SURFACE,
    }
    response = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert response.status_code == 403
    error = response.json()["error"]
    assert (
        error["code"] == "PERMISSION_DENIED"
        and "deny_above" in error["message"]
        and "100001" in error["message"]
    )


async def test_an_edit_below_allow_below_is_still_a_persons_approval(world: tuple[Harness, str]) -> None:
    h, key = world
    start = (await ask(h, key)).json()
    assert start["editable"] == ["amountCents", "note"]  # cardToken is hidden; orderId not editable
    decided = await decide(h, start["approvalId"], edit={"amountCents": 400})
    body = decided.json()
    assert decided.status_code == 200 and body["status"] == "approved"
    assert body["decidedBy"] == {"kind": "person", "surface": "dashboard", "userId": "u_1"}
    edited = {**CALL, "amountCents": 400}
    assert body["digest"] == body["parametersDigest"] == parameters_digest(edited)
    assert body["parameters"]["cardToken"] == "[REDACTED]"


async def test_an_edit_is_refused_where_it_cannot_apply(world: tuple[Harness, str]) -> None:
    h, key = world
    start = (await ask(h, key)).json()
    approval_id = start["approvalId"]
    for edit, says in [
        ({"cardToken": "tok_y"}, "cardToken cannot be edited"),
        ({"amountCents": "400"}, "must stay a number"),
        ({"amountCents": 40000}, "nothing was changed"),
        ({"note": "card 4242 4242 4242 4242"}, "looks like a credential"),
    ]:
        refused = await decide(h, approval_id, edit=edit)
        assert refused.status_code == 400 and says in refused.json()["error"]["message"], refused.text
    deny_with_edit = await decide(h, approval_id, decision="deny", edit={"amountCents": 400})
    assert deny_with_edit.status_code == 400
    stranger = await h.client.post(
        f"/v1/approvals/{approval_id}/decision",
        json={"decision": "approve", "userId": "u_9", "edit": {"amountCents": 400}},
        headers=h.auth(h.approver_key()),
    )
    assert stranger.status_code == 403 and stranger.json()["error"]["code"] == "NOT_AN_APPROVER"
    still = await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))
    assert still.json()["status"] == "pending"


async def test_without_accepts_edits_nothing_is_editable(world: tuple[Harness, str]) -> None:
    h, key = world
    start = (await ask(h, key, call="c2", acceptsEdits=False)).json()
    assert "editable" not in start
    refused = await decide(h, start["approvalId"], edit={"amountCents": 400})
    assert refused.status_code == 400 and "offers no edit" in refused.json()["error"]["message"]
