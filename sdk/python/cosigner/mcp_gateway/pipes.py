"""Standard input and output as asyncio pipes, for serving MCP over stdio without threads.

`mcp.server.stdio.stdio_server` reads and writes the standard streams through
`anyio.wrap_file`, one worker-thread hand-off per line read and two per line written. On a
busy core those hand-offs are most of what the gateway adds to a call, so the gateway
hands `stdio_server` these two instead: the same line-by-line reads and writes, on the
event loop's own pipe transports.

A standard stream the event loop cannot watch (a regular file, as in `cosigner-mcp-gateway
< session.jsonl > answers.jsonl`, or /dev/null) is read or written the SDK's way, in a
worker thread, instead.
"""

from __future__ import annotations

import asyncio
import io
import os
import selectors
import stat
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio

from cosigner.mcp_gateway.strict import GuardedLines

__all__ = ["PipeReader", "PipeWriter", "open_stdio"]

LINE_LIMIT = 64 * 1024 * 1024
"""The longest JSON-RPC line read from the client (a tools/call with large arguments)."""


class PipeReader:
    """Lines of text from a pipe, iterated with `async for` (what `stdio_server` reads)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def __aiter__(self) -> AsyncIterator[str]:
        while line := await self._reader.readline():
            yield line.decode("utf-8", errors="replace")


class PipeWriter:
    """Text written to a pipe with `await write(...)` and `await flush()` (what `stdio_server` writes)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        """Queue `text`, UTF-8 encoded."""
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        """Wait until the pipe has taken what was written (back-pressure from a slow client)."""
        await self._writer.drain()


async def open_stdio() -> tuple[Any, Any]:
    """(stdin, stdout) of this process: a PipeReader and a PipeWriter where they are pipes,
    sockets or terminals, else the SDK's thread-backed files. Lines read pass
    `strict.GuardedLines`: an ambiguous message is answered with an error, not served.

    Duplicates of the descriptors are used, so the standard streams stay open for anything
    else in the process; stdout is then pointed at stderr, so a stray print cannot corrupt
    the protocol.
    """
    loop = asyncio.get_running_loop()
    stdin_fd = os.dup(sys.stdin.fileno())
    if watchable(stdin_fd, selectors.EVENT_READ):
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        pipe = os.fdopen(stdin_fd, "rb", buffering=0)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        stdin: Any = PipeReader(reader)
    else:
        stdin = anyio.wrap_file(
            io.TextIOWrapper(os.fdopen(stdin_fd, "rb"), encoding="utf-8", errors="replace")
        )
    sys.stdout.flush()
    stdout_fd = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    if watchable(stdout_fd, selectors.EVENT_WRITE):
        out = os.fdopen(stdout_fd, "wb", buffering=0)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out)
        stdout: Any = PipeWriter(asyncio.StreamWriter(transport, protocol, None, loop))
    else:
        stdout = anyio.wrap_file(io.TextIOWrapper(os.fdopen(stdout_fd, "wb"), encoding="utf-8"))
    return GuardedLines(stdin, stdout), stdout


def watchable(fd: int, events: int) -> bool:
    """Whether the event loop can wait on `fd`: a pipe, socket or terminal (not a regular
    file, not /dev/null)."""
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, events)
        except (OSError, ValueError):
            return False
    return True
