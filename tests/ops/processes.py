"""Real `cosigner` processes for the operator tests: a clean environment, one-shot commands
and a `cosigner serve` that is ready before the test talks to it."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.harness import until
from tests.processes import ready

REPO = Path(__file__).resolve().parents[2]


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment without Cosigner, Slack or Twilio settings, on a fresh SQLite file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSIGNER_", "SLACK_", "TWILIO_"))}
    env.update(COSIGNER_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'cosigner.db'}", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def cosigner(
    env: dict[str, str], *args: str, cwd: Path, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run one `cosigner` command to completion."""
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(env: dict[str, str], cwd: Path, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`cosigner serve --port PORT` with stderr in `log`, once /readyz answers; stopped on exit."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--port", str(port)],
            env=env,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
        try:
            try:
                asyncio.run(until(lambda: ready(proc, port), seconds=20, interval=0.1))
            except AssertionError as exc:
                raise AssertionError(log.read_text()) from exc
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
