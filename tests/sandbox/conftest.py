"""A running sandbox (what `cosigner dev` starts) on a free port, and a client for its page."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.dev.sandbox import Sandbox, sandbox
from tests.harness import until as wait_for


def until(check: Callable[[], Any], seconds: float = 10.0) -> Any:
    """The first truthy value of `check()`, polled until `seconds` pass."""
    return wait_for(check, seconds, interval=0.05)


AGENT = Path(__file__).resolve().parents[2] / "examples" / "agent.py"


class AgentProcess:
    """The example agent as a subprocess, with its output collected line by line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            self.lines.append(raw.decode().rstrip("\n"))

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    async def finish(self, seconds: float = 20) -> int:
        code = await asyncio.wait_for(self.proc.wait(), seconds)
        await self.reader
        return code

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        await self.reader


async def start_agent(sb: Sandbox, *args: str, key: str | None = None) -> AgentProcess:
    """Run examples/agent.py against the sandbox, with the key from the env or the key file."""
    env = {k: v for k, v in os.environ.items() if k not in ("COSIGNER_API_KEY", "COSIGNER_URL")}
    env["COSIGNER_URL"] = sb.url
    if key is not None:
        env["COSIGNER_API_KEY"] = key
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(AGENT),
        *args,
        env=env,
        cwd=sb.key_file.parent.parent,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    return AgentProcess(proc)


@pytest.fixture
async def sb(tmp_path: Path) -> AsyncIterator[Sandbox]:
    """The sandbox on 127.0.0.1, any free port, with its data in a temporary folder."""
    async with sandbox("127.0.0.1", 0, tmp_path / "cosigner-data") as running:
        yield running


@pytest.fixture
async def http(sb: Sandbox) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the sandbox over real HTTP, authenticated as the demo tenant."""
    headers = {"Authorization": f"Bearer {sb.api_key}"}
    async with httpx.AsyncClient(base_url=sb.url, headers=headers, timeout=30) as client:
        yield client


@pytest.fixture
def wait_until() -> Callable[..., Any]:
    """`await wait_until(lambda: ...)`: poll a condition."""
    return until


@pytest.fixture
async def run_agent(sb: Sandbox) -> AsyncIterator[Callable[..., Any]]:
    """`await run_agent(*args, key=None)`: examples/agent.py against `sb`; killed at the end."""
    started: list[AgentProcess] = []

    async def run(*args: str, key: str | None = None) -> AgentProcess:
        agent = await start_agent(sb, *args, key=key)
        started.append(agent)
        return agent

    yield run
    for agent in started:
        await agent.kill()
