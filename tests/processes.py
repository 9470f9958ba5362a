"""Run the real `cosigner` command as subprocesses: a server on a port, CLI commands, an env.

env = cosigner_env(tmp_path, POLICY, SECRET)
key = create_tenant(env, tmp_path, "acme")
with serving(env, tmp_path, port) as proc:
    httpx.get(f"http://127.0.0.1:{port}/readyz")
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.harness import until

REPO = Path(__file__).resolve().parents[1]

PROCESS_LIMIT = 120.0
"""Seconds a `cosigner` process may take to start serving or to finish a command before the
test fails: a guard against a hang, never a speed check. Alone it takes about a second (most
of it Python importing Cosigner), but tens of seconds while the suite's parallel workers and
whatever else runs on the machine share its cores."""


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(tmp_path: Path, db: str = "cosigner.db", **extra: str) -> dict[str, str]:
    """This process's environment without Cosigner, Slack or Twilio settings, on a fresh
    SQLite file `db` in `tmp_path`, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSIGNER_", "SLACK_", "TWILIO_"))}
    env.update(COSIGNER_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / db}", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def cosigner_env(tmp_path: Path, policy: str, secret: str) -> dict[str, str]:
    """`clean_env` on `c.db`, with `policy` written to policy.toml and the server's secret."""
    (tmp_path / "policy.toml").write_text(policy)
    return clean_env(tmp_path, "c.db", COSIGNER_SECRET=secret, COSIGNER_POLICY=str(tmp_path / "policy.toml"))


def cosigner(
    env: dict[str, str], *args: str, cwd: Path, timeout: float = PROCESS_LIMIT
) -> subprocess.CompletedProcess[str]:
    """Run one `cosigner` command to completion, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def tenant_keys(env: dict[str, str], cwd: Path, name: str) -> tuple[str, str]:
    """`cosigner tenants create NAME`; returns the agent key and the approver key it prints once."""
    created = cosigner(env, "tenants", "create", name, cwd=cwd)
    assert created.returncode == 0, created.stderr
    keys = dict(re.findall(r"^(agent|approver) key \(.*\): (\S+)$", created.stdout, re.M))
    return keys["agent"], keys["approver"]


def create_tenant(env: dict[str, str], cwd: Path, name: str) -> str:
    """`cosigner tenants create NAME`; returns the agent key it prints once."""
    return tenant_keys(env, cwd, name)[0]


def ready(proc: subprocess.Popen[bytes], port: int) -> bool:
    """Whether the `serve` process on `port` answers `/readyz` (fails if it exited)."""
    assert proc.poll() is None, f"serve exited with status {proc.returncode} while starting"
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def serving(
    env: dict[str, str], cwd: Path, port: int, log: Path | None = None, *, terminate: bool = False
) -> Iterator[subprocess.Popen[bytes]]:
    """`cosigner serve --port PORT`, ready (`/readyz` 200) on entry, stopped on exit.

    Its stderr (the JSON log; `serve` writes nothing to stdout) goes to `log`, by default a
    fresh file in `cwd`; a server that does not come up fails the test with that log. On exit
    it is killed, or with `terminate` sent SIGTERM as an operator would and killed only if it
    has not stopped within ten seconds. A test that stopped it itself finds it gone.
    """
    path = log if log is not None else cwd / f"serve-{time.monotonic_ns()}.log"
    with path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--port", str(port)],
            env=env,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
        try:
            try:
                asyncio.run(until(lambda: ready(proc, port), seconds=PROCESS_LIMIT, interval=0.1))
            except AssertionError as exc:
                raise AssertionError(path.read_text()) from exc
            yield proc
        finally:
            if proc.poll() is None:
                if terminate:
                    proc.terminate()
                    try:
                        proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                else:
                    proc.kill()
            proc.wait(timeout=10)
