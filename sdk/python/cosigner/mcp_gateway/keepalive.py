"""The gateway's requests to Cosigner: HTTP/1.1 keep-alive connections on the event loop.

Every tools/call the gateway serves costs one request to Cosigner on the agent's critical
path (the policy's answer) and one beside it (the result report). Through httpx, most of
the gateway's CPU for a read went into those two: URL parsing and merging, header
objects, the cookie jar, then httpcore's cancel scopes and stream wrappers and h11's state
machine, per request. For a plain `http://` Cosigner, the usual self-hosted setup,
`GatewayCosigner` sends the SDK's requests onto kept-alive sockets on the loop's own
protocol callbacks, written and read by h11 (the sans-I/O HTTP/1.1 library httpx is built
on, so nothing new is installed). The SDK's flows are
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

import h11
import httpx

from cosigner import AsyncCosigner
from cosigner._core import Send

__all__ = ["GatewayCosigner", "KeepAlive", "Reply"]

MAX_HEAD = 64 * 1024
"""The longest status line plus headers read from Cosigner."""

Reply = tuple[int, list[tuple[bytes, bytes]], bytes]
"""(status, headers, body) of a response."""

Headers = list[tuple[bytes, bytes]]
"""Header (name, value) pairs as h11 takes them."""


class _Connection(asyncio.Protocol):
    """One kept-alive connection, with at most one request in flight; h11 (the HTTP/1.1
    protocol library httpx itself is built on) writes the requests and reads the answers."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        self.waiter: asyncio.Future[Reply] | None = None
        self.head: tuple[int, Headers] | None = None
        self.body: list[bytes] = []
        self.usable = True  # False once closed, broken, or out of step

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        if self.waiter is not None:
            self.h11.receive_data(b"")  # the end of the stream: it ends a close-delimited body
            self._read()
        self._fail(httpx.RemoteProtocolError("Cosigner closed the connection without a complete answer"))

    def eof_received(self) -> bool | None:
        self.usable = False
        return None  # the transport closes; connection_lost settles a request in flight

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:
            self.usable = False  # bytes nobody asked for: this connection is out of step
            return
        self.h11.receive_data(data)
        self._read()

    def send(self, method: str, target: bytes, headers: Headers, body: bytes) -> asyncio.Future[Reply]:
        """Write one request; the future is its answer."""
        assert self.transport is not None and self.waiter is None
        data = self.h11.send(h11.Request(method=method, target=target, headers=headers))
        if body:
            data = (data or b"") + (self.h11.send(h11.Data(data=body)) or b"")
        data = (data or b"") + (self.h11.send(h11.EndOfMessage()) or b"")
        self.waiter = asyncio.get_running_loop().create_future()
        self.head, self.body = None, []
        self.transport.write(data)
        return self.waiter

    def close(self) -> None:
        self.usable = False
        if self.transport is not None:
            self.transport.close()

    def _read(self) -> None:
        try:
            while True:
                event = self.h11.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    return
                if isinstance(event, h11.Response):
                    self.head = (event.status_code, list(event.headers))
                elif isinstance(event, h11.Data):
                    self.body.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    self._done()
                    return
                elif isinstance(event, h11.ConnectionClosed):
                    self.usable = False
                    return
                # h11.InformationalResponse (100 Continue): the real answer follows
        except h11.RemoteProtocolError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed answer from Cosigner: {exc}"))
            self.close()

    def _done(self) -> None:
        waiter, head = self.waiter, self.head
        self.waiter = self.head = None
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()  # kept alive: the next request may follow
        else:
            self.usable = False  # the answer ends with the connection (Connection: close, HTTP/1.0)
        if waiter is not None and head is not None and not waiter.done():
            waiter.set_result((head[0], head[1], b"".join(self.body)))

    def _fail(self, exc: Exception) -> None:
        self.usable = False
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


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
        method: str,
        target: str,
        headers: Headers | None = None,
        body: bytes = b"",
        *,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
    ) -> Reply:
        """Send one request (Host and the other `headers` as given) and return its answer."""
        connection = await self._acquire(connect_timeout)
        ok = False
        try:
            try:
                waiter = connection.send(method, target.encode("ascii"), headers or [], body)
            except h11.LocalProtocolError as exc:
                raise ValueError(f"cannot send this request: {exc}") from None
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


def _headers(headers: dict[str, str]) -> Headers:
    pairs = [(name.encode(), value.encode()) for name, value in headers.items()]
    if any(b"\r" in part or b"\n" in part for pair in pairs for part in pair):
        raise ValueError("a header name or value holds a line break")
    return pairs


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
        self._fixed = _headers(
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
        headers = [*self._fixed, *_headers(step.headers)] if step.headers else self._fixed
        if body or step.method in ("POST", "PUT", "PATCH"):
            headers = [*headers, (b"Content-Length", b"%d" % len(body))]
        connect, read = _seconds(step.timeout)
        status, answer_headers, content = await self._keepalive.request(
            step.method, target, headers, body, connect_timeout=connect, read_timeout=read
        )
        return httpx.Response(status, headers=answer_headers, content=content)
        return httpx.Response(status, headers=headers, content=content)
