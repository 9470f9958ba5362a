"""A handoff's world for tests: the example expect app served over loopback HTTP, and a policy.

async with expect_server(clock) as (shop, url):
    async with cosigner_app(handoff_policy(url), clock=clock, callback_allow=LOOPBACK) as h: ...
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn

from tests.harness import ManualClock, until
from tests.processes import free_port

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "expect_app.py"
SECRET_ENV = "APP_EXPECT_SECRET"
EXPECT_SECRET = "expect-secret-" + "y" * 24
LOOPBACK = "127.0.0.0/8"
PARAMETERS = {"changeId": "chg_1", "ownerPin": "482910"}


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("expect_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ExpectApp: Any = _example().ExpectApp


def handoff_policy(url: str, tenant: str = "", extra: str = "") -> str:
    """A policy with `publish_changes` handed off, an ordinary `issue_refund`, and `tenant`'s section."""
    return f"""
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"

[tools.publish_changes]
kind = "danger"
redact = ["ownerPin"]
[tools.publish_changes.handoff]
reason = "Publishing needs the verification code sent to the owner's phone"
steps = ["Open Settings → Publishing", "Enter the verification code", "Press Publish"]
expect = {{ url = "{url}", secret_env = "{SECRET_ENV}" }}

{tenant}
{extra}
"""


@asynccontextmanager
async def expect_server(clock: ManualClock, secret: str = EXPECT_SECRET) -> AsyncIterator[tuple[Any, str]]:
    """The example expect app under uvicorn on 127.0.0.1: (app, its URL)."""
    app = ExpectApp(secret, now=clock)
    async with served(app) as url:
        yield app, url


@asynccontextmanager
async def served(app: Any) -> AsyncIterator[str]:
    """Any ASGI app under uvicorn on 127.0.0.1; yields the expect URL on it."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    await until(lambda: server.started or serving.done())
    try:
        yield f"http://127.0.0.1:{port}/cosigner/expect/publish"
    finally:
        server.should_exit = True
        await serving


def handoff_request(surface: dict[str, Any], call: str = "call_1", **extra: Any) -> dict[str, Any]:
    """A `POST /v1/approvals` body for `publish_changes`."""
    return {
        "executionId": "run_1",
        "toolCallId": call,
        "toolName": "publish_changes",
        "parameters": dict(PARAMETERS),
        "reason": "The user asked to publish",
        "surface": surface,
        **extra,
    }
