"""The gateway's requests to Cosigner: HTTP/1.1 keep-alive connections on the event loop.

Every tools/call the gateway serves costs one request to Cosigner on the agent's critical
path (the policy's answer) and one beside it (the result report). Through httpx, most of
the gateway's CPU for a read went into those two: URL parsing and merging, header
objects, the cookie jar, then httpcore's cancel scopes and stream wrappers and h11's state
machine, per request. For a plain `http://` Cosigner, the usual self-hosted setup,
`GatewayCosigner` sends the SDK's requests as bytes onto a kept-alive socket and reads the
answers with a small parser on the loop's own protocol callbacks. The SDK's flows are
untouched: the same bodies, checks, retries (a transport failure is the same
`httpx.TransportError`) and decoding; only the bytes are written differently.

`https://` (TLS, certificates) and a proxy named in the environment (`HTTP_PROXY`,
`ALL_PROXY`, less `NO_PROXY`) keep httpx, as does a client given its own `transport`.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections import deque
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import httpx

from cosigner import AsyncCosigner
from cosigner._core import Send

__all__ = ["GatewayCosigner", "KeepAlive", "Reply"]

MAX_HEAD = 64 * 1024
"""The longest status line plus headers read from Cosigner."""

Reply = tuple[int, list[tuple[bytes, bytes]], bytes]
"""(status, headers, body) of a response."""


class _Connection(asyncio.Protocol):
    """One kept-alive connection, with at most one request in flight."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future[Reply] | None = None
        self.head: tuple[int, list[tuple[bytes, bytes]]] | None = None
        self.length = 0  # of the body; -1 until the server closes; unused when chunked
        self.chunked = False
        self.bodyless = False  # the answer to a HEAD request
        self.usable = True  # False once closed, broken, or told `Connection: close`

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        if self.head is not None and self.length == -1 and not self.chunked:
            self._done(bytes(self.buf))  # a body that ends with the connection
        else:
            self._fail(httpx.RemoteProtocolError("Cosigner closed the connection without a complete answer"))

    def eof_received(self) -> bool | None:
        self.usable = False
        return None  # the transport closes; connection_lost settles a request in flight

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.waiter is None:
            self.usable = False  # bytes nobody asked for: this connection is out of step
            return
        try:
            self._parse()
        except (ValueError, IndexError) as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed answer from Cosigner: {exc}"))
            self.close()

    def send(self, data: bytes, bodyless: bool) -> asyncio.Future[Reply]:
        """Write one request; the future is its answer."""
        assert self.transport is not None and self.waiter is None
        self.waiter = asyncio.get_running_loop().create_future()
        self.head, self.bodyless = None, bodyless
        self.transport.write(data)
        return self.waiter

    def close(self) -> None:
        self.usable = False
        if self.transport is not None:
            self.transport.close()

    def _parse(self) -> None:
        while self.head is None:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD:
                    raise ValueError("headers too long")
                return
            lines = bytes(self.buf[:end]).split(b"\r\n")
            del self.buf[: end + 4]
            version, status_text = lines[0].split(b" ", 2)[:2]
            if not version.startswith(b"HTTP/1."):
                raise ValueError(f"not an HTTP/1 status line: {lines[0][:40]!r}")
            status = int(status_text)
            headers: list[tuple[bytes, bytes]] = []
            length, chunked, close = -1, False, version == b"HTTP/1.0"
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                name, value = name.strip(), value.strip()
                headers.append((name, value))
                lowered = name.lower()
                if lowered == b"content-length":
                    length = int(value)
                elif lowered == b"transfer-encoding":
                    chunked = b"chunked" in value.lower()
                elif lowered == b"connection":
                    close = b"close" in value.lower()
            if status < 200:
                continue  # an interim answer (100 Continue): the real one follows
            if self.bodyless or status in (204, 304):
                length, chunked = 0, False
            if close or (length == -1 and not chunked):
                self.usable = False
            self.head, self.length, self.chunked = (status, headers), length, chunked
        if self.chunked:
            got = _dechunk(self.buf)
            if got is None:
                return
            body, used = got
        elif self.length < 0 or len(self.buf) < self.length:
            return  # more to come (or, with no length, the end of the connection)
        else:
            body, used = bytes(self.buf[: self.length]), self.length
        del self.buf[:used]
        if self.buf:
            self.usable = False  # more than one answer's worth: out of step
        self._done(body)

    def _done(self, body: bytes) -> None:
        waiter, head = self.waiter, self.head
        self.waiter = self.head = None
        if waiter is not None and head is not None and not waiter.done():
            waiter.set_result((head[0], head[1], body))

    def _fail(self, exc: Exception) -> None:
        self.usable = False
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


def _dechunk(buf: bytearray) -> tuple[bytes, int] | None:
    """(body, bytes used) of a complete chunked body at the start of `buf`; None if incomplete."""
    pos, parts = 0, list[bytes]()
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        size = int(bytes(buf[pos:eol]).split(b";", 1)[0].strip(), 16)
        start = eol + 2
        if size == 0:  # then an empty line, or trailer lines and an empty line
            if buf[start : start + 2] == b"\r\n":
                return b"".join(parts), start + 2
            end = buf.find(b"\r\n\r\n", start)
            return None if end < 0 else (b"".join(parts), end + 4)
        if len(buf) < start + size + 2:
            return None
        parts.append(bytes(buf[start : start + size]))
        pos = start + size + 2


def _expire(waiter: asyncio.Future[Any], seconds: float) -> None:
    if not waiter.done():
        waiter.set_exception(httpx.ReadTimeout(f"Cosigner did not answer within {seconds:g} s"))


class KeepAlive:
    """Kept-alive HTTP/1.1 connections to one `host:port`.

    At most `max_connections` requests are in flight at once (more wait for one to
    finish, as in httpx's pool); up to `max_idle` idle connections are kept. A request
    cut short (timeout, cancellation, a malformed answer) closes its connection.
    """

    def __init__(self, host: str, port: int, *, max_connections: int = 100, max_idle: int = 20) -> None:
        self.host, self.port = host, port
        self.max_connections, self.max_idle = max_connections, max_idle
        self._idle: list[_Connection] = []
        self._open = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def request(
        self,
        data: bytes,
        *,
        bodyless: bool = False,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
    ) -> Reply:
        """Send one whole request (head and body, as bytes) and return its answer."""
        connection = await self._acquire(connect_timeout)
        ok = False
        try:
            waiter = connection.send(data, bodyless)
            timer = None
            if read_timeout is not None:
                timer = asyncio.get_running_loop().call_later(read_timeout, _expire, waiter, read_timeout)
            try:
                reply = await waiter
            finally:
                if timer is not None:
                    timer.cancel()
            ok = True
            return reply
        finally:
            self._release(connection, ok)

    def close(self) -> None:
        """Close the idle connections (those in use close when their request ends)."""
        for connection in self._idle:
            connection.close()
        self._open -= len(self._idle)
        self._idle.clear()

    async def _acquire(self, connect_timeout: float | None) -> _Connection:
        while True:
            while self._idle:
                connection = self._idle.pop()
                if connection.usable:
                    return connection
                connection.close()
                self._open -= 1
            if self._open < self.max_connections:
                break
            slot: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.append(slot)
            try:
                await slot
            except asyncio.CancelledError:
                if slot.cancelled():
                    self._waiting.remove(slot)
                else:
                    self._wake()  # woken, then cancelled: pass the turn on
                raise
        self._open += 1
        try:
            return await self._connect(connect_timeout)
        except BaseException:
            self._open -= 1
            self._wake()
            raise

    async def _connect(self, connect_timeout: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(_Connection, self.host, self.port), connect_timeout
            )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"could not connect to {self.host}:{self.port} in time") from None
        except OSError as exc:
            raise httpx.ConnectError(f"{self.host}:{self.port}: {exc}") from exc
        return connection

    def _release(self, connection: _Connection, ok: bool) -> None:
        if ok and connection.usable and len(self._idle) < self.max_idle:
            self._idle.append(connection)
        else:
            connection.close()
            self._open -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiting:
            slot = self._waiting.popleft()
            if not slot.done():
                slot.set_result(None)
                return


def _proxy_for(url: str) -> str | None:
    """The proxy the environment names for `url`, as httpx would pick it."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


def _header_lines(headers: dict[str, str]) -> bytes:
    lines = b"".join(f"{name}: {value}\r\n".encode() for name, value in headers.items())
    if lines.count(b"\n") != len(headers) or lines.count(b"\r") != len(headers):
        raise ValueError("a header name or value holds a line break")
    return lines


def _seconds(timeout: httpx.Timeout | float | None) -> tuple[float | None, float | None]:
    """(connect, read) seconds of a request's timeout."""
    if isinstance(timeout, httpx.Timeout):
        return timeout.connect, timeout.read
    return timeout, timeout


class GatewayCosigner(AsyncCosigner):
    """`AsyncCosigner` that sends over `KeepAlive` when Cosigner is plain `http://`.

    Same arguments as AsyncCosigner; with `transport` given, or an `https://` URL, or a
    proxy in the environment, every request goes through httpx as AsyncCosigner's do.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        **options: Any,
    ) -> None:
        super().__init__(url, api_key, transport=transport, **options)
        self._keepalive: KeepAlive | None = None
        parts = urlsplit(self.config.url)
        if transport is not None or parts.scheme != "http" or _proxy_for(self.config.url) is not None:
            return
        host, port = parts.hostname or "localhost", parts.port or 80
        self._prefix = parts.path.rstrip("/")
        authority = f"[{host}]" if ":" in host else host
        self._fixed = _header_lines(
            {"Host": authority if port == 80 else f"{authority}:{port}", **self.config.headers}
        )
        self._keepalive = KeepAlive(host, port)

    async def aclose(self) -> None:
        if self._keepalive is not None:
            self._keepalive.close()
        await super().aclose()

    async def _send(self, step: Send) -> httpx.Response:
        if self._keepalive is None:
            return await super()._send(step)
        target = self._prefix + quote(step.path, safe="/%:@!$&'()*+,;=~")
        if step.params:
            target += "?" + urlencode(step.params)
        body = step.content or b""
        head = [f"{step.method} {target} HTTP/1.1\r\n".encode(), self._fixed]
        if step.headers:
            head.append(_header_lines(step.headers))
        if body or step.method in ("POST", "PUT", "PATCH"):
            head.append(b"Content-Length: %d\r\n" % len(body))
        connect, read = _seconds(step.timeout)
        status, headers, content = await self._keepalive.request(
            b"".join((*head, b"\r\n", body)),
            bodyless=step.method == "HEAD",
            connect_timeout=connect,
            read_timeout=read,
        )
        return httpx.Response(status, headers=headers, content=content)
