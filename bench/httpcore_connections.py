"""httpcore's HTTP/1.1 connections in `cosigner._keepalive`'s place, tuned: measured, not shipped.

The SDK's plain-http requests (`AsyncCosigner`, `Cosigner`, the outbox's reports) sent on
httpcore's own HTTP/1.1 connections (h11 writes each request and reads each answer),
without httpx's client and without httpcore's pools:

- `AsyncConnections`: `httpcore.AsyncHTTP11Connection`s on a stream of the event loop's
  own protocol callbacks (`_AsyncSocket`), not anyio's streams;
- `BlockingConnections`: `httpcore.HTTP11Connection`s on blocking sockets, one per request
  in flight, shared between threads; `start` writes a request and `Started.finish` reads its
  answer later, as the outbox needs for a report written at once.

Both keep idle connections in a free list (the SDK talks to one origin). A connection is
handed to one request at a time, so the asyncio one runs the steps of
`handle_async_request` without its state lock (anyio's, a turn of the event loop per
acquire), its trace hooks and its response stream; the blocking one runs the same steps
split in two. Idle connections are dropped after `EXPIRY` seconds, when the server closed
them, and when bytes followed an answer (h11 would read them as the next answer).

Failures are httpx's transport errors, as with `_keepalive.py`; a request h11 refuses to
write (a line break in a header) is a ValueError. `bench/httpcore_sdk.py DIR` writes a copy
of the SDK sending through this module; bench/sdk_http.py measures it request by request.
Why it is not the SDK's: docs/architecture.md, "HTTP clients: which sends what, and why".
"""

from __future__ import annotations

import asyncio
import re
import select
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import quote, urlencode, urlsplit

import h11
import httpcore
import httpx
from httpcore._async.http11 import HTTPConnectionState as AsyncState
from httpcore._sync.http11 import HTTPConnectionState

from cosigner._core import Send
from cosigner._http import Reply

__all__ = ["EXPIRY", "AsyncConnections", "BlockingConnections", "Origin", "Started"]

EXPIRY = 5.0
"""Seconds an idle connection is kept for reuse (httpx's default keep-alive expiry)."""

READ_SIZE = 64 * 1024
"""Bytes read at once (httpcore's own read size)."""

Headers = list[tuple[bytes, bytes]]
"""Header (name, value) pairs."""

Answer = tuple[int, Headers, bytes]
"""(status, headers, body) of a response."""

_ERRORS: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
}


def _raise_as_httpx(exc: Exception) -> NoReturn:
    """httpcore's failure as httpx's (what the flows tell apart); a request h11 refuses to
    write (a line break in a header) as ValueError, not as a failure to retry."""
    if isinstance(exc, httpcore.LocalProtocolError):
        raise ValueError(f"cannot send this request to Cosigner: {exc}") from None
    for kind in type(exc).__mro__:
        mapped = _ERRORS.get(kind)
        if mapped is not None:
            raise mapped(str(exc) or type(exc).__name__) from None
    raise exc


def _timeouts(timeout: httpx.Timeout | float | None) -> dict[str, float | None]:
    """httpcore's timeout extension for a request's timeout."""
    if isinstance(timeout, httpx.Timeout):
        return {"connect": timeout.connect, "read": timeout.read, "write": timeout.write}
    return {"connect": timeout, "read": timeout, "write": timeout}


# Which answers leave a connection reusable: whole, and nothing after them.
def _reusable(connection: httpcore.AsyncHTTP11Connection | httpcore.HTTP11Connection) -> bool:
    # h11 keeps what followed an answer in its buffer, where the next request would read it
    # as its own answer: such a connection is out of step and is dropped.
    return connection.is_idle() and not connection._h11_state.trailing_data[0]


class _AsyncSocket(asyncio.Protocol, httpcore.AsyncNetworkStream):
    """A connection's bytes on the event loop's own protocol callbacks, as httpcore's stream."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._chunks: list[bytes] = []
        self._size = 0
        self._ended = False
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None

    @property
    def stale(self) -> bool:
        """Bytes nobody asked for, or the end of the stream: not to be reused."""
        return self._ended or bool(self._chunks)

    # asyncio's callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        if self._size > 4 * READ_SIZE and not self._paused and self._transport is not None:
            self._paused = True  # read by nobody yet: stop taking more
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool | None:
        self._ended = True
        self._wake()
        return None  # the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended = True
        self._wake()
        self.resume_writing()

    def pause_writing(self) -> None:
        self._writable = self.loop.create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # httpcore's stream
    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        if not self._chunks and not self._ended:
            waiter = self._waiter = self.loop.create_future()
            timer = None if timeout is None else self.loop.call_later(timeout, _expire, waiter, timeout)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
        if not self._chunks:
            return b""  # the end of the stream
        data = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        if len(data) > max_bytes:
            self._chunks.append(data[max_bytes:])
            data = data[:max_bytes]
        self._size = len(self._chunks[0]) if self._chunks else 0
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if self._transport is None or self._transport.is_closing():
            raise httpcore.WriteError("the connection to Cosigner is closed")
        self._transport.write(buffer)
        if self._writable is not None:  # the socket's buffer is full: wait until it drains
            try:
                await asyncio.wait_for(asyncio.shield(self._writable), timeout)
            except TimeoutError:
                raise httpcore.WriteTimeout(
                    f"Cosigner did not take the request within {timeout:g} s"
                ) from None

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        self._ended = True
        if self._transport is not None:
            self._transport.close()

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return self.stale
        return None if self._transport is None else self._transport.get_extra_info(info)


def _expire(waiter: asyncio.Future[None], seconds: float) -> None:
    if not waiter.done():
        waiter.set_exception(httpcore.ReadTimeout(f"Cosigner did not answer within {seconds:g} s"))


class _AsyncConnection(httpcore.AsyncHTTP11Connection):
    """httpcore's asyncio HTTP/1.1 connection, one request at a time: the steps of
    `handle_async_request` (h11 writes the request, then reads the answer) without its state
    lock, trace hooks and response stream, which a connection handed to one request by the
    free list does not need (anyio's lock alone takes a turn of the event loop per acquire)."""

    def __init__(self, origin: httpcore.Origin, stream: _AsyncSocket) -> None:
        super().__init__(origin, stream)
        self.io = stream

    async def exchange(self, request: httpcore.Request) -> Answer:
        """Write `request` and read its answer; the connection closes unless it is whole."""
        if self._state not in (AsyncState.NEW, AsyncState.IDLE):
            raise httpcore.ConnectionNotAvailable()
        self._request_count += 1
        self._state = AsyncState.ACTIVE
        self._expire_at = None
        try:
            try:
                await self._send_request_headers(request=request)
                await self._send_request_body(request=request)
            except httpcore.WriteError:
                pass  # an answer may still have come (as in httpcore): read it
            _, status, _, headers, _ = await self._receive_response_headers(request=request)
            content = b"".join([part async for part in self._receive_response_body(request=request)])
        except BaseException:
            self._state = AsyncState.CLOSED
            self.io.close()
            raise
        if self._h11_state.our_state is h11.DONE and self._h11_state.their_state is h11.DONE:
            self._state = AsyncState.IDLE  # `_response_closed`, without its lock
            self._h11_state.start_next_cycle()
        else:
            self._state = AsyncState.CLOSED
            self.io.close()
        return status, headers, content


class AsyncConnections:
    """Kept-alive HTTP/1.1 connections (httpcore's) to one origin, on the running event loop.

    At most `max_connections` requests are in flight at once (more wait for one to finish,
    as in httpx's pool); up to `max_idle` idle connections are kept. A request cut short
    (timeout, cancellation, a malformed answer) closes its connection.
    """

    def __init__(
        self,
        origin: Origin,
        *,
        max_connections: int = 100,
        max_idle: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.origin, self.max_idle, self._clock = origin, max_idle, clock
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: list[tuple[_AsyncConnection, float]] = []

    async def send(self, step: Send) -> Reply:
        """Send `step` and return its answer."""
        timeouts = _timeouts(step.timeout)
        request = self.origin.request(step, timeouts)
        await self._slots.acquire()
        try:
            connection = self._take_idle() or await self._connect(timeouts["connect"])
            ok = False
            try:
                status, headers, content = await connection.exchange(request)
                ok = _reusable(connection)
            except Exception as exc:
                _raise_as_httpx(exc)
            finally:
                self._release(connection, ok)
        finally:
            self._slots.release()
        return Reply(status, headers, content)

    def close(self) -> None:
        """Close the idle connections (those in use close when their request ends)."""
        idle, self._idle = self._idle, []
        for connection, _ in idle:
            connection.io.close()

    def _take_idle(self) -> _AsyncConnection | None:
        now = self._clock()
        loop = asyncio.get_running_loop()
        while self._idle:
            connection, since = self._idle.pop()
            stream = connection.io
            if now - since < EXPIRY and not stream.stale and stream.loop is loop:
                return connection
            stream.close()
        return None

    async def _connect(self, timeout: float | None) -> _AsyncConnection:  # noqa: ASYNC109
        host, port = self.origin.host, self.origin.port
        loop = asyncio.get_running_loop()
        try:
            _, stream = await asyncio.wait_for(loop.create_connection(_AsyncSocket, host, port), timeout)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"could not connect to {host}:{port} in time") from None
        except OSError as exc:
            raise httpx.ConnectError(f"{host}:{port}: {exc}") from exc
        return _AsyncConnection(self.origin.core, stream)

    def _release(self, connection: _AsyncConnection, ok: bool) -> None:
        if ok and len(self._idle) < self.max_idle:
            self._idle.append((connection, self._clock()))
        else:
            connection.io.close()


class _Socket(httpcore.NetworkStream):
    """A blocking socket as httpcore's stream."""

    __slots__ = ("_timeout", "since", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.since = 0.0
        self._timeout: float | None = sock.gettimeout()

    def _set_timeout(self, timeout: float | None) -> None:
        if timeout != self._timeout:
            self.sock.settimeout(timeout)
            self._timeout = timeout

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._set_timeout(timeout)
        try:
            return self.sock.recv(max_bytes)
        except TimeoutError:
            raise httpcore.ReadTimeout(f"Cosigner did not answer within {timeout:g} s") from None
        except OSError as exc:
            raise httpcore.ReadError(f"reading Cosigner's answer: {exc}") from None

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._set_timeout(timeout)
        try:
            self.sock.sendall(buffer)
        except TimeoutError:
            raise httpcore.WriteTimeout(f"Cosigner did not take the request within {timeout:g} s") from None
        except OSError as exc:
            raise httpcore.WriteError(f"writing to Cosigner: {exc}") from None

    def close(self) -> None:
        self.sock.close()

    def readable(self) -> bool:
        """True when an idle connection has something to read: its end, or bytes out of step."""
        return self.sock.fileno() < 0 or bool(select.select([self.sock], [], [], 0)[0])

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return self.readable()
        return self.sock if info == "socket" else None


class _Blocking(httpcore.HTTP11Connection):
    """httpcore's blocking HTTP/1.1 connection, its request writable now and its answer
    readable later (`start`, `finish`): the steps of `handle_request`, split in two."""

    def __init__(self, origin: httpcore.Origin, stream: _Socket) -> None:
        super().__init__(origin, stream)
        self.io = stream

    def start(self, request: httpcore.Request) -> None:
        """Write `request` whole; a failure closes the connection."""
        with self._state_lock:
            if self._state not in (HTTPConnectionState.NEW, HTTPConnectionState.IDLE):
                raise httpcore.ConnectionNotAvailable()
            self._request_count += 1
            self._state = HTTPConnectionState.ACTIVE
            self._expire_at = None
        try:
            self._send_request_headers(request=request)
            self._send_request_body(request=request)
        except BaseException:
            self.close()
            raise

    def finish(self, request: httpcore.Request) -> Answer:
        """Read the answer to the request `start` wrote; the connection closes unless it is whole."""
        try:
            _, status, _, headers, _ = self._receive_response_headers(request=request)
            content = b"".join(self._receive_response_body(request=request))
        except BaseException:
            self.close()
            raise
        self._response_closed()
        return status, headers, content


class Started:
    """A request written on a blocking connection, its answer not read yet."""

    def __init__(self, pool: BlockingConnections, connection: _Blocking, request: httpcore.Request):
        self._pool, self._connection, self._request = pool, connection, request
        self.read_timeout: float | None = request.extensions["timeout"]["read"]
        """Seconds `finish` waits for the answer between reads (None: no limit)."""

    def arrived(self, timeout: float | None) -> bool:
        """True once the answer (or the connection's end) is here to read, waiting up to `timeout`."""
        sock = self._connection.io.sock
        return sock.fileno() < 0 or bool(select.select([sock], [], [], timeout)[0])

    def finish(self) -> Reply:
        """Read the answer; the connection goes back to the pool once the answer is whole.
        Failures are httpx's transport errors."""
        return Reply(*self.finish_raw())

    def finish_raw(self) -> Answer:
        """`finish` as (status, headers, body)."""
        connection, ok = self._connection, False
        try:
            answer = connection.finish(self._request)
            ok = _reusable(connection)
            return answer
        except Exception as exc:
            _raise_as_httpx(exc)
        finally:
            self._pool.release(connection, ok)


class BlockingConnections:
    """Kept-alive HTTP/1.1 connections (httpcore's, on blocking sockets) to one origin, for
    blocking callers on any thread.

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
        timeouts = _timeouts(step.timeout)
        request = self.origin.request(step, timeouts)
        connection = self._take_idle()
        if connection is None:
            if not connect:
                return None
            connection = self._connect(timeouts["connect"])
        try:
            connection.start(request)
        except Exception as exc:
            if not connect and not isinstance(exc, httpcore.LocalProtocolError):
                return None  # an idle connection that broke as it was taken: the worker sends anew
            _raise_as_httpx(exc)
        return Started(self, connection, request)

    def release(self, connection: _Blocking, reusable: bool) -> None:
        """Take back a connection whose answer was read; keep it if it can serve another."""
        if reusable:
            connection.io.since = self._clock()
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

    def _take_idle(self) -> _Blocking | None:
        now = self._clock()
        while True:
            with self._lock:
                if not self._idle:
                    return None
                connection = self._idle.pop()
            if now - connection.io.since < EXPIRY and not connection.io.readable():
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
        return _Blocking(self.origin.core, _Socket(sock))


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


def _headers(headers: dict[str, str]) -> Headers:
    """`headers` as byte pairs, once every name is a token and no name or value holds a line
    break or NUL."""
    pairs = [(name.encode(), value.encode()) for name, value in headers.items()]
    for name, value in pairs:
        if _BAD_VALUE.search(name) or _BAD_VALUE.search(value):
            raise ValueError("a header name or value holds a line break")
        if not _TOKEN.fullmatch(name):
            raise ValueError(f"{name!r} is not a header name")
    return pairs


_SAFE = "/%:@!$&'()*+,;=~"
"""What stays unquoted in a request path (RFC 3986 `pchar`, `/` and `%`)."""

_JSON = [(b"Content-Type", b"application/json")]


@dataclass(frozen=True)
class Origin:
    """Where a client's requests go on kept-alive connections, and the headers every one carries."""

    host: str
    port: int
    prefix: str
    fixed: Headers
    """The headers every request carries (Host, authorization, user agent), checked once."""
    _urls: dict[str, httpcore.URL] = field(default_factory=dict, compare=False, repr=False)

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
        return cls(host, port, quote(parts.path.rstrip("/"), safe=_SAFE), fixed)

    @property
    def core(self) -> httpcore.Origin:
        """httpcore's name for this origin."""
        return httpcore.Origin(b"http", self.host.encode("ascii"), self.port)

    def request(self, step: Send, timeouts: dict[str, float | None]) -> httpcore.Request:
        """`step` as httpcore's request: target, headers, Content-Length, body."""
        target = self.prefix + quote(step.path, safe=_SAFE)
        if step.params:
            target += "?" + urlencode(step.params)
        headers = self.fixed
        if step.headers:  # most often just the JSON type, whose pair is made once
            own = _JSON if step.headers == {"Content-Type": "application/json"} else _headers(step.headers)
            headers = headers + own
        content = step.content or b""
        if content or step.method in ("POST", "PUT", "PATCH"):
            headers = [*headers, (b"Content-Length", b"%d" % len(content))]
        return httpcore.Request(
            step.method.encode(),
            self._url(target),
            headers=headers,
            content=content,
            extensions={"timeout": timeouts},
        )

    def _url(self, target: str) -> httpcore.URL:
        # Made once per path where paths repeat (`/v1/approvals`, a long-poll's).
        url = self._urls.get(target)
        if url is None:
            url = httpcore.URL(
                scheme=b"http", host=self.host.encode("ascii"), port=self.port, target=target.encode()
            )
            if len(self._urls) < 64:
                self._urls[target] = url
        return url
