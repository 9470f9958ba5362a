"""The SDK and the server speak one protocol: codes, error classes, and every documented response."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import BaseModel, TypeAdapter

from cosigner import allowances, answers, denials, errors, handoff, operations, wire
from cosigner._http import error_of
from cosigner.enums import ErrorCode
from cosigner.hooks import wire as hook_wire
from tests.harness import cosigner_app
from tests.sdk.conftest import SURFACE, USER


def test_every_error_code_has_exactly_one_exception_class() -> None:
    assert set(errors.BY_CODE) == set(ErrorCode)
    for code, cls in errors.BY_CODE.items():
        assert cls.code == code and issubclass(cls, errors.CosignerError)
    assert len(set(errors.BY_CODE.values())) == len(ErrorCode)


def test_an_error_body_becomes_its_class_with_every_extra_field() -> None:
    body = {"error": {"code": "TOOL_CALL_CAP_EXCEEDED", "message": "cap is 5", "limit": 5}}
    exc = error_of(httpx.Response(429, json=body))
    assert isinstance(exc, errors.ToolCallCapExceeded)
    assert (exc.code, exc.message, exc.details, exc.body()) == (
        "TOOL_CALL_CAP_EXCEEDED",
        "cap is 5",
        {"limit": 5},
        body,
    )
    newer = error_of(httpx.Response(418, json={"error": {"code": "SOMETHING_NEW", "message": "m", "x": 1}}))
    assert type(newer) is errors.CosignerError and (newer.code, newer.status, newer.details) == (
        "SOMETHING_NEW",
        418,
        {"x": 1},
    )
    bare = error_of(httpx.Response(500, text="Internal Server Error"))
    assert bare is not None and bare.status == 500 and "COSIGNER_URL" in bare.message


def test_the_server_raises_and_serialises_the_sdk_classes() -> None:
    import bot.cli.commands
    import bot.dev.sandbox
    import contracts.errors as server

    assert bot.cli.commands and bot.dev.sandbox  # loaded so every subclass defined anywhere is seen
    for cls in errors.BY_CODE.values():
        assert getattr(server, cls.__name__) is cls
    found, stack = [], [errors.CosignerError]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    assert {cls.__module__ for cls in found} == {"cosigner.errors"}, [
        c for c in found if "cosigner" not in c.__module__
    ]
    raised = server.ToolCallCapExceeded("cap is 5", limit=5, approvalId="apv_x")
    back = error_of(httpx.Response(raised.status, json=raised.body()))
    assert type(back) is server.ToolCallCapExceeded
    assert (back.code, back.status, back.message, back.details) == (
        ErrorCode.TOOL_CALL_CAP_EXCEEDED,
        429,
        "cap is 5",
        {"limit": 5, "approvalId": "apv_x"},
    )


def _sdk_type(name: str) -> Any:
    """The SDK's type of a component: a request model, an answer model, or a closed set."""
    found = next(
        (
            getattr(m, name)
            for m in (wire, answers, denials, allowances, handoff, operations, hook_wire)
            if hasattr(m, name)
        ),
        None,
    )
    assert found is not None, f"the SDK has no type {name}"
    return found


def _model(schema: dict[str, Any]) -> Any:
    """The SDK type an OpenAPI response schema names (a $ref, or oneOf of $refs)."""
    if "$ref" in schema:
        model = _sdk_type(schema["$ref"].rsplit("/", 1)[1])
        assert issubclass(model, BaseModel)
        return model
    parts = [_model(s) for s in schema["oneOf"]]
    union = parts[0]
    for part in parts[1:]:
        union = union | part
    return union


def _schemas(doc: dict[str, Any]) -> dict[tuple[str, str, str], Any]:
    found = {}
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            for status, response in op["responses"].items():
                for content in response.get("content", {}).values():
                    found[(method.upper(), path, status)] = TypeAdapter(_model(content["schema"]))
    return found


ALLOWING = """
[tools.deploy]
kind = "write"
confirm = true
allow_for = "1h"

[tenants.acme]
admins = { dashboard = ["u_admin"] }
"""


async def allowance_calls() -> list[tuple[str, str, httpx.Response]]:
    """Allow for from the dashboard, then `GET /v1/allowances` and `DELETE` of the one granted."""
    async with cosigner_app(ALLOWING) as h:
        key = await h.create_tenant("acme")
        approver = h.auth(h.approver_key("acme"))
        body = {
            "executionId": "run_alw",
            "toolCallId": "c1",
            "toolName": "deploy",
            "parameters": {"service": "api"},
            "surface": {"type": "dashboard", "userId": USER},
        }
        first = (await h.client.post("/v1/approvals", json=body, headers=h.auth(key))).json()
        allow = {"decision": "allow_for", "allowFor": "1h", "userId": USER}
        await h.client.post(f"/v1/approvals/{first['approvalId']}/decision", json=allow, headers=approver)
        later = await h.client.post("/v1/approvals", json={**body, "toolCallId": "c2"}, headers=h.auth(key))
        listed = await h.client.get("/v1/allowances", headers=approver)
        one = f"/v1/allowances/{listed.json()['allowances'][0]['allowanceId']}"
        return [
            ("POST", "/v1/approvals", later),
            ("GET", "/v1/allowances", listed),
            ("DELETE", "/v1/allowances/{allowanceId}", await h.client.delete(one, headers=approver)),
        ]


async def test_the_sdk_models_accept_every_documented_response() -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        doc = (await h.client.get("/openapi.json")).json()
        for name, schema in doc["components"]["schemas"].items():
            sdk_type = _sdk_type(name)
            if isinstance(sdk_type, type) and issubclass(sdk_type, BaseModel):
                ours = sdk_type.model_json_schema(ref_template="#/components/schemas/{model}")
                assert ours["properties"] == schema["properties"], name
            else:
                assert sorted(m.value for m in sdk_type) == sorted(schema["enum"]), name
        adapters = _schemas(doc)
        auth = h.auth(key)
        approver = h.auth(h.approver_of(key))  # the tenant app: decisions and standing denies
        call = {"executionId": "run_api", "surface": SURFACE.to_json(), "parameters": {"orderId": "o"}}

        async def post(path: str, body: dict[str, Any] | None = None) -> httpx.Response:
            app = path.endswith("/decision")
            return await h.client.post(path, json=body, headers=approver if app else auth)

        async def get(path: str) -> httpx.Response:
            return await h.client.get(path, headers=approver if path.startswith("/v1/denials") else auth)

        pending = await post("/v1/approvals", {**call, "toolCallId": "a", "toolName": "issue_refund"})
        aid = pending.json()["approvalId"]
        # Another call (an identical one while `a` waits would be the same question: coalesced).
        other_call = {**call, "parameters": {"orderId": "o2"}, "toolCallId": "b", "toolName": "issue_refund"}
        other = (await post("/v1/approvals", other_call)).json()
        A, D = "/v1/approvals", "/v1/approvals/{approvalId}"
        calls = [
            ("POST", A, pending),
            ("POST", A, await post(A, {**call, "toolCallId": "c", "toolName": "lookup_order"})),
            ("POST", A, await post(A, {})),
            (
                "POST",
                "/v1/runs/admit",
                await post(
                    "/v1/runs/admit",
                    {"executionId": "r", "surface": SURFACE.to_json(), "tools": ["lookup_order"]},
                ),
            ),
            ("POST", "/v1/runs/admit", await post("/v1/runs/admit", {})),
            ("GET", D, await get(f"{A}/{aid}")),
            ("GET", D, await get(f"{A}/apv_{'0' * 24}")),
            (
                "POST",
                D + "/decision",
                await post(f"{A}/{aid}/decision", {"decision": "approve", "userId": USER}),
            ),
            (
                "POST",
                D + "/decision",
                await post(f"{A}/{aid}/decision", {"decision": "approve", "userId": USER}),
            ),
            ("POST", D + "/cancel", await post(f"{A}/{other['approvalId']}/cancel")),
            ("POST", D + "/cancel", await post(f"{A}/{aid}/cancel")),
            ("POST", D + "/result", await post(f"{A}/{aid}/result", {"outcome": "succeeded"})),
            (
                "POST",
                D + "/result",
                await post(f"{A}/{other['approvalId']}/result", {"outcome": "succeeded"}),
            ),
            ("GET", D + "/audit", await get(f"{A}/{aid}/audit")),
            ("GET", "/v1/keys", await get("/v1/keys")),
        ]
        never = (await post(A, {**call, "toolCallId": "d", "toolName": "issue_refund"})).json()["approvalId"]
        calls.append(
            (
                "POST",
                D + "/decision",
                await post(f"{A}/{never}/decision", {"decision": "always_deny", "userId": USER}),
            )
        )
        calls.append(("POST", A, await post(A, {**call, "toolCallId": "e", "toolName": "issue_refund"})))
        admit = {"executionId": "r", "surface": SURFACE.to_json(), "tools": ["issue_refund"]}
        calls.append(("POST", "/v1/runs/admit", await post("/v1/runs/admit", admit)))
        hook = {
            "session_id": "s1",
            "tool_use_id": "t1",
            "hook_event_name": "PreToolUse",
            "tool_name": "lookup_order",
            "tool_input": {"orderId": "o"},
            "cwd": "/src/shop",
        }
        answered = await h.client.post(
            "/v1/hooks/claude-code", json=hook, headers={**auth, "Cosigner-Surface": "slack:T0ACME/C1/U1"}
        )
        calls.append(("POST", "/v1/hooks/claude-code", answered))
        listed = await get("/v1/denials")
        calls.append(("GET", "/v1/denials", listed))
        lift = f"/v1/denials/{listed.json()['denials'][0]['denialId']}"
        calls.append(("DELETE", "/v1/denials/{denialId}", await h.client.delete(lift, headers=approver)))
        stream = await get(f"/v1/approvals/{aid}/events")
        events = [line[6:] for line in stream.text.splitlines() if line.startswith("data: ")]
    calls += await allowance_calls()
    seen = set()
    for method, path, response in calls:
        key_ = (method, path, str(response.status_code))
        assert key_ in adapters, (key_, response.text)
        adapters[key_].validate_json(response.content)
        seen.add(key_)
    stream_adapter = adapters[("GET", "/v1/approvals/{approvalId}/events", "200")]
    assert [type(stream_adapter.validate_json(e)).__name__ for e in events] == ["ApprovalStart", "Decision"]
    documented = {k for k in adapters if k[2].startswith("2") and k[1] != "/v1/approvals/{approvalId}/events"}
    assert documented <= set(seen), documented - set(seen)
