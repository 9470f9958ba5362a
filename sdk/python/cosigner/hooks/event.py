"""The PreToolUse hook's JSON as Claude Code and Codex send it, read strictly.

Both agents send one JSON object (on stdin to a command hook, as the body of Claude Code's
`http` hook) with `session_id`, `transcript_path`, `cwd`, `permission_mode`,
`hook_event_name`, `tool_name`, `tool_input` and `tool_use_id`; Codex adds `model` and
`turn_id`. Anything else the agents add is ignored; what Cosigner needs is checked here,
and a problem names the field (`BadHookInput.field`), so the hook can deny saying so.
Standard library only: the command reads its input before it loads the client.
"""

from __future__ import annotations

import re
from enum import StrEnum

from cosigner import strict_json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without loading typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["MAX_INPUT", "Agent", "BadHookInput", "ToolUse", "read_tool_use"]

MAX_INPUT = 1024 * 1024
"""Bytes of hook JSON read at most (the server's body limit); more is refused, not cut."""

EVENT = "PreToolUse"
_IDENTIFIER = re.compile(r"[A-Za-z0-9_.:\-]{1,200}")  # executionId / toolCallId on the wire
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")  # toolName on the wire


class Agent(StrEnum):
    """The coding agents whose PreToolUse hook Cosigner answers."""

    CLAUDE_CODE = "claude-code"
    CODEX = "codex"

    @property
    def label(self) -> str:
        """The agent's name as a person reads it."""
        return "Claude Code" if self is Agent.CLAUDE_CODE else "Codex"


class BadHookInput(ValueError):
    """Hook JSON that is not what the agent sends; `field` names the part that is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class ToolUse:
    """One tool call the agent is about to make, as its hook described it."""

    # A plain class: `dataclasses` (with `inspect`) would be most of the hook's start.
    __slots__ = ("agent", "cwd", "permission_mode", "session_id", "tool_input", "tool_name", "tool_use_id")

    def __init__(
        self,
        agent: Agent,
        session_id: str,
        tool_use_id: str,
        tool_name: str,
        tool_input: dict[str, Any],
        cwd: str,
        permission_mode: str | None = None,
    ) -> None:
        self.agent = agent
        self.session_id = session_id
        self.tool_use_id = tool_use_id
        self.tool_name = tool_name
        self.tool_input = tool_input
        self.cwd = cwd
        self.permission_mode = permission_mode

    def reason(self) -> str:
        """What the card shows as the agent's own account of the call: who, where."""
        cwd = self.cwd if len(self.cwd) <= 1000 else self.cwd[:1000] + "…"
        mode = f"; permission mode {self.permission_mode}" if self.permission_mode else ""
        return f"{self.agent.label} wants to use {self.tool_name} in {cwd} (session {self.session_id}{mode})"


def read_tool_use(raw: bytes, agent: Agent) -> ToolUse:
    """The tool call in a PreToolUse hook's JSON, or BadHookInput naming what is wrong."""
    if len(raw) > MAX_INPUT:
        raise BadHookInput(
            "tool_input", f"the hook's JSON is over {MAX_INPUT} bytes; Cosigner refuses it whole"
        )
    reading = strict_json.read(raw)
    if reading.error is not None:
        raise BadHookInput("body", f"the hook's input is not JSON ({type(reading.error).__name__})")
    if reading.ambiguous:
        raise BadHookInput("body", reading.problems[0])
    event = reading.value
    if not isinstance(event, dict):
        raise BadHookInput("body", "the hook's input must be a JSON object")
    name = _string(event, "hook_event_name")
    if name != EVENT:
        raise BadHookInput(
            "hook_event_name", f"is {name[:40]!r}, not {EVENT!r}: register the hook under PreToolUse"
        )
    session_id = _identifier(event, "session_id")
    tool_use_id = _identifier(event, "tool_use_id")
    tool_name = _string(event, "tool_name")
    if not _TOOL_NAME.fullmatch(tool_name):
        raise BadHookInput("tool_name", "must be 1 to 128 letters, digits, _ . or -")
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict):
        raise BadHookInput("tool_input", _missing_or("a JSON object", tool_input, "tool_input" in event))
    cwd = _string(event, "cwd")
    if "\x00" in cwd:
        raise BadHookInput("cwd", "holds a NUL character")
    mode = event.get("permission_mode")
    if mode is not None and not isinstance(mode, str):
        raise BadHookInput("permission_mode", "must be a string")
    return ToolUse(agent, session_id, tool_use_id, tool_name, tool_input, cwd, mode or None)


def _string(event: dict[str, Any], field: str) -> str:
    value = event.get(field)
    if not isinstance(value, str) or not value:
        raise BadHookInput(field, _missing_or("a non-empty string", value, field in event))
    return value


def _identifier(event: dict[str, Any], field: str) -> str:
    value = _string(event, field)
    if not _IDENTIFIER.fullmatch(value):
        raise BadHookInput(field, "must be 1 to 200 letters, digits, _ . : or -")
    return value


def _missing_or(expected: str, value: object, present: bool) -> str:
    if not present:
        return f"missing; the agent sends it as {expected}"
    return f"must be {expected}, not {type(value).__name__ if value is not None else 'null'}"
