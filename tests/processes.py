"""Run the real `cosigner` command as subprocesses: a server on a port, CLI commands, an env.

env = cosigner_env(tmp_path, POLICY, SECRET)
key = create_tenant(env, tmp_path, "acme")
with serving(env, tmp_path, port) as proc:
    httpx.get(f"http://127.0.0.1:{port}/readyz")
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.harness import until


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cosigner_env(tmp_path: Path, policy: str, secret: str) -> dict[str, str]:
    """This environment without Cosigner/Slack/Twilio settings, plus a SQLite file, policy and secret."""
    (tmp_path / "policy.toml").write_text(policy)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSIGNER_", "SLACK_", "TWILIO_"))}
    env.update(
        COSIGNER_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'c.db'}",
        COSIGNER_SECRET=secret,
        COSIGNER_POLICY=str(tmp_path / "policy.toml"),
    )
    return env


def create_tenant(env: dict[str, str], cwd: Path, name: str) -> str:
    """`cosigner tenants create NAME`; returns the API key it prints once."""
    created = subprocess.run(
        [sys.executable, "-m", "bot.cli", "tenants", "create", name],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert created.returncode == 0, created.stderr
    return created.stdout.split("stored): ")[1].split()[0]


def ready(proc: subprocess.Popen[bytes], port: int) -> bool:
    """Whether the `serve` process on `port` answers `/readyz` (fails if it exited)."""
    assert proc.poll() is None, f"serve exited with status {proc.returncode} while starting"
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def serving(env: dict[str, str], cwd: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """`cosigner serve --port PORT`, ready (`/readyz` 200) on entry, killed on exit."""
    log = (cwd / f"serve-{time.monotonic_ns()}.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve", "--port", str(port)],
        env=env,
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        asyncio.run(until(lambda: ready(proc, port), seconds=20, interval=0.1))
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        log.close()
