"""Listening for `cosigner serve` and `cosigner dev`: bind the port first, then run uvicorn.

Binding before anything starts turns a taken port into one clear error, and lets the
start line be logged only once the server really accepts connections.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator

import uvicorn

from cosigner._listen import ListenError, valid_port
from cosigner._listen import bind as bind_port

__all__ = ["ListenError", "Server", "bind", "valid_port"]


def bind(host: str, port: int, *, command: str = "cosigner serve") -> socket.socket:
    """A socket bound to host:port (0 = any free port), or `ListenError` naming the fix."""
    return bind_port(host, port, pick=f"`{command} --port N`")


class Server(uvicorn.Server):
    """uvicorn that calls `on_listening` once it accepts connections, and may leave
    SIGINT/SIGTERM to its host process (pytest)."""

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        handle_signals: bool = True,
        on_listening: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self.handle_signals = handle_signals
        self.on_listening = on_listening

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start as uvicorn does, then report that the server is listening."""
        await super().startup(sockets=sockets)
        if self.on_listening is not None and not self.should_exit:
            self.on_listening()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's signal handling, unless the host process keeps it."""
        if self.handle_signals:
            with super().capture_signals():
                yield
        else:
            yield
