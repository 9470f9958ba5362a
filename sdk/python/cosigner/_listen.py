"""Binding a listening port before anything starts, and reading a port argument.

Shared by the commands that serve: the MCP gateway's `--transport http` here, and the
Cosigner server's `serve` and `dev` (bot/http/server.py). Binding first turns a taken port into
one error line naming the fix, before any other process or connection is started.
"""

from __future__ import annotations

import argparse
import errno
import socket

__all__ = ["ListenError", "bind", "valid_port"]


class ListenError(Exception):
    """The address cannot be listened on; the message says what to change."""


def bind(host: str, port: int, *, pick: str) -> socket.socket:
    """A socket bound to host:port (0 = any free port), or `ListenError` naming the fix;
    `pick` says how to choose another port (e.g. "`cosigner serve --port N`")."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ListenError(
                f"port {port} is already in use; stop what holds it or pick another with {pick}"
            ) from exc
        raise ListenError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); "
            f"check --host, or pick another port with {pick}"
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
