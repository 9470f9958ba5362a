"""Every route's answers, success and error, conform to the published `/openapi.json`."""

from __future__ import annotations

import json
from contextlib import nullcontext
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from bot.http.decoding import MAX_BODY
from tests.api.test_approvals import call, start
from tests.harness import Harness, cosigner_app
from tests.operations.application import SECRET, SECRET_ENV, contract_application, policy_for
from tests.operations.test_lifecycle import proposal

ROOT = "urn:cosigner:openapi"


class Conformance:
    """Checks answers against the OpenAPI document and records which were checked."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.registry: Registry[Any] = Registry().with_resource(ROOT, DRAFT202012.create_resource(doc))
        self.seen: set[tuple[str, str, str]] = set()

    def validator(self, pointer: str) -> Draft202012Validator:
        return Draft202012Validator({"$ref": f"{ROOT}#{pointer}"}, registry=self.registry)

    def check(self, template: str, r: httpx.Response) -> None:
        """`r` has a documented status for its operation, and its body matches that answer."""
        method = r.request.method.lower()
        responses = self.doc["paths"][template][method]["responses"]
        status = str(r.status_code)
        assert status in responses, f"{method.upper()} {template} answered {status}, not documented"
        content = responses[status]["content"]
        media = r.headers["content-type"].split(";")[0]
        assert media in content, (template, status, media)
        escaped = template.replace("~", "~0").replace("/", "~1")
        pointer = f"/paths/{escaped}/{method}/responses/{status}/content/{media.replace('/', '~1')}/schema"
        bodies = [r.json()] if media == "application/json" else sse_data(r.text)
        assert bodies
        for body in bodies:
            errors = [e.message for e in self.validator(pointer).iter_errors(body)]
            assert not errors, (template, status, body, errors)
        self.seen.add((method, template, status))


def sse_data(text: str) -> list[Any]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


async def exercise(h: Harness, c: Conformance) -> None:
    """Call every route for its success and error answers."""
    acme, globex = await h.create_tenant("acme"), await h.create_tenant("globex")
    a, g = h.auth(acme), h.auth(globex)
    post, get = h.client.post, h.client.get
    item = "/v1/approvals/{approvalId}"
    missing = "apv_" + "A" * 20

    # With the agent's trace context: its decision objects carry `traceId`.
    traced = {**a, "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    c.check("/v1/approvals", r := await post("/v1/approvals", json=call(), headers=traced))
    aid = r.json()["approvalId"]
    read = call("lookup_order", call_id="r1", params={"orderId": "o1"})
    c.check("/v1/approvals", await post("/v1/approvals", json=read, headers=a))
    for body, headers in (
        (call("delete_account", call_id="d1", params={}), a),
        (
            call(
                call_id="x1", surface={"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"}
            ),
            g,
        ),
        (call(params={"orderId": "other"}), a),
        (call(call_id="h1", surface={"type": "schedule"}), g),
        ({"executionId": "run_1"}, a),
        (call(), {}),
    ):
        c.check("/v1/approvals", await post("/v1/approvals", json=body, headers=headers))
    for i in range(2, 9):
        # Each call its own (identical pending calls are one question: coalesced, not counted).
        params = {"orderId": f"ord_{i}", "amountCents": 12900}
        r = await post(
            "/v1/approvals", json=call(call_id=f"cap{i}", execution="run_cap", params=params), headers=a
        )
        c.check("/v1/approvals", r)
    assert r.status_code == 429

    admit = {"executionId": "run_1", "surface": {"type": "schedule"}, "tools": ["issue_refund"]}
    for body, headers in ((admit, a), (admit, g), ({**admit, "tools": 1}, a), (admit, {})):
        c.check("/v1/runs/admit", await post("/v1/runs/admit", json=body, headers=headers))
    slack = {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"}
    c.check("/v1/runs/admit", await post("/v1/runs/admit", json={**admit, "surface": slack}, headers=g))

    for url in (f"/v1/approvals/{aid}", f"/v1/approvals/{aid}?wait=0", f"/v1/approvals/{missing}"):
        c.check(item, await get(url, headers=a))
    c.check(item, await get(f"/v1/approvals/{aid}?wait=99", headers=a))
    c.check(item + "/events", await get(f"/v1/approvals/{missing}/events", headers=a))
    c.check(item + "/audit", await get(f"/v1/approvals/{aid}/audit", headers=a))
    c.check(item + "/audit", await get(f"/v1/approvals/{aid}/audit", headers=g))
    c.check(item + "/audit", await get(f"/v1/approvals/{aid}/audit"))

    result = f"/v1/approvals/{aid}/result"
    c.check(item + "/result", await post(result, json={"result": 1}, headers=a))
    decision = f"/v1/approvals/{aid}/decision"
    c.check(item + "/decision", await post(decision, json={"decision": "deny", "userId": "u_1"}, headers=a))
    a, g = h.auth(h.approver_key("acme")), h.auth(h.approver_key("globex"))
    for body in ({"decision": "maybe", "userId": "u_1"}, {"decision": "approve", "userId": "u_other"}):
        c.check(item + "/decision", await post(decision, json=body, headers=a))
    c.check(
        item + "/decision", await post(decision, json={"decision": "approve", "userId": "u_1"}, headers=a)
    )
    c.check(item + "/decision", await post(decision, json={"decision": "deny", "userId": "u_1"}, headers=a))
    c.check(item + "/decision", await post(decision, json={"decision": "deny", "userId": "u_1"}, headers=g))
    c.check(item + "/result", await post(result, json={"result": 1}, headers=a))
    c.check(item + "/events", await get(f"/v1/approvals/{aid}/events", headers=a))
    c.check(item + "/cancel", await post(f"/v1/approvals/{aid}/cancel", headers=a))
    a, g = h.auth(acme), h.auth(globex)
    c.check(item, r := await get(f"/v1/approvals/{aid}", headers=a))
    assert r.json()["traceId"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    c.check(item + "/events", await get(f"/v1/approvals/{aid}/events", headers=a))
    for body in ({"outcome": "done"}, {"outcome": "succeeded", "result": {"refundId": "re_1"}}):
        c.check(item + "/result", await post(result, json=body, headers=a))
    c.check(item + "/result", await post(f"/v1/approvals/{missing}/result", json={}, headers=a))

    other = (await start(h, acme, call_id="c2"))["approvalId"]
    cancel = f"/v1/approvals/{other}/cancel"
    c.check(item + "/cancel", await post(cancel, content=b'{"a": 1}', headers=a))
    c.check(item + "/cancel", await post(cancel, headers=a))
    c.check(item + "/cancel", await post(cancel, headers=a))
    c.check(item + "/cancel", await post(f"/v1/approvals/{missing}/cancel", headers=a))
    c.check(item + "/result", await post(f"/v1/approvals/{other}/result", json={}, headers=a))
    c.check("/v1/keys", await get("/v1/keys"))
    # A body over the limit, on every route that takes one: 413, read no further.
    over = b" " * (MAX_BODY + 1)
    approver = h.auth(h.approver_key("acme"))
    for template, headers in (
        ("/v1/approvals", a),
        ("/v1/runs/admit", a),
        (item + "/cancel", a),
        (item + "/result", a),
        (item + "/decision", approver),
    ):
        path = template.replace("{approvalId}", other)
        c.check(template, r := await post(path, content=over, headers=headers))
        assert r.status_code == 413, r.text
    await exercise_denials(h, c, acme, globex)
    await exercise_hook(h, c, acme)
    for method, suffix in (
        ("GET", ""),
        ("GET", "/events"),
        ("POST", "/cancel"),
        ("POST", "/result"),
        ("POST", "/decision"),
    ):
        c.check(item + suffix, await h.client.request(method, f"/v1/approvals/{aid}{suffix}", json={}))


async def exercise_hook(h: Harness, c: Conformance, acme: str) -> None:
    """Claude Code's http hook: a decision and each kind of error, all 200 with the hook's
    JSON (the route fails closed by answering deny, never an error status; its document
    names no error status, and these show none is answered)."""
    from tests.hooks.fixtures import CLAUDE_BASH

    route = "/v1/hooks/claude-code"
    surface = {"Cosigner-Surface": "slack:T0ACME/C1/U1"}
    lookup = {**CLAUDE_BASH, "tool_name": "lookup_order", "tool_input": {"orderId": "o1"}}
    for body, headers in (
        (lookup, {**h.auth(acme), **surface}),
        (lookup, surface),
        ({**lookup, "hook_event_name": "Stop"}, {**h.auth(acme), **surface}),
        (b" " * (MAX_BODY + 1), {**h.auth(acme), **surface}),
    ):
        kwargs: dict[str, Any] = {"content": body} if isinstance(body, bytes) else {"json": body}
        c.check(route, r := await h.client.post(route, headers=headers, **kwargs))
        assert r.status_code == 200
        assert r.json()["hookSpecificOutput"]["permissionDecision"] == (
            "allow" if headers is not surface and body is lookup else "deny"
        )


async def exercise_denials(h: Harness, c: Conformance, acme: str, globex: str) -> None:
    """Always deny from the dashboard, the refusal it causes, listing and lifting."""
    a, g = h.auth(h.approver_of(acme)), h.auth(h.approver_of(globex))
    pending = (await start(h, acme, call_id="den1", execution="run_den"))["approvalId"]
    decision = f"/v1/approvals/{pending}/decision"
    always = {"decision": "always_deny", "userId": "u_1"}
    c.check("/v1/approvals/{approvalId}/decision", await h.client.post(decision, json=always, headers=a))
    refused = await h.client.post(
        "/v1/approvals", json=call(call_id="den2", execution="run_den"), headers=h.auth(acme)
    )
    assert refused.status_code == 403 and refused.json()["error"]["denial"]
    c.check("/v1/approvals", refused)
    for headers in (a, {}, h.auth(acme)):
        c.check("/v1/denials", await h.client.get("/v1/denials", headers=headers))
    listed = (await h.client.get("/v1/denials", headers=a)).json()["denials"]
    one = "/v1/denials/{denialId}"
    lift = f"/v1/denials/{listed[0]['denialId']}"
    for headers in (g, {}, h.auth(acme), a, a):
        c.check(one, await h.client.delete(lift, headers=headers))
    c.check(one, await h.client.delete("/v1/denials/den_nope", headers=a))
    admit = {
        "executionId": "run_d",
        "surface": {"type": "dashboard", "userId": "u_1"},
        "tools": ["issue_refund"],
    }
    again = (await start(h, acme, call_id="den3", execution="run_den"))["approvalId"]
    await h.client.post(f"/v1/approvals/{again}/decision", json=always, headers=a)
    c.check("/v1/runs/admit", r := await h.client.post("/v1/runs/admit", json=admit, headers=h.auth(acme)))
    assert r.json()["standingDenies"]


ALLOWING = """
[tools.deploy]
kind = "write"
confirm = true
allow_for = "1h"

[tenants.acme]
admins = { dashboard = ["u_admin"] }
"""


async def exercise_allowances(c: Conformance) -> None:
    """Allow for from the dashboard, the call it lets through, listing and revoking."""
    async with cosigner_app(ALLOWING) as h:
        agent = await h.create_tenant("acme")
        await h.create_tenant("globex")
        a, g = h.auth(h.approver_key("acme")), h.auth(h.approver_key("globex"))
        body = {
            "executionId": "run_alw",
            "toolCallId": "c1",
            "toolName": "deploy",
            "parameters": {"service": "api"},
            "surface": {"type": "dashboard", "userId": "u_1"},
        }
        first = (await h.client.post("/v1/approvals", json=body, headers=h.auth(agent))).json()
        allow = {"decision": "allow_for", "allowFor": "1h", "userId": "u_1"}
        decision = f"/v1/approvals/{first['approvalId']}/decision"
        c.check("/v1/approvals/{approvalId}/decision", await h.client.post(decision, json=allow, headers=a))
        later = await h.client.post("/v1/approvals", json={**body, "toolCallId": "c2"}, headers=h.auth(agent))
        assert later.json()["decidedBy"]["kind"] == "allowance"
        c.check("/v1/approvals", later)
        for headers in (a, {}, h.auth(agent)):
            c.check("/v1/allowances", await h.client.get("/v1/allowances", headers=headers))
        listed = (await h.client.get("/v1/allowances", headers=a)).json()["allowances"]
        one = "/v1/allowances/{allowanceId}"
        revoke = f"/v1/allowances/{listed[0]['allowanceId']}"
        for headers in (g, {}, h.auth(agent), a, a):
            c.check(one, await h.client.delete(revoke, headers=headers))
        c.check(one, await h.client.delete("/v1/allowances/alw_nope", headers=a))


async def exercise_operations(c: Conformance) -> None:
    """Propose operations to the example application: prepared, refused, unreachable, executed."""
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), callback_allow="127.0.0.1") as h:
            a = h.auth(await h.create_tenant("acme"))
            r = await h.client.post("/v1/approvals", json=proposal(), headers=a)
            c.check("/v1/approvals", r)
            aid = r.json()["approvalId"]
            c.check(
                "/v1/approvals", await h.client.post("/v1/approvals", json=proposal("c2", "ord_1"), headers=a)
            )
            c.check("/v1/approvals/{approvalId}", await h.client.get(f"/v1/approvals/{aid}", headers=a))
            body = {"decision": "approve", "userId": "u_1"}
            approver = h.auth(h.approver_key("acme"))
            r = await h.client.post(f"/v1/approvals/{aid}/decision", json=body, headers=approver)
            c.check("/v1/approvals/{approvalId}/decision", r)
            r = await h.client.get(f"/v1/approvals/{aid}?wait=10", headers=a)
            assert r.json()["outcome"]["type"] == "succeeded"
            c.check("/v1/approvals/{approvalId}", r)
            c.check(
                "/v1/approvals/{approvalId}/events",
                await h.client.get(f"/v1/approvals/{aid}/events", headers=a),
            )
            c.check("/v1/approvals", await h.client.post("/v1/approvals", json=proposal(), headers=a))
        dead = app.url.rsplit(":", 1)[0] + ":9/cosigner"
    async with cosigner_app(policy_for(dead), callback_allow="127.0.0.1") as h:
        a = h.auth(await h.create_tenant("acme"))
        r = await h.client.post("/v1/approvals", json=proposal(), headers=a)
        assert r.status_code == 503
        c.check("/v1/approvals", r)


async def test_every_answer_conforms_to_the_published_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    async with cosigner_app() as h:
        doc = (await h.client.get("/openapi.json")).json()
        Draft202012Validator.check_schema({"$defs": doc["components"]["schemas"]})
        c = Conformance(doc)
        await exercise(h, c)
        await exercise_operations(c)
        await exercise_allowances(c)
        documented = {
            (method, path, status)
            for path, ops in doc["paths"].items()
            for method, op in ops.items()
            for status in op["responses"]
        }
        untested = documented - c.seen
        # Every documented status was answered once (WRONG_CONVERSATION and APPROVAL_EXPIRED
        # share their status with codes above; the lifecycle and surface tests cover them).
        assert not untested, sorted(untested)
        for route in h.app.routes:
            path = getattr(route, "path", "")
            if path.startswith("/v1/"):
                for method in set(getattr(route, "methods", ())) - {"HEAD"}:
                    assert method.lower() in doc["paths"][path.replace("approval_id", "approvalId")]


async def test_a_wrong_method_names_the_allowed_ones() -> None:
    async with cosigner_app() as h:
        r = await h.client.request("TRACE", "/v1/approvals")
        assert r.status_code == 405
        assert r.headers["allow"] == "POST"
        assert r.json()["error"]["code"] == "INVALID_REQUEST"


@pytest.mark.parametrize("model", ["ApprovalRequest", "OperationRequest"])
def test_the_schema_states_the_callback_url_schemes_the_api_accepts(model: str) -> None:
    from bot.http.openapi import openapi
    from contracts import wire

    doc = openapi()
    schema = Conformance(doc).validator(f"/components/schemas/{model}/properties/callbackUrl")
    body: dict[str, Any] = {"executionId": "r", "toolCallId": "c", "surface": {"type": "api"}}
    body |= (
        {"toolName": "t", "parameters": {}}
        if model == "ApprovalRequest"
        else {"operation": "o", "request": {}}
    )
    request = getattr(wire, model)
    for url, accepted in [
        ("https://agent.example.com/cb", True),
        ("HTTP://agent.example.com:8080/cb?x=1", True),
        ("fc00::/7", False),  # a URI with scheme `fc00`, which `format: uri` alone let through
        ("ftp://agent.example.com/cb", False),
        ("mailto:ops@example.com", False),
        ("https://", False),
    ]:
        assert schema.is_valid(url) is accepted, url
        try:
            request.model_validate({**body, "callbackUrl": url})
        except ValueError:
            assert not accepted, url
        else:
            assert accepted, url


async def test_handoff_answers_conform_to_the_published_schema(monkeypatch: Any) -> None:
    from tests.handoff_world import (
        EXPECT_SECRET,
        LOOPBACK,
        SECRET_ENV,
        expect_server,
        handoff_policy,
        handoff_request,
    )
    from tests.harness import ManualClock

    monkeypatch.setenv(SECRET_ENV, EXPECT_SECRET)
    clock = ManualClock()
    async with expect_server(clock) as (shop, url):
        async with cosigner_app(
            handoff_policy(url, "[tenants.acme]"), clock=clock, callback_allow=LOOPBACK
        ) as h:
            doc = (await h.client.get("/openapi.json")).json()
            c = Conformance(doc)
            a = h.auth(await h.create_tenant("acme"))
            approver = h.auth(h.approver_key("acme"))
            item = "/v1/approvals/{approvalId}"
            surface = {"type": "dashboard", "userId": "u_42"}
            ids = []
            for n in range(4):
                created = await h.client.post(
                    "/v1/approvals", json=handoff_request(surface, f"c{n}"), headers=a
                )
                c.check("/v1/approvals", created)
                ids.append(created.json()["approvalId"])
            c.check(item, await h.client.get(f"/v1/approvals/{ids[0]}", headers=a))
            done = {"decision": "done", "userId": "u_42"}
            failed = await h.client.post(f"/v1/approvals/{ids[0]}/decision", json=done, headers=approver)
            assert failed.json()["code"] == "HANDOFF_FAILED"
            c.check(item + "/decision", failed)
            shop.publish("chg_1")
            completed = await h.client.post(f"/v1/approvals/{ids[1]}/decision", json=done, headers=approver)
            assert completed.json()["receipt"]
            c.check(item + "/decision", completed)
            c.check(item + "/events", await h.client.get(f"/v1/approvals/{ids[1]}/events", headers=a))
            cancel = {"decision": "cancel", "userId": "u_42"}
            c.check(
                item + "/decision",
                await h.client.post(f"/v1/approvals/{ids[2]}/decision", json=cancel, headers=approver),
            )
            h.advance(301)
            expired = await h.client.get(f"/v1/approvals/{ids[3]}?wait=5", headers=a)
            assert expired.json()["code"] == "HANDOFF_TIMEOUT"
            c.check(item, expired)
            c.check(
                item + "/decision",
                await h.client.post(f"/v1/approvals/{ids[3]}/decision", json=done, headers=approver),
            )


@pytest.mark.parametrize(
    ("model", "field"),
    [
        ("ApprovalRequest", "reason"),
        ("OperationRequest", "reason"),
        ("DecisionRequest", "comment"),
        ("ResultReport", "error"),
    ],
)
def test_the_schema_states_that_free_text_holds_no_nul(model: str, field: str) -> None:
    # The API refuses U+0000 in free text (PostgreSQL cannot store it); a schema that let it
    # through had a client built from it send a valid-looking value that was refused.
    from bot.http.openapi import openapi
    from contracts import wire

    schema = Conformance(openapi()).validator(f"/components/schemas/{model}/properties/{field}")
    request = getattr(wire, model)
    for text, accepted in [("fine, with ünïcode and \t tabs", True), ("a\x00b", False), ("\x00", False)]:
        assert schema.is_valid(text) is accepted, repr(text)
        with pytest.raises(ValueError, match="NUL") if not accepted else nullcontext():
            request.model_validate({**minimal_body(model), field: text})


def minimal_body(model: str) -> dict[str, Any]:
    """The least body each model takes."""
    calls: dict[str, Any] = {"executionId": "r", "toolCallId": "c", "surface": {"type": "api"}}
    return {
        "ApprovalRequest": {**calls, "toolName": "t", "parameters": {}},
        "OperationRequest": {**calls, "operation": "o", "request": {}},
        "DecisionRequest": {"decision": "approve", "userId": "u_1"},
        "ResultReport": {},
    }[model]


async def test_the_served_v1_routes_are_exactly_the_documented_ones() -> None:
    # One route table: every /v1 route the server answers is in /openapi.json with its
    # method, and nothing is documented that the server does not serve.
    from starlette.routing import Route

    async with cosigner_app() as h:
        served = {
            (route.path.replace("{approval_id}", "{approvalId}"), method.lower())
            for route in h.app.routes
            if isinstance(route, Route) and route.path.startswith("/v1/")
            for method in route.methods or ()
            if method != "HEAD"
        }
        doc = (await h.client.get("/openapi.json")).json()
    documented = {(path, method) for path, ops in doc["paths"].items() for method in ops}
    assert served == documented and len(served) == 14
