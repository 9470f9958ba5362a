"""A client whose request body never ends, and a tap that counts what the app read of it.

`endless` speaks HTTP/1.1 over a real socket to a real uvicorn: it sends the head, then
chunks from an async generator that yields without end, and reads the answer while it sends
(as a careful client does); it stops sending once the answer is in, or gives up, failing the
test, when the server is still reading well past any limit. `Tap` sits in front of the app
and records the size of every body message uvicorn handed it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CHUNK = 64 * 1024
STILL_READING = 32 * 1024 * 1024
"""How far past the limit the client goes on sending before it calls the server stuck."""
BUFFERS = 16 * 1024 * 1024
"""What the sockets and uvicorn may hold between the client's generator and the app: the
generator may run this far past what the app read before the 413 stops it."""


@dataclass
class Answer:
    """The server's answer, and how many body bytes the client's generator produced."""

    status: int
    headers: dict[str, str]
    body: bytes
    produced: int


@dataclass
class Tap:
    """The app behind it, recording the body messages each request handed the app."""

    app: ASGIApp
    messages: list[int] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve `scope` with the app, counting what it receives."""

        async def counted() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                self.messages.append(len(message.get("body", b"")))
            return message

        await self.app(scope, counted, send)

    def reset(self) -> None:
        """Forget what earlier requests read."""
        self.messages.clear()

    def stopped_at(self, limit: int) -> None:
        """Assert the app read the body only until it passed `limit`: what it took before the
        message that crossed the limit is at most the limit (that message it dropped)."""
        read = sum(self.messages)
        assert read > limit, f"the app read only {read} bytes; the limit is {limit}"
        assert read - self.messages[-1] <= limit, f"the app kept reading: {self.messages}"

    def read_nothing(self) -> None:
        """Assert the app took no byte of the body."""
        assert sum(self.messages) == 0, self.messages


async def endless(
    url: str,
    method: str,
    path: str,
    headers: Mapping[str, str],
    *,
    limit: int,
    declared: int | None = None,
) -> Answer:
    """Send `method path` with a body without end (chunked, or under a `Content-Length` of
    `declared`) and return the answer; fails the test if none comes before the client has
    sent `limit` + STILL_READING bytes."""
    where = urlsplit(url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    produced = 0

    async def forever() -> AsyncIterator[bytes]:
        nonlocal produced
        while True:
            produced += CHUNK
            yield b"x" * CHUNK

    framing = "Transfer-Encoding: chunked" if declared is None else f"Content-Length: {declared}"
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", framing]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    answer = asyncio.create_task(_read_answer(reader))
    try:
        async for chunk in forever():
            if answer.done() or produced > limit + STILL_READING:
                break
            writer.write(chunk if declared is not None else b"%x\r\n%s\r\n" % (len(chunk), chunk))
            drained = asyncio.ensure_future(writer.drain())
            await asyncio.wait({drained, answer}, return_when=asyncio.FIRST_COMPLETED)
            drained.cancel()
        if not answer.done():
            pytest.fail(f"{path}: no answer, the server was still reading after {produced} bytes")
        status, got, body = answer.result()
        return Answer(status, got, body, produced)
    finally:
        answer.cancel()
        writer.close()


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    headers: dict[str, Any] = {}
    for line in head[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(head[0].split()[1]), headers, body
