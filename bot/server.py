"""Listening for `cosigner serve` and `cosigner dev`: bind the port first, then run uvicorn.

Binding before anything starts turns a taken port into one clear error, and lets the
start line be logged only once the server really accepts connections.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import socket
from collections.abc import Callable, Iterator

import uvicorn


class ListenError(Exception):
    """The address cannot be listened on; the message says what to change."""


def bind(host: str, port: int, *, command: str = "cosigner serve") -> socket.socket:
    """A socket bound to host:port (0 = any free port), or `ListenError` naming the fix."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ListenError(
                f"port {port} is already in use; stop what holds it or pick another with `{command} --port N`"
            ) from exc
        raise ListenError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); "
            f"check --host, or pick another port with `{command} --port N`"
        ) from exc
    return sock


def valid_port(text: str) -> int:
    """An argparse type: a TCP port number, 0 to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port; give a number from 0 to 65535")
    return port


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
