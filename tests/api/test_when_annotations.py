"""`when` blocks on an MCP tool's annotations: they may ask or refuse a call, never allow one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.policy.rules import load_policy
from contracts.errors import PolicyError
from tests.harness import Harness, cosigner_app

POLICY = """
[tools.mcp__fs__write_file]
kind = "write"                 # runs unasked, unless a block below says otherwise

[[tools.mcp__fs__write_file.when]]
annotations = { destructiveHint = true }
then = "deny"
reason = "the server says this tool destroys data"

[[tools.mcp__fs__write_file.when]]
annotations = { idempotentHint = false }
match = { path = { prefix = "/etc/" } }
then = "ask"

[tools.mcp__fs__read_file]
kind = "danger"                # a readOnlyHint does not make it a read

[tenants.acme]
"""
DEV = {"type": "dashboard", "userId": "u_dev"}


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, str]]:
    async with cosigner_app(POLICY, database_kind=db_kind) as h:
        yield h, await h.create_tenant("acme")


async def ask(h: Harness, key: str, tool: str, n: int, hints: Any, path: str = "/tmp/x") -> Any:
    body: dict[str, Any] = {
        "executionId": "run_1",
        "toolCallId": f"c{n}",
        "toolName": tool,
        "parameters": {"path": path},
        "surface": DEV,
    }
    if hints is not None:
        body["toolAnnotations"] = hints
    return await h.client.post("/v1/approvals", json=body, headers=h.auth(key))


async def test_annotations_ask_or_refuse_and_never_allow(world: Any) -> None:
    h, key = world
    w = "mcp__fs__write_file"
    refused = await ask(h, key, w, 1, {"destructiveHint": True})
    assert refused.status_code == 403, refused.text
    assert "destroys data" in refused.json()["error"]["message"]
    assert (await ask(h, key, w, 2, {"destructiveHint": False})).status_code == 200  # the tool's own rule
    assert (await ask(h, key, w, 3, None)).status_code == 200  # no annotations: no block is met
    asked = await ask(h, key, w, 4, {"idempotentHint": False}, path="/etc/hosts")
    assert asked.status_code == 201 and asked.json()["status"] == "pending"
    assert (await ask(h, key, w, 5, {"idempotentHint": True}, path="/etc/hosts")).status_code == 200
    # A server calling its tool read-only does not let a danger tool through.
    r = await ask(h, key, "mcp__fs__read_file", 6, {"readOnlyHint": True, "destructiveHint": False})
    assert r.status_code == 201


@pytest.mark.parametrize(
    ("hints", "field"),
    [
        ({"destructiveHint": "yes"}, "toolAnnotations.destructiveHint"),
        ({"dangerous": True}, "toolAnnotations.dangerous"),
    ],
)
async def test_annotations_of_the_wrong_shape_are_refused(world: Any, hints: Any, field: str) -> None:
    h, key = world
    r = await ask(h, key, "mcp__fs__write_file", 7, hints)
    assert r.status_code == 400 and r.json()["error"]["field"] == field


T = '[tools.t]\nkind = "danger"\n[[tools.t.when]]\n'
DESTROYS = "annotations = { destructiveHint = true }\n"


def test_policy_check_refuses_an_allow_by_annotations() -> None:
    with pytest.raises(PolicyError, match='never "allow"'):
        load_policy(T + 'annotations = { readOnlyHint = true }\nthen = "allow"\n')
    with pytest.raises(PolicyError, match='never "allow"'):
        load_policy(
            '[tools.t]\nkind = "danger"\n[[tools.t.when]]\nannotations = { readOnlyHint = true }\n'
            'match = { path = { prefix = "/tmp/" } }\nthen = "allow"\n'
        )
    with pytest.raises(PolicyError, match="is not an MCP annotation"):
        load_policy('[tools.t]\n[[tools.t.when]]\nannotations = { readonly = true }\nthen = "ask"\n')


def test_a_block_on_annotations_shadows_only_blocks_that_read_them_too() -> None:
    # when[0] stops only calls whose tool says destructiveHint = true: when[1] still decides others.
    load_policy(
        T + DESTROYS + 'then = "deny"\n'
        '[[tools.t.when]]\nmatch = { path = { prefix = "/tmp/" } }\nthen = "allow"\n'
    )
    with pytest.raises(PolicyError, match="can never match"):
        load_policy(
            T + DESTROYS + 'then = "deny"\n'
            "[[tools.t.when]]\n" + DESTROYS + 'match = { path = { prefix = "/tmp/" } }\n'
            'then = "ask"\n'
        )


def test_the_gateway_sends_the_listed_tools_boolean_annotations() -> None:
    from mcp.types import Tool, ToolAnnotations

    from cosigner import DashboardSurface
    from cosigner._http import approval_body
    from cosigner.mcp_gateway.gateway import hints_of

    tool = Tool(
        name="write_file",
        input_schema={"type": "object"},
        annotations=ToolAnnotations(title="Write", read_only_hint=False, destructive_hint=True),
    )
    hints = hints_of(tool)
    assert hints == {"readOnlyHint": False, "destructiveHint": True}
    assert hints_of(Tool(name="x", input_schema={"type": "object"})) == {}
    body = approval_body(
        execution_id="r",
        tool_call_id="c",
        tool_name="write_file",
        parameters={},
        surface=DashboardSurface(user_id="u_1"),
        reason=None,
        timeout_seconds=None,
        callback_url=None,
        tool_annotations=hints,
    )
    assert b'"toolAnnotations":{"readOnlyHint":false,"destructiveHint":true}' in body
