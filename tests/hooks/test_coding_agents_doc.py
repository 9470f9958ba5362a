"""The policy docs/coding-agents.md shows decides as the page says, through the http hook."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.harness import cosigner_app
from tests.hooks.fixtures import CLAUDE_BASH, CLAUDE_EDIT, CLAUDE_MCP, PROJECT, event
from tests.hooks.running import decision_of
from tests.processes import REPO

PAGE = (REPO / "docs" / "coding-agents.md").read_text()
POLICY = re.search(r"## The policy.*?```toml\n(.*?)```", PAGE, re.S).group(1)  # type: ignore[union-attr]

ASKED = "withdrawn"  # ?wait=0: a call a person must approve is withdrawn at once, unanswered


def edit(path: str, tool: str = "Edit") -> dict[str, Any]:
    return event(CLAUDE_EDIT, tool_name=tool, tool_input={**CLAUDE_EDIT["tool_input"], "file_path": path})


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (event(CLAUDE_BASH, command="git status"), "allow"),
        (event(CLAUDE_BASH, command="git push origin main"), ASKED),
        (event(CLAUDE_BASH, command="sudo rm -rf /"), "recursive rm"),
        (edit(f"{PROJECT}/src/cart.py"), "allow"),
        (edit(f"{PROJECT}/.github/workflows/ci.yml"), "allow"),
        (edit(f"{PROJECT}/../other/secrets.py"), ASKED),
        (edit(f"{PROJECT}/src/../../../.ssh/config"), ASKED),
        (edit("/etc/hosts"), ASKED),
        (edit(f"{PROJECT}-evil/x.py"), ASKED),
        (edit(f"{PROJECT}/notes.md", tool="Write"), "allow"),
        (edit("/home/alice/.bashrc", tool="Write"), ASKED),
        (event(CLAUDE_MCP, tool_name="mcp__github__get_issue"), "allow"),
        (CLAUDE_MCP, ASKED),
        (event(CLAUDE_MCP, tool_name="mcp__slack__post_message"), ASKED),  # not named: danger
    ],
)
async def test_the_pages_policy_decides_as_the_page_says(call: dict[str, Any], expected: str) -> None:
    async with cosigner_app(POLICY) as h:
        key = await h.create_tenant("acme")
        headers = {**h.auth(key), "Cosigner-Surface": "dashboard:u_alice"}
        r = await h.client.post("/v1/hooks/claude-code?wait=0", json=call, headers=headers)
        decision, reason = decision_of(r.content)
        if expected == "allow":
            assert decision == "allow", reason
        else:
            assert decision == "deny" and expected in reason, reason
