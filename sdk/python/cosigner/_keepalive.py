"""The SDK's requests to a plain-HTTP Cosigner: HTTP/1.1 on kept-alive connections, without httpx.

Every tool call an agent gates costs one request to Cosigner on its critical path (the
policy's answer) and one beside it (the result report). Through httpx, most of the agent's
CPU for a policy-allowed read went into those two: URL parsing and merging, header objects,
the cookie jar, then httpcore's stream wrappers and h11's state machine, per request. For a
plain `http://` Cosigner (the usual self-hosted set-up: loopback, a sidecar, a private
network), both clients send their requests on kept-alive connections of their own:

- `KeepAlive` for `AsyncCosigner`: sockets on the event loop's own protocol callbacks;
- `BlockingKeepAlive` for `Cosigner` and for queued reports: blocking sockets, one
  connection per request in flight, shared between threads.

Requests are written whole (`request_bytes`, `Origin.request`: request line and headers
checked, so nothing can smuggle a second line in). Answers are read by httptools (llhttp,
the C parser uvicorn reads requests with) where it is installed, else by h11 (the sans-I/O
library httpx is built on): h11 costs about 90 µs of CPU per answer, httptools about 3.

The SDK's flows are untouched: the same bodies, checks, retries (a transport failure is the
same `httpx.TransportError`, so "never sent" and "may have arrived" stay apart) and
decoding; only the bytes are written differently. An `https://` Cosigner (TLS,
certificates), a proxy named in the environment (`HTTP_PROXY`, `ALL_PROXY`, less
`NO_PROXY`), and a client given its own `transport` keep httpx. Idle connections are
dropped after `EXPIRY` seconds, as httpx drops its own, before the server closes them.

Why not httpcore, httpx's own pooled layer: measured in its place (bench/sdk_http.py), its
asyncio pool cost 3.8 to 5.2 times this pool's CPU per request (anyio's locks take a turn
of the event loop each; h11's event machinery) and its blocking pool 4.8 times, and the
MCP gateway, which asks Cosigner once per tool call, spent a third to a half more CPU per
read (docs/performance.md, "One HTTP client family, measured").
"""

from __future__ import annotations

import asyncio
import re
import select
import socket
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

try:  # a C parser (llhttp) where installed: the `mcp` extra and uvicorn[standard] bring it
    import httptools as _httptools
except ImportError:  # the tests force the h11 reader too
    _httptools = None  # type: ignore[assignment]

from cosigner._core import Send
from cosigner._http import JSON_TYPE, Reply

__all__ = ["EXPIRY", "BlockingKeepAlive", "KeepAlive", "Origin", "Started", "request_bytes"]

EXPIRY = 5.0
"""Seconds an idle connection is kept for reuse (httpx's default keep-alive expiry)."""

MAX_HEAD = 64 * 1024
"""The longest status line plus headers read from Cosigner."""

READ_SIZE = 64 * 1024
"""Bytes read from a blocking socket at once."""

Headers = list[tuple[bytes, bytes]]
"""Header (name, value) pairs."""

Answer = tuple[int, Headers, bytes]
"""(status, headers, body) of a response."""


class _Reading:
    """One answer being read: its status, headers and body; `done` once whole, `keep_alive`
    if the connection may serve another, `stray` if bytes followed it (out of step)."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: Headers = []
        self.body: list[bytes] = []
        self.done = self.keep_alive = self.stray = False

    def feed(self, data: bytes) -> None:
        """Read the next bytes; raises httpx.RemoteProtocolError on a malformed answer."""
        raise NotImplementedError

    def end(self) -> None:
        """The connection ended: it completes an answer delimited by the close."""
        raise NotImplementedError


class _H11Reading(_Reading):
    """One answer read by h11 (the sans-I/O HTTP/1.1 library httpx is built on): the fallback
    where httptools is not installed."""

    def __init__(self) -> None:
        super().__init__()
        self._h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        # h11 reads an answer only after the request it answers: a stand-in for the one written.
        self._h11.send(h11.Request(method="GET", target="/", headers=[("Host", "cosigner")]))
        self._h11.send(h11.EndOfMessage())

    def feed(self, data: bytes) -> None:
        if self.done:
            self.stray = True
            return
        self._h11.receive_data(data)
        self._read()

    def end(self) -> None:
        if not self.done:
            self._h11.receive_data(b"")  # the end of the stream: it ends a close-delimited body
            try:
                self._read()
            except httpx.RemoteProtocolError:
                pass  # cut short: not done, which the reader reports

    def _read(self) -> None:
        try:
            while not self.done:
                event = self._h11.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
                    return
                if isinstance(event, h11.Response):
                    self.status, self.headers = event.status_code, list(event.headers)
                elif isinstance(event, h11.Data):
                    self.body.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    self.done = True
                    self.keep_alive = self._h11.their_state is h11.DONE
                    self.stray = bool(self._h11.trailing_data[0])
                # h11.InformationalResponse (100 Continue): the real answer follows
        except h11.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(f"malformed answer from Cosigner: {exc}") from None


class _FastReading(_Reading):
    """One answer read by httptools (llhttp, the C parser uvicorn reads requests with): about
    a thirtieth of h11's CPU per answer."""

    def __init__(self) -> None:
        super().__init__()
        self._headers_complete = False
        self._head_size = self._unfinished = 0
        self._parser = _httptools.HttpResponseParser(self)

    def feed(self, data: bytes) -> None:
        if self.done:
            self.stray = True
            return
        try:
            self._parser.feed_data(data)
        except _httptools.HttpParserError as exc:
            if self.done:  # bytes after a whole answer: kept out of it, the connection dropped
                self.stray = True
                return
            raise httpx.RemoteProtocolError(f"malformed answer from Cosigner: {exc}") from None
        # Bounded as h11 bounds it: the finished header lines, and what was fed while the head
        # is unfinished (httptools holds a header line until it ends, however long).
        if not self._headers_complete:
            self._unfinished += len(data)
        if self._head_size > MAX_HEAD or self._unfinished > MAX_HEAD:
            raise httpx.RemoteProtocolError(
                f"malformed answer from Cosigner: headers beyond {MAX_HEAD} bytes"
            )

    def end(self) -> None:
        # llhttp reads a body without Content-Length or chunking until the end of the stream,
        # but cannot be told that the stream ended: such an answer is whole here.
        framed = any(name.lower() in (b"content-length", b"transfer-encoding") for name, _ in self.headers)
        if not self.done and self._headers_complete and not framed:
            self.done = True

    # llhttp's callbacks
    # (after the answer, what follows is kept out of it: the connection is out of step)
    def on_message_begin(self) -> None:
        if self.done:
            self.stray = True
        else:  # the first answer, or the real one after an interim answer
            self.headers, self.body, self._headers_complete = [], [], False
            self._head_size = self._unfinished = 0

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.done:
            self.headers.append((name, value))
            self._head_size += len(name) + len(value) + 4

    def on_headers_complete(self) -> None:
        self._headers_complete = True

    def on_body(self, body: bytes) -> None:
        if not self.done:
            self.body.append(body)

    def on_message_complete(self) -> None:
        if self.done:
            return
        status = self._parser.get_status_code()
        if status < 200:
            return  # an interim answer (100 Continue): the real one follows
        self.status, self.keep_alive, self.done = status, self._parser.should_keep_alive(), True


Reading: type[_Reading] = _FastReading if _httptools is not None else _H11Reading
"""How answers are read: httptools where it is installed, else h11."""


class _Connection(asyncio.Protocol):
    """One kept-alive connection, with at most one request in flight."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[Answer] | None = None
        self.reading: _Reading | None = None
        self.usable = True  # False once closed, broken, or out of step

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        if self.reading is not None:
            self.reading.end()  # the end of the stream ends a close-delimited answer
            self._settle()
        self._fail(httpx.RemoteProtocolError("Cosigner closed the connection without a complete answer"))

    def eof_received(self) -> bool | None:
        self.usable = False
        return None  # the transport closes; connection_lost settles a request in flight

    def data_received(self, data: bytes) -> None:
        if self.reading is None:
            self.usable = False  # bytes nobody asked for: this connection is out of step
            return
        try:
            self.reading.feed(data)
        except httpx.RemoteProtocolError as exc:
            self._fail(exc)
            self.close()
            return
        self._settle()

    def send(self, data: bytes) -> asyncio.Future[Answer]:
        """Write one request (its whole bytes); the future is its answer."""
        assert self.transport is not None and self.waiter is None
        self.waiter = asyncio.get_running_loop().create_future()
        self.reading = Reading()
        self.transport.write(data)
        return self.waiter

    def close(self) -> None:
        self.usable = False
        if self.transport is not None:
            self.transport.close()

    def _settle(self) -> None:
        reading, waiter = self.reading, self.waiter
        if reading is None or not reading.done:
            return
        if reading.stray or not reading.keep_alive:
            self.usable = False  # out of step, or the answer ends with the connection
        self.reading = self.waiter = None
        if waiter is not None and not waiter.done():
            waiter.set_result((reading.status, reading.headers, b"".join(reading.body)))

    def _fail(self, exc: Exception) -> None:
        self.usable = False
        self.reading = None
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
    ) -> Answer:
        """Send one request (Host and the other `headers` as given) and return its answer."""
        data = request_bytes(method, target, headers or [], body)
        return await self.exchange(data, connect_timeout=connect_timeout, read_timeout=read_timeout)

    async def exchange(
        self, data: bytes, *, connect_timeout: float | None = None, read_timeout: float | None = None
    ) -> Answer:
        """Write the whole bytes of one request (`request_bytes`) and return its answer."""
        connection = await self._acquire(connect_timeout)
        ok = False
        try:
            waiter = connection.send(data)
            timer = None
            if read_timeout is not None:
                timer = asyncio.get_running_loop().call_later(read_timeout, _expire, waiter, read_timeout)
            try:
                answer = await waiter
            finally:
                if timer is not None:
                    timer.cancel()
            ok = True
            return answer
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


_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\x00\r\n]")
_BAD_TARGET = re.compile(rb"[\x00-\x20\x7f-\xff]")


def _checked(pairs: Headers) -> Headers:
    """`pairs`, once every name is a token and no name or value holds a line break or NUL."""
    for name, value in pairs:
        if _BAD_VALUE.search(name) or _BAD_VALUE.search(value):
            raise ValueError("a header name or value holds a line break")
        if not _TOKEN.fullmatch(name):
            raise ValueError(f"{name!r} is not a header name")
    return pairs


def _headers(headers: dict[str, str]) -> Headers:
    return _checked([(name.encode(), value.encode()) for name, value in headers.items()])


def _lines(headers: Headers) -> bytes:
    return b"".join(b"%s: %s\r\n" % pair for pair in headers)


def _assembled(method: str, target: bytes, lines: bytes, body: bytes) -> bytes:
    """The request line, the header `lines` (already checked), Content-Length and the body."""
    length = b"Content-Length: %d\r\n" % len(body) if body or method in ("POST", "PUT", "PATCH") else b""
    return b"%s %s HTTP/1.1\r\n%s%s\r\n%s" % (method.encode(), target, lines, length, body)


def request_bytes(method: str, target: str, headers: Headers, body: bytes) -> bytes:
    """One HTTP/1.1 request, whole: request line, `headers` (checked), Content-Length, body."""
    raw_target = target.encode("utf-8")
    if not _TOKEN.fullmatch(method.encode()) or not raw_target or _BAD_TARGET.search(raw_target):
        raise ValueError(f"cannot send {method} {target!r}: not a valid HTTP/1.1 request line")
    try:
        lines = _lines(_checked(headers))
    except ValueError as exc:
        raise ValueError(f"cannot send these headers: {exc}") from None
    return _assembled(method, raw_target, lines, body)


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
    fixed: bytes
    """The header lines every request carries (Host, authorization, user agent), checked once."""

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
        return cls(host, port, quote(parts.path.rstrip("/"), safe=_SAFE), _lines(fixed))

    def request(self, step: Send) -> bytes:
        """The whole bytes of `step`: request line, headers, Content-Length, body."""
        target = self.prefix + quote(step.path, safe=_SAFE)
        if step.params:
            target += "?" + urlencode(step.params)
        own = b""
        if step.headers:  # most often just the JSON type, whose line is made once
            own = _JSON_LINES if step.headers == JSON_TYPE else _lines(_headers(step.headers))
        return _assembled(step.method, target.encode("ascii"), self.fixed + own, step.content or b"")


_SAFE = "/%:@!$&'()*+,;=~"
"""What stays unquoted in a request path (RFC 3986 `pchar`, `/` and `%`)."""

_JSON_LINES = _lines(_headers(JSON_TYPE))


async def send_async(pool: KeepAlive, origin: Origin, step: Send) -> Reply:
    """Send `step` on `pool`; its answer."""
    connect, read = _seconds(step.timeout)
    status, headers, content = await pool.exchange(
        origin.request(step), connect_timeout=connect, read_timeout=read
    )
    return Reply(status, headers, content)


class _Blocking:
    """One blocking connection: a socket, and when it went idle."""

    __slots__ = ("since", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock: socket.socket | None = sock
        self.since = 0.0

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class Started:
    """A request written on a blocking connection, its answer not read yet."""

    def __init__(self, pool: BlockingKeepAlive, connection: _Blocking, read: float | None):
        self._pool, self._connection = pool, connection
        self.read_timeout = read
        """Seconds `finish` waits for the answer (None: no limit)."""

    def arrived(self, timeout: float | None) -> bool:
        """True once the answer (or the connection's end) is here to read, waiting up to `timeout`."""
        sock = self._connection.sock
        return sock is None or bool(select.select([sock], [], [], timeout)[0])

    def finish(self) -> Reply:
        """Read the answer (waiting up to the request's read timeout between reads); the
        connection goes back to the pool once the answer is whole. Failures are httpx's
        transport errors."""
        return Reply(*self.finish_raw())

    def finish_raw(self) -> Answer:
        """`finish` as (status, headers, body)."""
        connection, ok = self._connection, False
        try:
            sock = connection.sock
            if sock is None:
                raise httpx.ReadError("the connection to Cosigner was closed")
            reading = Reading()
            sock.settimeout(self.read_timeout)
            while not reading.done:
                try:
                    data = sock.recv(READ_SIZE)
                except TimeoutError:
                    raise httpx.ReadTimeout(
                        f"Cosigner did not answer within {self.read_timeout:g} s"
                    ) from None
                except OSError as exc:
                    raise httpx.ReadError(f"reading Cosigner's answer: {exc}") from None
                if not data:
                    reading.end()
                    if not reading.done:
                        raise httpx.RemoteProtocolError("Cosigner closed the connection without an answer")
                    break
                reading.feed(data)
            ok = reading.keep_alive and not reading.stray
            return reading.status, reading.headers, b"".join(reading.body)
        finally:
            self._pool.release(connection, ok)


class BlockingKeepAlive:
    """Kept-alive HTTP/1.1 connections (blocking sockets) to one origin, for blocking callers
    on any thread.

    Each request takes an idle connection or opens one, and gives it back once its answer
    is read; up to `max_idle` idle connections are kept, for `EXPIRY` seconds each. `start`
    writes a request without reading its answer, so a report reaches Cosigner at once while
    another thread waits for the answer.
    """

    def __init__(
        self, origin: Origin, *, max_idle: int = 20, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.origin, self.max_idle, self._clock = origin, max_idle, clock
        self._idle: list[_Blocking] = []
        self._lock = threading.Lock()
        self._closed = False

    def send(self, step: Send) -> Reply:
        """Send `step` and return its answer."""
        started = self.start(step, connect=True)
        assert started is not None
        return started.finish()

    def start(self, step: Send, *, connect: bool) -> Started | None:
        """Write `step` on an idle connection (or a new one, with `connect`); None when no idle
        connection could take it and `connect` is False (nothing was written then)."""
        connect_timeout, read_timeout = _seconds(step.timeout)
        data = self.origin.request(step)
        connection = self._idle_connection()
        if connection is None:
            if not connect:
                return None
            connection = self._connect(connect_timeout)
        try:
            assert connection.sock is not None
            connection.sock.settimeout(connect_timeout)
            connection.sock.sendall(data)
        except OSError as exc:
            connection.close()
            if not connect:
                return None  # an idle connection that broke as it was taken: the worker sends anew
            raise httpx.WriteError(f"writing to Cosigner: {exc}") from None
        return Started(self, connection, read_timeout)

    def release(self, connection: _Blocking, reusable: bool) -> None:
        """Take back a connection whose answer was read; keep it if it can serve another."""
        if reusable and connection.sock is not None:
            connection.since = self._clock()
            with self._lock:
                if not self._closed and len(self._idle) < self.max_idle:
                    self._idle.append(connection)
                    return
        connection.close()

    def close(self) -> None:
        """Close the idle connections (those in use close when their answer is read)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _idle_connection(self) -> _Blocking | None:
        now = self._clock()
        while True:
            with self._lock:
                if not self._idle:
                    return None
                connection = self._idle.pop()
            if now - connection.since < EXPIRY and not _readable(connection):
                return connection
            connection.close()  # expired, closed by Cosigner, or holding bytes nobody asked for

    def _connect(self, timeout: float | None) -> _Blocking:
        address = (self.origin.host, self.origin.port)
        try:
            sock = socket.create_connection(address, timeout)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"could not connect to {address[0]}:{address[1]} in time") from None
        except OSError as exc:
            raise httpx.ConnectError(f"{address[0]}:{address[1]}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Blocking(sock)


def _readable(connection: _Blocking) -> bool:
    """True when an idle connection has something to read: its end, or bytes out of step."""
    return connection.sock is None or bool(select.select([connection.sock], [], [], 0)[0])
