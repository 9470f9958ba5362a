"""examples/executor.py against a running sandbox: grants and callbacks checked as documented."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import httpx

from bot.sandbox import Sandbox

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
