"""The SDK's requests to a plain-HTTP Cosigner: HTTP/1.1 on kept-alive connections, without httpx.

Every tool call an agent gates costs one request to Cosigner on its critical path (the
policy's answer) and one beside it (the result report). Through httpx, most of the agent's
CPU for a policy-allowed read went into those two: URL parsing and merging, header objects,
the cookie jar, then httpcore's stream wrappers and h11's state machine, per request. For a
plain `http://` Cosigner (the usual self-hosted set-up: loopback, a sidecar, a private
network), both clients send their requests on kept-alive connections of their own:

- `KeepAlive` for `AsyncCosigner`: sockets on the event loop's own protocol callbacks,
  written and read by h11 (the sans-I/O HTTP/1.1 library httpx is built on);
- `BlockingKeepAlive` for `Cosigner` and for queued reports: the standard library's
  `http.client`, one connection per request in flight, shared between threads.

The SDK's flows are untouched: the same bodies, checks, retries (a transport failure is the
same `httpx.TransportError`, so "never sent" and "may have arrived" stay apart) and
decoding; only the bytes are written differently. An `https://` Cosigner (TLS,
certificates), a proxy named in the environment (`HTTP_PROXY`, `ALL_PROXY`, less
`NO_PROXY`), and a client given its own `transport` keep httpx. Idle connections are
dropped after `EXPIRY` seconds, as httpx drops its own, before the server closes them.
"""

from __future__ import annotations

import asyncio
import http.client
import select
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import h11
import httpx

from cosigner._core import Send

__all__ = ["EXPIRY", "BlockingKeepAlive", "KeepAlive", "Origin", "Reply", "Started"]

EXPIRY = 5.0
"""Seconds an idle connection is kept for reuse (httpx's default keep-alive expiry)."""

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

    def __init__(
        self,
        host: str,
        port: int,
        *,
        max_connections: int = 100,
        max_idle: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host, self.port = host, port
        self.max_connections, self.max_idle = max_connections, max_idle
        self._clock = clock
        self._idle: list[tuple[_Connection, float]] = []
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
        for connection, _ in self._idle:
            connection.close()
        self._open -= len(self._idle)
        self._idle.clear()

    async def _acquire(self, connect_timeout: float | None) -> _Connection:
        while True:
            now = self._clock()
            while self._idle:
                connection, since = self._idle.pop()
                if connection.usable and now - since < EXPIRY:
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
            self._idle.append((connection, self._clock()))
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


@dataclass(frozen=True)
class Origin:
    """Where a client's requests go on kept-alive connections, and the headers every one carries."""

    host: str
    port: int
    prefix: str
    fixed: Headers

    @classmethod
    def of(cls, url: str, headers: dict[str, str], transport: object | None) -> Origin | None:
        """The origin of a plain `http://` Cosigner; None where httpx must send (TLS, a proxy,
        a transport of the caller's own)."""
        parts = urlsplit(url)
        if transport is not None or parts.scheme != "http" or _proxy_for(url) is not None:
            return None
        host, port = parts.hostname or "localhost", parts.port or 80
        authority = f"[{host}]" if ":" in host else host
        fixed = _headers({"Host": authority if port == 80 else f"{authority}:{port}", **headers})
        return cls(host, port, parts.path.rstrip("/"), fixed)

    def target(self, step: Send) -> str:
        """The request target of `step`: the path under the URL's own, quoted, and its query."""
        target = self.prefix + quote(step.path, safe="/%:@!$&'()*+,;=~")
        return target + "?" + urlencode(step.params) if step.params else target

    def headers(self, step: Send) -> Headers:
        """Every header of `step`: the fixed ones, its own, and the body's length."""
        headers = [*self.fixed, *_headers(step.headers)] if step.headers else self.fixed
        if step.content or step.method in ("POST", "PUT", "PATCH"):
            headers = [*headers, (b"Content-Length", b"%d" % len(step.content or b""))]
        return headers


async def send_async(pool: KeepAlive, origin: Origin, step: Send) -> httpx.Response:
    """Send `step` on `pool`; its answer as an httpx.Response."""
    connect, read = _seconds(step.timeout)
    status, headers, content = await pool.request(
        step.method,
        origin.target(step),
        origin.headers(step),
        step.content or b"",
        connect_timeout=connect,
        read_timeout=read,
    )
    return httpx.Response(status, headers=headers, content=content)


class Started:
    """A request written on a blocking connection, its answer not read yet."""

    def __init__(self, pool: BlockingKeepAlive, connection: http.client.HTTPConnection, read: float | None):
        self._pool, self._connection = pool, connection
        self.read_timeout = read
        """Seconds `finish` waits for the answer (None: no limit)."""

    def arrived(self, timeout: float | None) -> bool:
        """True once the answer (or the connection's end) is here to read, waiting up to `timeout`."""
        sock = self._connection.sock
        return sock is None or bool(select.select([sock], [], [], timeout)[0])

    def finish(self) -> httpx.Response:
        """Read the answer (waiting up to the request's read timeout); the connection goes back
        to the pool once the answer is whole. Failures are httpx's transport errors."""
        status, headers, content = self.finish_raw()
        return httpx.Response(status, headers=headers, content=content)

    def finish_raw(self) -> tuple[int, list[tuple[str, str]], bytes]:
        """`finish` as (status, headers, body), for a caller that needs no httpx.Response."""
        connection, ok = self._connection, False
        try:
            assert connection.sock is not None
            connection.sock.settimeout(self.read_timeout)
            try:
                answer = connection.getresponse()
                content = answer.read()
            except TimeoutError:
                raise httpx.ReadTimeout(f"Cosigner did not answer within {self.read_timeout:g} s") from None
            except http.client.RemoteDisconnected:
                raise httpx.RemoteProtocolError("Cosigner closed the connection without an answer") from None
            except http.client.HTTPException as exc:
                raise httpx.RemoteProtocolError(f"malformed answer from Cosigner: {exc!r}") from None
            except OSError as exc:
                raise httpx.ReadError(f"reading Cosigner's answer: {exc}") from None
            ok = not answer.will_close
            return answer.status, answer.getheaders(), content
        finally:
            self._pool.release(connection, ok)


class BlockingKeepAlive:
    """Kept-alive HTTP/1.1 connections (the standard library's `http.client`) to one origin,
    for blocking callers on any thread.

    Each request takes an idle connection or opens one, and gives it back once its answer
    is read; up to `max_idle` idle connections are kept, for `EXPIRY` seconds each. `start`
    writes a request without reading its answer, so a report reaches Cosigner at once while
    another thread waits for the answer.
    """

    def __init__(
        self, origin: Origin, *, max_idle: int = 20, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.origin, self.max_idle, self._clock = origin, max_idle, clock
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []
        self._lock = threading.Lock()
        self._closed = False

    def send(self, step: Send) -> httpx.Response:
        """Send `step` and return its answer."""
        started = self.start(step, connect=True)
        assert started is not None
        return started.finish()

    def start(self, step: Send, *, connect: bool) -> Started | None:
        """Write `step` on an idle connection (or a new one, with `connect`); None when no idle
        connection could take it and `connect` is False (nothing was written then)."""
        connect_timeout, read_timeout = _seconds(step.timeout)
        connection = self._idle_connection()
        if connection is None:
            if not connect:
                return None
            connection = self._connect(connect_timeout)
        target, headers = self.origin.target(step), self.origin.headers(step)
        try:
            connection.putrequest(step.method, target, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            connection.endheaders(step.content or None)
        except OSError as exc:
            connection.close()
            if not connect:
                return None  # an idle connection that broke as it was taken: the worker sends anew
            raise httpx.WriteError(f"writing to Cosigner: {exc}") from None
        return Started(self, connection, read_timeout)

    def release(self, connection: http.client.HTTPConnection, reusable: bool) -> None:
        """Take back a connection whose answer was read; keep it if it can serve another."""
        if reusable and connection.sock is not None:
            with self._lock:
                if not self._closed and len(self._idle) < self.max_idle:
                    self._idle.append((connection, self._clock()))
                    return
        connection.close()

    def close(self) -> None:
        """Close the idle connections (those in use close when their answer is read)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection, _ in idle:
            connection.close()

    def _idle_connection(self) -> http.client.HTTPConnection | None:
        now = self._clock()
        while True:
            with self._lock:
                if not self._idle:
                    return None
                connection, since = self._idle.pop()
            if now - since < EXPIRY and not _readable(connection):
                return connection
            connection.close()  # expired, closed by Cosigner, or holding bytes nobody asked for

    def _connect(self, timeout: float | None) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection(self.origin.host, self.origin.port, timeout=timeout)
        try:
            connection.connect()
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"could not connect to {self.origin.host}:{self.origin.port} in time"
            ) from None
        except OSError as exc:
            raise httpx.ConnectError(f"{self.origin.host}:{self.origin.port}: {exc}") from exc
        return connection


def _readable(connection: http.client.HTTPConnection) -> bool:
    """True when an idle connection has something to read: its end, or bytes out of step."""
    return connection.sock is None or bool(select.select([connection.sock], [], [], 0)[0])
