"""Claude Code's `http` PreToolUse hook as `POST /v1/hooks/claude-code` takes and answers it.

The body is the hook's JSON as the agent sends it (snake_case, its own names); the answer is
the hook output the agent reads. Both are published in /openapi.json (the server imports
them as `contracts.hooks`). The body is read by `cosigner.hooks.event.read_tool_use`, the
reader `cosigner-hook` uses, so the command and the route refuse the same inputs with the
same words. The command itself never imports this module.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cosigner.hooks.verdict import Permission, Verdict

__all__ = ["HookAnswer", "HookSpecificOutput", "PreToolUseInput", "answer_of"]


class PreToolUseInput(BaseModel):
    """The PreToolUse hook's input; fields the agent adds beside these are ignored."""

    model_config = ConfigDict(extra="allow")

    session_id: str = Field(description="The agent's session: the approval's executionId.")
    tool_use_id: str = Field(description="The tool use: the approval's toolCallId.")
    hook_event_name: Literal["PreToolUse"]
    tool_name: str = Field(description="Bash, Edit, Write, mcp__server__tool, …: the approval's toolName.")
    tool_input: dict[str, Any] = Field(description="The tool's arguments: the approval's parameters.")
    cwd: str = Field(description="The session's working directory, shown on the card.")
    transcript_path: str | None = None
    permission_mode: str | None = None


class HookSpecificOutput(BaseModel):
    """The decision: `allow` only when an approver (or the policy) approved the call."""

    hookEventName: Literal["PreToolUse"] = "PreToolUse"
    permissionDecision: Permission
    permissionDecisionReason: str = Field(
        description="allow: who approved; deny: why (the approver's comment, or the error that "
        "kept Cosigner from asking), which the agent shows the model."
    )


class HookAnswer(BaseModel):
    """The hook's output. Every error is answered as a deny with status 200, never as an
    error status: an agent reads a failed hook as "go ahead" unless told to block."""

    hookSpecificOutput: HookSpecificOutput


def answer_of(verdict: Verdict) -> HookAnswer:
    """The wire answer for a verdict."""
    return HookAnswer(
        hookSpecificOutput=HookSpecificOutput(
            permissionDecision=verdict.permission, permissionDecisionReason=verdict.reason
        )
    )
