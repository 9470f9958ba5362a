"""The example application (examples/contract_app.py) served by uvicorn on loopback, and a policy naming it.

with contract_application() as app:
    async with cosigner_app(policy_for(app.url), callback_allow="127.0.0.1") as h: ...
    app.shop.calls["execute"]
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import uvicorn

from bot.approvals.grants import GrantSigner
from tests.harness import TEST_SECRET
from tests.processes import free_port

SECRET_ENV = "ORDERS_CONTRACT_SECRET"
SECRET = "orders-contract-secret-" + "s" * 24
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "contract_app.py"
OPERATION = "order.refund_missing_discount"


def example() -> ModuleType:
    """examples/contract_app.py as a module."""
    found = sys.modules.get("contract_app")
    if found is not None:
        return found
    spec = importlib.util.spec_from_file_location("contract_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["contract_app"] = module
    spec.loader.exec_module(module)
    return module


def policy_for(url: str, *, extra: str = "", execute_timeout: str = "30s", kind: str = "danger") -> str:
    """A policy with the refund operation at `url`, decided on the dashboard by its requester."""
    return f"""
[defaults]
timeout = "5m"

[operations."{OPERATION}"]
url = "{url}"
secret_env = "{SECRET_ENV}"
kind = "{kind}"
approvers = ["requester"]
execute_timeout = "{execute_timeout}"
{extra}
"""


@dataclass
class Application:
    """The running example application: its URL and its state."""

    url: str
    shop: Any


@contextmanager
def contract_application(
    secret: str = SECRET, server_secret: str = TEST_SECRET, clock: Callable[[], float] = time.time
) -> Iterator[Application]:
    """Serve a fresh example application on 127.0.0.1 in a thread of its own; it checks grants
    against the keys of a Cosigner run with `server_secret`, at the time `clock` tells."""
    module = example()
    keys = GrantSigner(server_secret).jwks()
    app = module.build(secret, lambda: keys, now=clock)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    ready = threading.Event()
    for _ in range(500):
        if server.started:
            ready.set()
            break
        threading.Event().wait(0.01)
    assert ready.is_set(), "the example application did not start"
    try:
        yield Application(url=f"http://127.0.0.1:{port}/cosigner", shop=app.state.shop)
    finally:
        server.should_exit = True
        if app.state.shop.hold_execute is not None:
            app.state.shop.hold_execute.set()
        thread.join(timeout=10)
