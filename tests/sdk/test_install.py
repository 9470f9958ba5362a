"""The SDK alone: a fresh virtualenv with only sdk/python installed, running the README's example.

The venv gets `pip install` of a clean copy of sdk/python (no `build/` left over from an
earlier build can slip into the wheel). What must not be importable there is the
import-linter floor of the SDK in pyproject.toml: the server's packages and libraries.
The example is taken from sdk/python/README.md itself, so the document cannot drift, and
runs against a real `cosigner dev` (what `./run dev` starts) where a person approves it by
clicking the card in the sandbox's emulated Slack.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import until_async
from tests.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "python"
COSIGNER = Path(sys.executable).parent / "cosigner"  # this checkout's .venv, as ./run dev uses


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without Python path or Cosigner settings, plus `extra`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("COSIGNER_", "SLACK_", "TWILIO_", "PYTHON", "VIRTUAL_ENV"))
    }
    return env | extra


def server_modules() -> list[str]:
    """What the SDK may not import: the floor `the agent SDK imports nothing of the server`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = project["tool"]["importlinter"]["contracts"]
    (floor,) = [c for c in contracts if c.get("source_modules") == ["cosigner"]]
    return list(floor["forbidden_modules"])


def readme_example() -> str:
    """The Python block under the SDK README's `## Five lines` heading."""
    text = (SDK / "README.md").read_text()
    found = re.search(r"^## Five lines\n.*?^```python\n(.*?)^```", text, re.M | re.S)
    assert found, "sdk/python/README.md has no ```python block under ## Five lines"
    return found.group(1)


@pytest.fixture(scope="module")
def sdk_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv holding only the SDK and its dependencies."""
    tmp = tmp_path_factory.mktemp("sdk-alone")
    source = tmp / "sdk-python"
    shutil.copytree(SDK, source, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True, env=clean_env())
    python = tmp / "venv" / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet", str(source)]
    installed = subprocess.run(pip, capture_output=True, text=True, env=clean_env(), cwd=tmp)
    assert installed.returncode == 0, installed.stderr
    return python


PROBE = """
import importlib.metadata, importlib.util, json, sys
import cosigner
from cosigner import Cosigner, AsyncCosigner, Decision
from cosigner import SlackSurface, SmsSurface, DashboardSurface, HeadlessSurface
from cosigner.errors import (CosignerError, PermissionDenied, ApprovalModeUnsupported,
    ToolCallCapExceeded, ParametersMismatch, Unauthenticated, ApprovalDenied, ApprovalExpired)
dist = importlib.metadata.distribution("cosigner-sdk")
print(json.dumps({
    "importable": [m for m in sys.argv[1:] if importlib.util.find_spec(m) is not None],
    "cosigner": cosigner.__file__,
    "top_level": sorted({
        f.parts[0] for f in dist.files if f.parts[0] != ".." and not f.parts[0].endswith(".dist-info")
    }),
    "scripts": sorted(f.name for f in dist.files if f.parts[0] == ".."),
    "loaded": sorted({m.split(".")[0] for m in sys.modules}),
}))
"""


@pytest.mark.slow
def test_only_the_cosigner_package_is_installed_and_nothing_of_the_server(sdk_python: Path) -> None:
    forbidden = server_modules()
    probe = subprocess.run(
        [str(sdk_python), "-I", "-c", PROBE, *forbidden],
        capture_output=True,
        text=True,
        env=clean_env(),
        cwd=sdk_python.parent,
    )
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert {"bot", "contracts", "storage", "surfaces", "sqlalchemy", "slack_sdk", "twilio"} <= set(forbidden)
    assert found["importable"] == [], f"the SDK's venv can import {found['importable']}"
    assert Path(found["cosigner"]).is_relative_to(sdk_python.parent.parent), found["cosigner"]
    assert found["top_level"] == ["cosigner"]
    # Outside site-packages only the SDK's two console scripts: the coding agents' hook and
    # the MCP gateway.
    assert found["scripts"] == ["cosigner-hook", "cosigner-mcp-gateway"], found["scripts"]
    assert not set(found["loaded"]) & set(forbidden)


@pytest.fixture
async def dev(tmp_path: Path) -> AsyncIterator[tuple[str, str]]:
    """`cosigner dev --port P --data DIR` as a subprocess: (its URL, the demo tenant's key)."""
    port, data = free_port(), tmp_path / "cosigner-data"
    url = f"http://127.0.0.1:{port}"
    with (tmp_path / "dev.log").open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            str(COSIGNER),
            "dev",
            "--port",
            str(port),
            "--data",
            str(data),
            cwd=tmp_path,
            env=clean_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            async with httpx.AsyncClient(base_url=url, timeout=5) as http:

                async def ready() -> bool:
                    assert proc.returncode is None, (tmp_path / "dev.log").read_text()
                    try:
                        return (await http.get("/readyz")).status_code == 200
                    except httpx.TransportError:
                        return False

                await until_async(ready, seconds=60, interval=0.1)
            yield url, (data / "demo.key").read_text().strip()
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


@pytest.mark.slow
async def test_the_readme_example_runs_alone_against_cosigner_dev(
    sdk_python: Path, dev: tuple[str, str], tmp_path: Path
) -> None:
    url, key = dev
    example = tmp_path / "example.py"
    example.write_text(readme_example())
    agent = await asyncio.create_subprocess_exec(
        str(sdk_python),
        "-I",
        str(example),
        env=clean_env(COSIGNER_URL=url, COSIGNER_API_KEY=key),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:

            async def card() -> dict[str, Any] | None:
                assert agent.returncode is None, "the example ended before anyone decided"
                messages = (await http.get("/sandbox/api/state")).json()["messages"]
                return next((m for m in messages if m["blocks"][0]["text"]["text"] == "issue_refund"), None)

            shown = await until_async(card, seconds=30, interval=0.05)
            assert "ord_4421" in json.dumps(shown["blocks"])
            click = {
                "channel": shown["channel"],
                "ts": shown["ts"],
                "actionId": "cosigner.approve",
                "as": "requester",
            }
            assert (await http.post("/sandbox/api/click", json=click)).json() == {"status": 200}
        out, _ = await asyncio.wait_for(agent.communicate(), 60)
    finally:
        if agent.returncode is None:
            agent.kill()
            await agent.wait()
    printed = out.decode().strip()
    assert agent.returncode == 0, printed
    assert printed.startswith("True approved None DecidedBy(kind=<DeciderKind.PERSON: 'person'>"), printed
    assert "user_id='U0ALICE'" in printed and "team_id='T0DEMO'" in printed, printed
