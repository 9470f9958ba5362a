"""Standard input and output as asyncio pipes, for serving MCP over stdio without threads.

`mcp.server.stdio.stdio_server` reads and writes the standard streams through
`anyio.wrap_file`, one worker-thread hand-off per line read and two per line written. On a
busy core those hand-offs are most of what the gateway adds to a call, so the gateway
hands `stdio_server` these two instead: the same line-by-line reads and writes, on the
event loop's own pipe transports.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

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
    """(stdin, stdout) of this process as a PipeReader and a PipeWriter.

    Duplicates of the descriptors are used, so the standard streams stay open for anything
    else in the process; stdout is then pointed at stderr, so a stray print cannot corrupt
    the protocol.
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    stdin = os.fdopen(os.dup(sys.stdin.fileno()), "rb", buffering=0)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return PipeReader(reader), PipeWriter(writer)
