"""The hook's input is read strictly and every problem names its field; only approved allows."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contracts.hooks import PreToolUseInput
from cosigner.hooks.event import MAX_INPUT, Agent, BadHookInput, read_tool_use
from cosigner.hooks.verdict import Permission, verdict_of
from tests.hooks.fixtures import CLAUDE_BASH, CLAUDE_EDIT, CLAUDE_MCP, CODEX_BASH, PROJECT


@pytest.mark.parametrize(
    ("agent", "event"),
    [(Agent.CLAUDE_CODE, e) for e in (CLAUDE_BASH, CLAUDE_EDIT, CLAUDE_MCP)] + [(Agent.CODEX, CODEX_BASH)],
)
def test_both_agents_inputs_are_read(agent: Agent, event: dict[str, Any]) -> None:
    use = read_tool_use(json.dumps(event).encode(), agent)
    assert (use.session_id, use.tool_use_id, use.tool_name) == (
        event["session_id"],
        event["tool_use_id"],
        event["tool_name"],
    )
    assert use.tool_input == event["tool_input"] and use.cwd == PROJECT
    assert PROJECT in use.reason() and agent.label in use.reason()
    PreToolUseInput.model_validate(event)  # the published model takes what the agents send


def refusal(raw: bytes) -> BadHookInput:
    with pytest.raises(BadHookInput) as caught:
        read_tool_use(raw, Agent.CLAUDE_CODE)
    return caught.value


def without(field: str) -> bytes:
    return json.dumps({k: v for k, v in CLAUDE_BASH.items() if k != field}).encode()


@pytest.mark.parametrize(
    "field", ["session_id", "tool_use_id", "tool_name", "tool_input", "cwd", "hook_event_name"]
)
def test_a_missing_field_is_named(field: str) -> None:
    problem = refusal(without(field))
    assert problem.field == field and "missing" in problem.message


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"hook_event_name": "PostToolUse"}, "hook_event_name"),
        ({"hook_event_name": "PermissionRequest"}, "hook_event_name"),
        ({"tool_input": "git push"}, "tool_input"),
        ({"tool_input": None}, "tool_input"),
        ({"session_id": 42}, "session_id"),
        ({"session_id": "a b"}, "session_id"),
        ({"tool_use_id": ""}, "tool_use_id"),
        ({"tool_name": "Bash; rm"}, "tool_name"),
        ({"cwd": "/tmp\x00x"}, "cwd"),
        ({"permission_mode": 3}, "permission_mode"),
    ],
)
def test_a_wrong_field_is_named(change: dict[str, Any], field: str) -> None:
    assert refusal(json.dumps({**CLAUDE_BASH, **change}).encode()).field == field


@pytest.mark.parametrize(
    "raw",
    [b"", b"{not json", b"[1, 2]", b'"PreToolUse"', b'{"session_id": "a", "session_id": "b"}', b'{"a": NaN}'],
)
def test_text_that_is_not_one_plain_json_object_is_refused(raw: bytes) -> None:
    assert refusal(raw).field == "body"


def test_input_over_the_limit_is_refused_whole() -> None:
    big = {**CLAUDE_BASH, "tool_input": {"command": "x" * MAX_INPUT}}
    assert refusal(json.dumps(big).encode()).field == "tool_input"


def test_only_an_approval_allows() -> None:
    approved = verdict_of(status="approved", decider="person", user_id="U0ALICE", surface="slack")
    assert approved.permission is Permission.ALLOW and "U0ALICE" in approved.reason
    policy = verdict_of(status="approved", decider="policy", rule="tools.Bash.when[1]")
    assert policy.permission is Permission.ALLOW and "tools.Bash.when[1]" in policy.reason
    for status in ("denied", "expired", "cancelled", "pending", "approved_later", ""):
        got = verdict_of(status=status, decider="person", user_id="U0ALICE", comment="use the staging remote")
        assert got.permission is Permission.DENY, status
    denied = verdict_of(status="denied", decider="person", user_id="U0BOB", comment="use the staging remote")
    assert "use the staging remote" in denied.reason and "U0BOB" in denied.reason
    out = json.loads(denied.to_bytes())
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": denied.reason,
        }
    }
