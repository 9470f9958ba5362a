"""examples/executor.py against a running sandbox: grants and callbacks checked as documented."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from pathlib import Path

import httpx

from bot.dev.sandbox import Sandbox, banner, sandbox

EXECUTOR = Path(__file__).resolve().parents[2] / "examples" / "executor.py"


async def test_the_example_executor_runs_only_what_was_granted(sb: Sandbox) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COSIGNER_")}
    env["COSIGNER_URL"] = sb.url
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXECUTOR),
        env=env,
        cwd=sb.key_file.parent.parent,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    text = out.decode()
    assert proc.returncode == 0, text
    async with httpx.AsyncClient() as client:
        keys = (await client.get(f"{sb.url}/v1/keys")).json()["keys"]
    (kid,) = [k["kid"] for k in keys]
    assert "GRANT OK for lookup_order (approval apv_" in text
    assert f"key {kid}): running it" in text, "the grant was checked against the published JWKS"
    assert "TAMPERED CALL REFUSED" in text and "parameters differ" in text
    assert "CALLBACK verified: lookup_order approved" in text
    assert "forged callback answered 401" in text


async def test_the_banner_export_line_points_the_examples_at_a_moved_sandbox(tmp_path: Path) -> None:
    # `cosigner dev --port N --data DIR`: the examples run from elsewhere with the line it prints.
    async with sandbox("127.0.0.1", 0, tmp_path / "moved") as moved:
        line = next(x.strip() for x in banner(moved, "127.0.0.1").splitlines() if "export " in x)
        words = shlex.split(line)
        assert words[0] == "export"
        exported = dict(word.split("=", 1) for word in words[1:])
        assert exported == {
            "COSIGNER_URL": moved.url,
            "COSIGNER_API_KEY": moved.api_key,
            "COSIGNER_DATA": str((tmp_path / "moved").resolve()),
        }
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("COSIGNER_")} | exported
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(EXECUTOR),
            env=env,
            cwd=elsewhere,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, out.decode()
        assert "CALLBACK verified: lookup_order approved" in out.decode()
