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
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx
from sqlalchemy.engine import make_url

from tests.harness import postgres_url, until

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


async def cosigner_async(env: dict[str, str], *args: str, cwd: Path) -> tuple[int, str, str]:
    """Run one `cosigner` command while this event loop goes on serving (an emulator, say):
    its exit status, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        *args,
        env=env,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _postgres_admin(sql: str) -> None:
    import asyncpg

    base = postgres_url()
    assert base, "set COSIGNER_TEST_POSTGRES_URL"
    conn = await asyncpg.connect(make_url(base).set(drivername="postgresql").render_as_string(False))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@asynccontextmanager
async def fresh_database(kind: str, folder: Path) -> AsyncIterator[str]:
    """The URL of a new, empty database a `cosigner` process can be pointed at: a SQLite file
    (not yet created) in `folder`, or a PostgreSQL database created next to the one
    COSIGNER_TEST_POSTGRES_URL names and dropped afterwards (so its user needs CREATEDB)."""
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{folder / f'db-{secrets.token_hex(4)}.db'}"
        return
    name = f"cosigner_ops_{secrets.token_hex(6)}"
    await _postgres_admin(f'CREATE DATABASE "{name}"')
    try:
        base = postgres_url() or ""
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        # WITH (FORCE) ends the connections a killed server may have left.
        await _postgres_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
