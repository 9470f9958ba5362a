"""`POST /v1/hooks/claude-code`: Claude Code's http hook answered the same as the command;
every error is a 200 deny naming the problem, never an error status the agent would ignore."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.http.decoding import MAX_BODY
from tests.harness import Harness, cosigner_app
from tests.hooks.fixtures import CLAUDE_BASH, CLAUDE_MCP, event
from tests.hooks.running import EXAMPLE_POLICY, decision_of

ROUTE = "/v1/hooks/claude-code"
SURFACE = {"Cosigner-Surface": "dashboard:u_dev"}


@pytest.fixture
async def world() -> AsyncIterator[tuple[Harness, dict[str, str]]]:
    async with cosigner_app(EXAMPLE_POLICY) as h:
        key = await h.create_tenant("demo")
        yield h, {**h.auth(key), **SURFACE}


async def hook(h: Harness, body: Any, headers: dict[str, str], query: str = "") -> tuple[str, str]:
    kwargs: dict[str, Any] = {"content": body} if isinstance(body, bytes) else {"json": body}
    r = await h.client.post(ROUTE + query, headers={"Content-Type": "application/json", **headers}, **kwargs)
    assert r.status_code == 200, r.text
    return decision_of(r.content)


async def test_a_read_is_allowed_at_once(world: Any) -> None:
    h, headers = world
    decision, reason = await hook(h, CLAUDE_BASH, headers)
    assert decision == "allow" and "tools.Bash.when[1]" in reason


async def test_a_recursive_rm_is_denied(world: Any) -> None:
    h, headers = world
    decision, reason = await hook(h, event(CLAUDE_BASH, command="rm -rf build", call="t_rm"), headers)
    assert decision == "deny" and "recursive rm" in reason


async def test_a_push_waits_for_the_approver_and_a_deny_carries_the_comment(world: Any) -> None:
    h, headers = world
    push = event(CLAUDE_BASH, command="git push origin main", call="t_push")
    answer = asyncio.create_task(hook(h, push, headers, "?wait=60"))
    await h.waiters(1)
    start = await h.client.post(
        "/v1/approvals",
        json={
            "executionId": push["session_id"],
            "toolCallId": "t_push",
            "toolName": "Bash",
            "parameters": push["tool_input"],
            "surface": {"type": "dashboard", "userId": "u_dev"},
        },
        headers={"Authorization": headers["Authorization"]},
    )
    aid = start.json()["approvalId"]
    shown = start.json()["parameters"]
    assert shown["command"] == "git push origin main"
    body = {"decision": "deny", "userId": "u_admin", "comment": "push to the staging remote first"}
    r = await h.client.post(
        f"/v1/approvals/{aid}/decision", json=body, headers=h.auth(h.approver_key("demo"))
    )
    assert r.status_code == 200, r.text
    decision, reason = await answer
    assert decision == "deny" and "push to the staging remote first" in reason and "u_admin" in reason


async def test_no_answer_within_the_wait_withdraws_the_request(world: Any) -> None:
    h, headers = world
    push = event(CLAUDE_MCP, call="t_mcp")  # an MCP tool the policy does not know: asked
    decision, reason = await hook(h, push, headers, "?wait=0")
    assert decision == "deny" and "withdrawn" in reason
    again = await h.client.post(
        "/v1/approvals",
        json={
            "executionId": push["session_id"],
            "toolCallId": "t_mcp",
            "toolName": push["tool_name"],
            "parameters": push["tool_input"],
            "surface": {"type": "dashboard", "userId": "u_dev"},
        },
        headers={"Authorization": headers["Authorization"]},
    )
    assert again.json()["status"] == "cancelled"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{oops", "body"),
        (event(CLAUDE_BASH, hook_event_name="PostToolUse"), "hook_event_name"),
        ({k: v for k, v in CLAUDE_BASH.items() if k != "session_id"}, "session_id"),
        (event(CLAUDE_BASH, tool_input="ls"), "tool_input"),
        (b'{"session_id": "a", "session_id": "b"}', "body"),
    ],
)
async def test_a_body_that_is_not_the_hooks_is_a_deny_naming_the_field(
    world: Any, body: Any, field: str
) -> None:
    h, headers = world
    decision, reason = await hook(h, body, headers)
    assert decision == "deny" and f"{field}:" in reason


async def test_a_body_over_the_limit_is_a_deny(world: Any) -> None:
    h, headers = world
    decision, reason = await hook(h, b" " * (MAX_BODY + 1), headers)
    assert decision == "deny" and "limit" in reason


@pytest.mark.parametrize(
    ("headers", "query", "named"),
    [
        ({}, "", "Authorization"),
        ({"Authorization": "Bearer csk_nobody"}, "", "not known"),
        (SURFACE, "", "Authorization"),
        ("key", "", "Cosigner-Surface"),
        ("bad-surface", "", "Cosigner-Surface"),
        ("key+surface", "?wait=591", "wait"),
        ("key+surface", "?wait=soon", "wait"),
        ("approver", "", "KEY_SCOPE"),
    ],
)
async def test_every_error_is_a_deny_naming_it(world: Any, headers: Any, query: str, named: str) -> None:
    h, good = world
    given = (
        {
            "key": {"Authorization": good["Authorization"]},
            "bad-surface": {"Authorization": good["Authorization"], "Cosigner-Surface": "slack:T0ACME"},
            "key+surface": good,
            "approver": {**h.auth(h.approver_key("demo")), **SURFACE},
        }.get(headers, headers)
        if isinstance(headers, str)
        else headers
    )
    decision, reason = await hook(h, event(CLAUDE_BASH, call="t_err"), given, query)
    assert decision == "deny" and named in reason
