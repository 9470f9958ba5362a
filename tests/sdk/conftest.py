"""Servers the SDK is tested against: the harness app over loopback, and a real `cosigner serve`.

Both run the harness's DEFAULT_POLICY with tenants `acme` (headless runs routed to its
admins) and `globex` (no headless route). `Target.expire(id)` makes a pending approval
expire: in-process by moving the engine's clock past its deadline and running the expiry
sweep; against `cosigner serve` (whose clock cannot be moved) approvals made for expiry
use a one-second timeout and the SDK waits through it.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from cosigner import Cosigner, DashboardSurface
from tests.harness import DEFAULT_POLICY, TEST_SECRET
from tests.loopback import LiveServer, loopback_server
from tests.processes import cosigner_env, create_tenant, free_port, serving, tenant_keys

USER = "u_1"
SURFACE = DashboardSurface(user_id=USER)


@dataclass
class Target:
    """A running Cosigner and the keys of its two tenants."""

    url: str
    acme: str
    globex: str
    acme_approver: str
    live: LiveServer | None = None

    @property
    def expiry_timeout(self) -> int:
        """`timeout_seconds` for an approval a test will expire."""
        return 300 if self.live else 1

    def expire(self, approval_id: str) -> None:
        """Make the pending approval expire (see the module docstring)."""
        if self.live is None:
            return
        engine = self.live.harness.engine
        real = engine.clock
        engine.clock = lambda: real() + 3600
        try:
            self.live.call(engine.closer.expire_due())
        finally:
            engine.clock = real

    def client(self, key: str | None = None, **options: Any) -> Cosigner:
        """A blocking SDK client for `acme` (or the given key)."""
        return Cosigner(url=self.url, api_key=key or self.acme, **options)

    def approver(self, **options: Any) -> Cosigner:
        """A blocking SDK client with `acme`'s approver key: the tenant's app deciding."""
        return Cosigner(url=self.url, api_key=self.acme_approver, **options)


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    """The harness app behind uvicorn on loopback, shared by a module's tests."""
    # Callbacks may reach the tests' loopback receivers.
    with loopback_server(DEFAULT_POLICY, callback_allow="127.0.0.0/8") as server:
        yield server


@pytest.fixture(scope="module")
def inprocess(live: LiveServer) -> Target:
    """The in-process target."""
    acme = live.call(live.harness.create_tenant("acme"))
    globex = live.call(live.harness.create_tenant("globex"))
    return Target(live.url, acme, globex, live.harness.approver_key("acme"), live)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A real `cosigner serve` subprocess on a fresh SQLite file."""
    tmp: Path = tmp_path_factory.mktemp("serve")
    env = cosigner_env(tmp, DEFAULT_POLICY, TEST_SECRET)
    (acme, acme_approver), globex = tenant_keys(env, tmp, "acme"), create_tenant(env, tmp, "globex")
    port = free_port()
    with serving(env, tmp, port):
        yield Target(f"http://127.0.0.1:{port}", acme, globex, acme_approver)


@pytest.fixture(params=["inprocess", "serve"])
def target(request: pytest.FixtureRequest) -> Target:
    """Each outcome test runs against both servers."""
    name = "inprocess" if request.param == "inprocess" else "served"
    return request.getfixturevalue(name)  # type: ignore[no-any-return]


@pytest.fixture
def run_id() -> str:
    """A fresh execution id."""
    return f"run_{uuid.uuid4().hex[:12]}"


class Polling(httpx.HTTPTransport):
    """A transport that sets `polling` once a long-poll (`?wait=`) has been sent."""

    def __init__(self) -> None:
        super().__init__()
        self.polling = threading.Event()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if "wait" in request.url.params:
            self.polling.set()
        return super().handle_request(request)


class AsyncPolling(httpx.AsyncBaseTransport):
    """An in-process (ASGI) transport that sets `polling` once a long-poll has been sent."""

    def __init__(self, app: Any) -> None:
        self.inner = httpx.ASGITransport(app=app)
        self.polling = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if "wait" in request.url.params:
            self.polling.set()
        return await self.inner.handle_async_request(request)


def results_of(audit: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `result` events' data of an audit trail."""
    return [e["data"] for e in audit if e["event"] == "result"]


@pytest.fixture
def inprocess_client(inprocess: Target) -> Iterator[Cosigner]:
    """A blocking client of the in-process server, as tenant `acme`."""
    with inprocess.client() as client:
        yield client
