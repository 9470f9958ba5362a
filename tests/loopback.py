"""Serve the in-process harness app over real loopback HTTP, for blocking clients.

with loopback_server(POLICY) as live:
    key = live.call(live.harness.create_tenant("acme"))
    httpx.get(f"{live.url}/healthz")

The app runs under uvicorn in its own thread and event loop; `call` runs a coroutine there
(the harness's engine and database belong to that loop). `restart()` stops uvicorn and
starts it again on the same port and database, optionally with another COSIGNER_SECRET.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import uvicorn

from storage.database import Database
from tests.harness import DEFAULT_POLICY, TEST_SECRET, Harness, cosigner_app, until
from tests.processes import free_port

T = TypeVar("T")


class LiveServer:
    """A harness app behind uvicorn on 127.0.0.1, started and stopped from a test thread."""

    def __init__(self, policy: str, db_path: Path, secret: str, **settings: Any) -> None:
        self.policy = policy
        self.settings = settings
        self.db_path = db_path
        self.secret = secret
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: uvicorn.Server | None = None
        self._harness: Harness | None = None

    @property
    def harness(self) -> Harness:
        """The running app's harness (engine, keys, parts)."""
        assert self._harness is not None, "server is not running"
        return self._harness

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the server's event loop and return its result."""
        assert self._loop is not None, "server is not running"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def start(self, secret: str | None = None) -> None:
        """Start serving (again) on the same port and database."""
        if secret is not None:
            self.secret = secret
        ready: Future[None] = Future()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main(ready)), daemon=True)
        self._thread.start()
        ready.result(timeout=30)

    def stop(self) -> None:
        """Stop uvicorn and the app; open connections are closed."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._thread = self._server = self._harness = self._loop = None

    def restart(self, secret: str | None = None) -> None:
        """Stop, then start on the same port and database."""
        self.stop()
        self.start(secret)

    async def _main(self, ready: Future[None]) -> None:
        try:
            db = Database(f"sqlite+aiosqlite:///{self.db_path}")
            await db.migrate()
            async with cosigner_app(self.policy, db=db, secret=self.secret, **self.settings) as harness:
                # A request still open at stop (an agent's long-poll left waiting) is cancelled
                # after a second (`cosigner serve` gives it 5), instead of holding the stop until
                # `join` gave up 30 s later with the old server still running.
                config = uvicorn.Config(
                    harness.app,
                    host="127.0.0.1",
                    port=self.port,
                    lifespan="off",
                    log_level="warning",
                    timeout_graceful_shutdown=1,
                )
                self._server = uvicorn.Server(config)
                self._harness, self._loop = harness, asyncio.get_running_loop()
                serving = asyncio.create_task(self._server.serve())
                server = self._server
                await until(lambda: server.started or serving.done(), seconds=20, interval=0.01)
                ready.set_result(None)
                await serving
            await db.close()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise


@contextmanager
def loopback_server(
    policy: str = DEFAULT_POLICY, secret: str = TEST_SECRET, **settings: Any
) -> Iterator[LiveServer]:
    """A LiveServer on a fresh SQLite file (more Settings fields as keywords), stopped on exit."""
    with tempfile.TemporaryDirectory() as tmp:
        live = LiveServer(policy, Path(tmp) / "live.db", secret, **settings)
        live.start()
        try:
            yield live
        finally:
            live.stop()
