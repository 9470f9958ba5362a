"""A uvicorn server for the bundled emulators: an ASGI app on a free 127.0.0.1 port.

The Slack, Teams and Twilio emulators (`cosigner dev`, the tests, the benchmarks) each serve
their fake API this way; this is the one copy of how.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp


class _QuietServer(uvicorn.Server):
    # The host process (pytest, `cosigner dev`) owns SIGINT/SIGTERM, not this server.
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class LoopbackServer:
    """Serves `app` on 127.0.0.1 at a port the system picks, from `start()` until `stop()`."""

    def __init__(self, app: ASGIApp, name: str, *, ws: str = "none") -> None:
        self.app = app
        self.name = name  # for the error when it cannot start
        self.ws = ws  # uvicorn's WebSocket implementation, "none" where the app has none
        self.port: int | None = None
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> int:
        """Bind a free loopback port, serve on it, and return it once uvicorn has started."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        # log_config=None: uvicorn's own logging setup would replace the handlers that
        # `bot.observability.logs` set.
        config = uvicorn.Config(
            self.app, log_config=None, log_level="warning", access_log=False, lifespan="off", ws=self.ws
        )
        self._server = _QuietServer(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                await self._task  # re-raises why uvicorn could not start
                raise RuntimeError(f"the {self.name} stopped while starting")
            await asyncio.sleep(0.005)
        self.port = port
        return port

    async def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
        self._server = self._task = None
