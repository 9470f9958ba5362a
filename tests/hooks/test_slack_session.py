"""A coding session through the command hook, asked in Slack (the emulator): a read passes at
once, a `git push` waits until an admin presses Approve on the card, and the hook then allows
it naming the approver. Cosigner is served over real loopback HTTP; the hook is a subprocess."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from tests.harness import Harness, press, slack_app, until
from tests.hooks.fixtures import CLAUDE_BASH, PROJECT, event
from tests.hooks.running import EXAMPLE_POLICY, command, decision_of, hook_env
from tests.processes import PROCESS_LIMIT, free_port

SECRET = "hook-session-signing-secret"
APP_ID = "A0HOOKS"
POLICY = (
    EXAMPLE_POLICY
    + """
[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ADMIN"] }
admin_channel = "C0ADMINS"
"""
)


@asynccontextmanager
async def served(h: Harness) -> AsyncIterator[str]:
    """The harness app behind uvicorn on a free loopback port, in this event loop."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(h.app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    await until(lambda: server.started or serving.done())
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving


async def hook(env: dict[str, str], body: dict[str, Any]) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        *command("claude-code"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(body).encode())
    proc.stdin.close()
    return proc


async def answer(proc: asyncio.subprocess.Process) -> tuple[str, str]:
    out, err = await asyncio.wait_for(proc.communicate(), PROCESS_LIMIT)
    assert proc.returncode == 0, err
    return decision_of(out)


@pytest.mark.slow  # five hook processes, each loading the SDK
async def test_reads_pass_at_once_and_a_push_waits_for_approve_in_slack(tmp_path: Path) -> None:
    async with slack_app(POLICY, secret=SECRET, app_id=APP_ID) as (h, emu), served(h) as url:
        key = await h.create_tenant("acme")
        env = hook_env(tmp_path, url, key, "slack:T0ACME/C0DEV/U0DEV")

        for n, read in enumerate(("git status --short", "ls -la src", "cat README.md")):
            decision, _ = await answer(
                await hook(env, event(CLAUDE_BASH, command=read, call=f"toolu_read{n}"))
            )
            assert decision == "allow", read
        assert not [m for m in emu.messages if m.method == "chat.postMessage"]  # nobody was asked

        push = await hook(env, event(CLAUDE_BASH, command="git push origin main", call="toolu_push"))
        (card,) = await until(lambda: [m for m in emu.messages if m.method == "chat.postMessage"])
        assert card.channel == "C0ADMINS"
        text = json.dumps(card.blocks)
        assert "git push origin main" in text and PROJECT in text  # the command and where it runs
        assert push.returncode is None  # still waiting for the person
        pressed = await press(h.client, card, secret=SECRET, app_id=APP_ID, user="U0ADMIN", team="T0ACME")
        assert pressed.status_code == 200, pressed.text
        decision, reason = await answer(push)
        assert decision == "allow" and "U0ADMIN" in reason
