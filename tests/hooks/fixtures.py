"""PreToolUse hook inputs in the shapes Claude Code and Codex send (their hooks references).

Claude Code: `session_id`, `transcript_path`, `cwd`, `permission_mode`, `hook_event_name`,
`tool_name`, `tool_input` (Bash: `command`, `description`, `timeout`, `run_in_background`;
Edit: `file_path`, `old_string`, `new_string`, `replace_all`; MCP tools `mcp__server__tool`),
`tool_use_id`. Codex: the same names, with `transcript_path` nullable and `model` (and in
newer versions `turn_id`) added; its Bash input is `{"command": "…"}`.
"""

from __future__ import annotations

import copy
from typing import Any

PROJECT = "/home/alice/src/shop"

CLAUDE_BASH: dict[str, Any] = {
    "session_id": "3f2b8c1e-5d4a-4c7e-9a21-0b6d7e8f9a10",
    "transcript_path": "/home/alice/.claude/projects/-home-alice-src-shop/3f2b8c1e.jsonl",
    "cwd": PROJECT,
    "permission_mode": "default",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {
        "command": "git status --short",
        "description": "Show working tree status",
        "timeout": 120000,
    },
    "tool_use_id": "toolu_01ABC123DEF456",
}

CLAUDE_EDIT: dict[str, Any] = {
    **CLAUDE_BASH,
    "tool_name": "Edit",
    "tool_input": {
        "file_path": f"{PROJECT}/src/cart.py",
        "old_string": "total = price * qty",
        "new_string": "total = round(price * qty, 2)",
        "replace_all": False,
    },
    "tool_use_id": "toolu_01EDIT0000000001",
}

CLAUDE_MCP: dict[str, Any] = {
    **CLAUDE_BASH,
    "tool_name": "mcp__github__create_issue",
    "tool_input": {"owner": "acme", "repo": "shop", "title": "Flaky checkout test"},
    "tool_use_id": "toolu_01MCP00000000001",
}

CODEX_BASH: dict[str, Any] = {
    "session_id": "019a7c3e-2f1d-7b40-9c55-6e8d1a2b3c4d",
    "transcript_path": None,
    "cwd": PROJECT,
    "hook_event_name": "PreToolUse",
    "model": "gpt-5.2-codex",
    "permission_mode": "default",
    "turn_id": "019a7c3e-2f1d-7b40-9c55-6e8d1a2b3c4e",
    "tool_name": "Bash",
    "tool_input": {"command": "git status --short"},
    "tool_use_id": "call_Xk2Pq9LmN3vR",
}


def event(
    base: dict[str, Any], *, command: str | None = None, call: str | None = None, **fields: Any
) -> dict[str, Any]:
    """A copy of `base` with another Bash command, tool use id or fields."""
    out = copy.deepcopy(base)
    if command is not None:
        out["tool_input"]["command"] = command
    if call is not None:
        out["tool_use_id"] = call
    out.update(fields)
    return out
