"""Request bodies and path ids the agent API refuses: ambiguous JSON, loose types, bad ids."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa

from storage import raw
from storage.tables import approvals, audit_events
from tests.api.test_approvals import DASH, call, start
from tests.harness import Harness, cosigner_app


async def rows(h: Harness) -> tuple[int, int]:
    """How many approvals and audit events are stored."""
    async with raw.read(h.parts.db) as conn:
        n_approvals = (await conn.execute(sa.select(sa.func.count()).select_from(approvals))).scalar_one()
        n_events = (await conn.execute(sa.select(sa.func.count()).select_from(audit_events))).scalar_one()
    return n_approvals, n_events


def refused(r: Any, field: str | None = None) -> None:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "INVALID_REQUEST"
    if field is not None:
        assert error["field"] == field, error


REFUND = (
    '{"executionId": "run_1", "toolCallId": "c9", "toolName": "issue_refund", "surface": {"type": "api"},'
    ' "parameters": {"orderId": "o1", "amountCents": 999999, "amountCents": 100}}'
)
DELETE_AS_READ = (
    '{"executionId": "run_1", "toolCallId": "c8", "toolName": "delete_account", "toolName": "lookup_order",'
    ' "surface": {"type": "api"}, "parameters": {}}'
)


async def test_duplicate_keys_are_refused_on_every_json_route(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        auth = {**h.auth(key), "Content-Type": "application/json"}
        aid = (await start(h, key))["approvalId"]
        before = await rows(h)
        for path, body in (
            ("/v1/approvals", REFUND),
            ("/v1/approvals", DELETE_AS_READ),
            (
                "/v1/approvals",
                json.dumps(call(call_id="c7"))[:-1] + ', "surface": {"type": "api", "type": "api"}}',
            ),
            (
                "/v1/runs/admit",
                '{"executionId": "r", "executionId": "r", "surface": {"type": "api"}, "tools": []}',
            ),
            (f"/v1/approvals/{aid}/decision", '{"decision": "deny", "decision": "approve", "userId": "u_1"}'),
            (f"/v1/approvals/{aid}/cancel", '{"x": 1, "x": 2}'),
            (f"/v1/approvals/{aid}/result", '{"result": {"a": [{"b": 1, "b": 2}]}}'),
        ):
            holder = h.approver_of(key) if path.endswith("/decision") else key
            r = await h.client.post(path, content=body.encode(), headers={**auth, **h.auth(holder)})
            refused(r, "body")
            assert "appears twice" in r.json()["error"]["message"], path
        assert await rows(h) == before, "nothing is written for a refused body"
        state = await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))
        assert state.json()["status"] == "pending"


async def test_non_finite_numbers_are_refused() -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        for number in ("NaN", "Infinity", "-Infinity", "1e400"):
            body = json.dumps(call(params={"amountCents": 1}, call_id="n1")).replace(
                '"amountCents": 1', f'"amountCents": {number}'
            )
            r = await h.client.post("/v1/approvals", content=body.encode(), headers=h.auth(key))
            refused(r, "body")
        assert await rows(h) == (0, 0)


APPROVAL = call(surface={"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"})
WRONG_TYPES: list[tuple[str, dict[str, Any], str, Any]] = [
    ("/v1/approvals", APPROVAL, "timeoutSeconds", True),
    ("/v1/approvals", APPROVAL, "timeoutSeconds", "300"),
    ("/v1/approvals", APPROVAL, "timeoutSeconds", 300.0),
    ("/v1/approvals", APPROVAL, "timeoutSeconds", 300.5),
    ("/v1/approvals", APPROVAL, "executionId", 81),
    ("/v1/approvals", APPROVAL, "toolCallId", 7),
    ("/v1/approvals", APPROVAL, "toolName", True),
    ("/v1/approvals", APPROVAL, "reason", 1.5),
    ("/v1/approvals", APPROVAL, "callbackUrl", 443),
    ("/v1/approvals", APPROVAL, "parameters", "{}"),
    ("/v1/approvals", APPROVAL, "surface.teamId", 1),
    ("/v1/approvals", APPROVAL, "surface.channelId", False),
    ("/v1/approvals", APPROVAL, "surface.userId", 1.0),
    ("/v1/approvals", APPROVAL, "surface.threadTs", 1700.1),
    ("/v1/approvals", APPROVAL, "surface.enterpriseId", 5),
    ("/v1/approvals", call(surface={"type": "sms", "phone": "+15550100"}), "surface.phone", 15550100),
    ("/v1/approvals", call(surface=DASH), "surface.userId", 42),
    ("/v1/approvals", call(surface={"type": "web_widget", "tokenKind": "server"}), "surface.tokenKind", 1),
    ("/v1/runs/admit", {"executionId": "r", "surface": DASH, "tools": []}, "executionId", 1),
    ("/v1/runs/admit", {"executionId": "r", "surface": DASH, "tools": []}, "tools", "issue_refund"),
    ("/v1/runs/admit", {"executionId": "r", "surface": DASH, "tools": []}, "tools.0", 1),
    ("/v1/runs/admit", {"executionId": "r", "surface": DASH, "tools": []}, "tools.0", True),
    ("decision", {"decision": "approve", "userId": "u_1"}, "decision", True),
    ("decision", {"decision": "approve", "userId": "u_1"}, "userId", 42),
    ("decision", {"decision": "approve", "userId": "u_1"}, "comment", 1),
    ("result", {"outcome": "succeeded"}, "outcome", 1),
    ("result", {"outcome": "succeeded"}, "error", 500),
    ("result", {"outcome": "succeeded"}, "error", False),
]


def with_value(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `body` with the field at `path` (dots; list indexes) set to `value`."""
    out: dict[str, Any] = json.loads(json.dumps(body))
    *parents, last = path.split(".")
    node: Any = out  # a dict or a list, as the path descends
    for part in parents:
        node = node[part]
    if isinstance(node, list) or last.isdigit():
        node.append(value)
    else:
        node[last] = value
    return out


@pytest.mark.parametrize(("route", "body", "field", "value"), WRONG_TYPES)
async def test_no_value_is_coerced_to_another_json_type(
    route: str, body: dict[str, Any], field: str, value: Any
) -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        path = route
        if not route.startswith("/"):
            aid = (await start(h, key))["approvalId"]
            path = f"/v1/approvals/{aid}/{route}"
        before = await rows(h)
        holder = h.approver_of(key) if route == "decision" else key
        r = await h.client.post(path, json=with_value(body, field, value), headers=h.auth(holder))
        refused(r, field)
        assert await rows(h) == before


MALFORMED_IDS = [
    "apv_%00",
    "apv_%00" + "A" * 16,
    "apv_x",
    "x" * 300,
    "APV_" + "A" * 20,
    "apv_" + "A" * 19 + "%C3%A9",
]


async def test_malformed_ids_are_not_found_on_every_route(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        await start(h, key)
        for bad in MALFORMED_IDS:
            for method, suffix, body in (
                ("GET", "", None),
                ("GET", "?wait=0", None),
                ("GET", "/events", None),
                ("GET", "/audit", None),
                ("POST", "/cancel", None),
                ("POST", "/result", {"outcome": "succeeded"}),
                ("POST", "/decision", {"decision": "approve", "userId": "u_1"}),
            ):
                holder = h.approver_of(key) if suffix == "/decision" else key
                r = await h.client.request(
                    method, f"/v1/approvals/{bad}{suffix}", json=body, headers=h.auth(holder)
                )
                assert r.status_code == 404, (bad, suffix, r.text)
                assert r.json()["error"]["code"] == "APPROVAL_NOT_FOUND"
                assert "\x00" not in r.text


async def test_a_result_for_a_pending_approval_is_approval_pending(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        aid = (await start(h, key))["approvalId"]
        before = await rows(h)
        r = await h.client.post(f"/v1/approvals/{aid}/result", headers=h.auth(key), json={"result": 1})
        assert r.status_code == 409
        error = r.json()["error"]
        assert (error["code"], error["status"]) == ("APPROVAL_PENDING", "pending")
        assert await rows(h) == before
        await h.client.post(f"/v1/approvals/{aid}/cancel", headers=h.auth(key))
        r = await h.client.post(f"/v1/approvals/{aid}/result", headers=h.auth(key), json={"result": 1})
        assert (r.status_code, r.json()["error"]["code"]) == (409, "ALREADY_DECIDED")


NUL = "u\x00_1"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/approvals", {**call("c_nul"), "surface": {"type": "dashboard", "userId": NUL}}, None),
        (
            "/v1/runs/admit",
            {"executionId": "r1", "surface": {"type": "dashboard", "userId": NUL}, "tools": ["a"]},
            None,
        ),
        (
            "/v1/runs/admit",
            {"executionId": "r1", "surface": {"type": "api"}, "tools": ["issue_refund\x00"]},
            None,
        ),
        (
            "/v1/runs/admit",
            {"executionId": "r1", "surface": {"type": "api"}, "tools": ["not a tool name"]},
            None,
        ),
    ],
)
async def test_nul_in_any_string_is_a_400_on_every_database(
    db_kind: str, path: str, body: dict[str, Any], field: str | None
) -> None:
    # PostgreSQL cannot hold U+0000 in text and answered 500; the models refuse it first.
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        r = await h.client.post(path, json=body, headers=h.auth(key))
        refused(r)
        assert await rows(h) == (0, 0)


def test_every_string_of_every_wire_model_refuses_nul() -> None:
    """The rule is the models' base's: a string field added later keeps it without a word."""
    import inspect

    from cosigner import answers, denials, wire

    models = {
        m
        for module in (wire, answers, denials)
        for _, m in inspect.getmembers(module, inspect.isclass)
        if issubclass(m, wire.Wire) and m is not wire.Wire
    }
    assert wire.DashboardSurface in models and wire.AdmitRequest in models
    for model in models:
        for name, prop in model.model_json_schema()["properties"].items():
            for part in (prop, *prop.get("anyOf", ()), prop.get("items") or {}):
                if part.get("type") == "string" and "enum" not in part and "const" not in part:
                    assert "pattern" in part or "format" in part, (model.__name__, name)


async def test_a_key_holding_nul_is_refused_naming_it_escaped() -> None:
    """A key with NUL in it is named in the error body escaped, never as a 500."""
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        headers = {**h.auth(key), "content-type": "application/json"}
        for path in ("/v1/approvals", "/v1/approvals/apv_00000000000000000000/cancel"):
            r = await h.client.post(path, content=b'{"\\u0000": null}', headers=headers)
            assert r.status_code == 400, r.text
            error = r.json()["error"]
            assert error["code"] == "INVALID_REQUEST" and "\x00" not in r.text
            assert "\\u0000" in [p["field"] for p in error["problems"]]
